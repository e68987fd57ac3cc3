"""A workspace host in one process: daphne serving the workspaces' requests, the gate host beside it.

``manage.py serve_workspaces --http ENDPOINT`` runs this; docker-compose.yml's ``workspaces`` service is it.
That container alone may mount the workspaces' files and start their shells: its web server holds no
workspaces (TAKEHOME_HOLDS_WORKSPACES=false), and the proxy sends each invitation's workspace paths
(paths.py) here. daphne here answers those paths and the health probes, nothing else (404), so the
privileged process serves no more of the app than the workspaces need.

why one process: a container runs one long-lived process, which Docker restarts when it ends and whose
liveness one probe tells: daphne answering /healthz proves the event loop that the gate host's sockets
run on turns, and when the gate host ends the process ends with it. And the workspaces' mounts and shells
must live where both the terminal that opens them and the sweep that saves them are. The gate host's
commands and sweeps run in a thread pool of their own: a `gate red` never takes a thread the pages'
views need.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from .gate_host import GateHost
from .paths import served_by_workspace_host

log = logging.getLogger(__name__)

NOT_HERE = b"Not found: this server answers the hosted workspaces' requests only.\n"
NOT_HERE_CLOSE = 4404


class WorkspaceRoutesOnly:
    """An ASGI app answering only what a workspace host serves (paths.served_by_workspace_host); 404 otherwise.

    why: the host runs with the privileges the workspaces need; a page of the recruiters' or an upload
    reaching it (a proxy misconfigured, a port published by mistake) is refused rather than served there.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and not served_by_workspace_host(scope.get("path", "")):
            if scope["type"] == "http":
                await send({"type": "http.response.start", "status": 404,
                            "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                        (b"content-length", str(len(NOT_HERE)).encode())]})
                await send({"type": "http.response.body", "body": NOT_HERE})
            else:
                await send({"type": "websocket.close", "code": NOT_HERE_CLOSE})
            return
        await self.app(scope, receive, send)


def daphne_arguments(endpoints: list[str], proxy_headers: bool) -> list[str]:
    """daphne's command line for the workspace host: the web server's own options (docker-compose.yml, make run).

    --verbosity 0: no access log of daphne's (it names each path whole, a link's token with it);
    --no-server-name: no `Server: daphne` header; --application-close-timeout 10 as the web server's.
    """
    arguments = [word for endpoint in endpoints for word in ("-e", endpoint)]
    arguments += ["--application-close-timeout", "10", "--verbosity", "0", "--no-server-name"]
    if proxy_headers:
        arguments.append("--proxy-headers")
    return [*arguments, "takehome.asgi:application"]


def serve(endpoints: list[str], *, proxy_headers: bool = False, sweep_every_s: float = 30.0) -> bool:
    """Serve the workspaces' requests on ``endpoints`` (Twisted endpoint strings, as daphne's -e) and run the gate
    host, until TERM or Ctrl-C. Returns False when it stopped on its own: daphne could not listen, or the gate
    host ended."""
    # why first: importing daphne's server installs Twisted's asyncio reactor, which nothing may have done before
    from daphne.cli import CommandLineInterface
    from daphne.server import Server
    from twisted.internet import defer, reactor

    state = {"failed": False, "stopping": False}
    executor = ThreadPoolExecutor(thread_name_prefix="gate-host")
    gate_host = GateHost(sweep_every_s=sweep_every_s, executor=executor)

    class HostServer(Server):
        """daphne's server, with the gate host started on its loop once the reactor runs, stopped before it ends."""

        def run(self):
            reactor.callWhenRunning(self.start_gate_host)
            super().run()

        def start_gate_host(self) -> None:
            stop = asyncio.Event()
            task = asyncio.ensure_future(gate_host.run(stop))

            def ended(task: asyncio.Future) -> None:
                if state["stopping"]:
                    return
                state["failed"] = True
                error = None if task.cancelled() else task.exception()
                log.error("the gate host stopped by itself (%s); stopping the workspace host so that it is "
                          "restarted", error or "no error")
                self.stop()

            def stop_gate_host():
                state["stopping"] = True
                stop.set()
                return defer.Deferred.fromFuture(task)

            task.add_done_callback(ended)
            reactor.addSystemEventTrigger("before", "shutdown", stop_gate_host)

        def listen_error(self, failure):
            state["failed"] = True
            super().listen_error(failure)

    class HostCommandLine(CommandLineInterface):
        server_class = HostServer

        def load_asgi_app(self, path):
            return WorkspaceRoutesOnly(super().load_asgi_app(path))

    try:
        HostCommandLine().run(daphne_arguments(endpoints, proxy_headers))
    except SystemExit as exc:  # daphne's own exit when it could not start
        state["failed"] = state["failed"] or bool(exc.code)
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
    return not state["failed"]

