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
        "server. --once sweeps once and exits."
    )

    def add_arguments(self, parser):
        parser.add_argument("--sweep-every", type=float, default=30.0,
                            help="Seconds between sweeps (idle stop, deadline freeze); default 30.")
        parser.add_argument("--once", action="store_true", help="Sweep once, print what was done, and exit.")

    def handle(self, *args, **options):
        if options["sweep_every"] <= 0:
            raise CommandError("--sweep-every must be above 0 seconds.")
        if options["once"]:
            for line in sweep():
                self.stdout.write(line)
            return
        folder = Path(settings.WORKSPACES_DIR)
        folder.mkdir(parents=True, exist_ok=True)
        lock = (folder / "serve_workspaces.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CommandError(f"Another serve_workspaces already serves {folder}: one per server.") from None
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.stdout.write(f"Serving the gate of hosted workspaces under {folder}.")
        asyncio.run(self._serve(options["sweep_every"]))
        self.stdout.write("Stopped.")

    async def _serve(self, sweep_every: float) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await GateHost(sweep_every_s=sweep_every).run(stop)
