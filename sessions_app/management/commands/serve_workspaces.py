import asyncio
import fcntl
import logging
import signal
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sessions_app.hosted.gate_host import GateHost, sweep


class Command(BaseCommand):
    help = (
        "The host side of hosted sessions: answers the `gate` command of every open workspace on its "
        "unix socket (<workspace>/gate/gate.sock), stops shells idle past TAKEHOME_WORKSPACE_IDLE_MINUTES "
        "and freezes workspaces past the deadline plus grace. Runs until stopped (TERM or Ctrl-C); one per "
        "server. --once sweeps once and exits. --http also serves the workspaces' pages, editor and terminal "
        "in the same process: a workspace host of its own, behind a proxy that sends it those paths."
    )

    def add_arguments(self, parser):
        parser.add_argument("--sweep-every", type=float, default=30.0,
                            help="Seconds between sweeps (idle stop, deadline freeze); default 30.")
        parser.add_argument("--once", action="store_true", help="Sweep once, print what was done, and exit.")
        parser.add_argument("--http", action="append", default=[], metavar="ENDPOINT",
                            help="Also serve the workspaces' requests (sessions_app/hosted/paths.py) over HTTP and "
                                 "WebSockets on this Twisted endpoint, as daphne's -e (e.g. "
                                 "haproxy:tcp:port=8000:interface=0.0.0.0, or tcp:port=8001:interface=127.0.0.1); "
                                 "may be given more than once.")
        parser.add_argument("--proxy-headers", action="store_true",
                            help="With --http: take the client's address and scheme from X-Forwarded-For and "
                                 "X-Forwarded-Proto, as daphne's --proxy-headers (a proxy without the PROXY "
                                 "protocol).")

    def handle(self, *args, **options):
        if options["sweep_every"] <= 0:
            raise CommandError("--sweep-every must be above 0 seconds.")
        if not settings.HOLDS_WORKSPACES:
            raise CommandError("This server holds no hosted workspaces (TAKEHOME_HOLDS_WORKSPACES=false): run "
                               "serve_workspaces on the workspace host, or set it to true here.")
        if options["once"]:
            if options["http"]:
                raise CommandError("--once sweeps and exits; it serves nothing: leave out --http.")
            for line in sweep():
                self.stdout.write(line)
            return
        if options["proxy_headers"] and not options["http"]:
            raise CommandError("--proxy-headers goes with --http, which says where to serve.")
        folder = Path(settings.WORKSPACES_DIR)
        folder.mkdir(parents=True, exist_ok=True)
        lock = (folder / "serve_workspaces.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CommandError(f"Another serve_workspaces already serves {folder}: one per server.") from None
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if options["http"]:
            from sessions_app.hosted.host_server import serve

            self.stdout.write(f"Serving the hosted workspaces under {folder}: their gate, and their requests on "
                              f"{', '.join(options['http'])}.")
            if not serve(options["http"], proxy_headers=options["proxy_headers"],
                         sweep_every_s=options["sweep_every"]):
                raise CommandError("The workspace host stopped: see the errors above.")
            self.stdout.write("Stopped.")
            return
        self.stdout.write(f"Serving the gate of hosted workspaces under {folder}.")
        asyncio.run(self._serve(options["sweep_every"]))
        self.stdout.write("Stopped.")

    async def _serve(self, sweep_every: float) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await GateHost(sweep_every_s=sweep_every).run(stop)
