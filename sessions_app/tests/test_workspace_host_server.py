"""`manage.py serve_workspaces --http`: a workspace host in one process (sessions_app/hosted/host_server.py).

The real command in a subprocess on the test's database: daphne answers the workspaces' paths and the health
probes and nothing else, the gate host answers on its status socket from the same process, and TERM stops
both. (The whole flow through it, shells and captures behind Caddy: test_split_hosts.py.)
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import requests

from conftest import ROOT, database_url, free_port, wait_started
from sessions_app.hosted import gate_host
from sessions_app.hosted.host_server import NOT_HERE, WorkspaceRoutesOnly

pytestmark = pytest.mark.django_db(transaction=True)  # the host reads the rows this test writes


@pytest.fixture
def ws_dir(settings):
    # why /tmp and a short name: a unix socket's path must stay under 108 bytes
    folder = Path(tempfile.mkdtemp(prefix="th-host-"))
    settings.WORKSPACES_DIR = folder
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def host_env(ws_dir: Path, settings) -> dict:
    return {**os.environ, "DEBUG": "true", "DATABASE_URL": database_url(), "TAKEHOME_CHANNEL_LAYER": "memory",
            "TAKEHOME_MEDIA_ROOT": str(settings.MEDIA_ROOT), "TAKEHOME_WORKSPACES_DIR": str(ws_dir),
            "TAKEHOME_WORKSPACE_HOST": "host-under-test"}


def start_host(port: int, env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "manage.py", "serve_workspaces", "--sweep-every", "3600",
                             "--http", f"tcp:port={port}:interface=127.0.0.1"],
                            cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)


def answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except (requests.ConnectionError, requests.Timeout):  # not up yet, or up and still busy starting
        return False


def test_it_serves_the_workspaces_requests_and_its_gate_in_one_process_until_term(
        ws_dir, settings, media_root, invitation, tmp_path):
    from sessions_app.actions import do_start_session

    do_start_session(invitation)
    port, log = free_port(), tmp_path / "host.log"
    host = start_host(port, host_env(ws_dir, settings), log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_started(host, lambda: answers(base + "/healthz"), "the workspace host", log)
        # the workspace's page is the app's own, served here
        page = requests.get(f"{base}/t/{invitation.raw_token}/workspace", timeout=30)
        assert page.status_code == 200 and 'id="terminal"' in page.text, page.text[:2000]
        # the rest of the app is not: the landing page, the upload, the recruiters' pages
        for path in (f"/t/{invitation.raw_token}/", f"/t/{invitation.raw_token}/upload", "/accounts/login/",
                     "/admin/"):
            refused = requests.get(base + path, timeout=10)
            assert (refused.status_code, refused.content) == (404, NOT_HERE), path
        # the gate host runs in the same process: its status socket answers, naming the host
        status = gate_host.ask_status(timeout=5)
        assert status["host"] == "host-under-test"
        assert host.poll() is None
    finally:
        host.send_signal(signal.SIGTERM)
        host.wait(20)
    output = log.read_text(errors="replace")
    assert host.returncode == 0 and "Stopped." in output, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert not gate_host.status_socket_path().exists()  # the gate host closed its sockets on the way out


def test_it_stops_with_the_reason_when_its_port_is_taken(ws_dir, settings, tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        log = tmp_path / "host.log"
        host = start_host(taken.getsockname()[1], host_env(ws_dir, settings), log)
        assert host.wait(60) != 0
    output = log.read_text(errors="replace")
    assert "Listen failure" in output and "The workspace host stopped" in output, output[-3000:]


def test_once_serves_nothing(ws_dir):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="leave out --http"):
        call_command("serve_workspaces", "--once", "--http", "tcp:port=1")
    with pytest.raises(CommandError, match="goes with --http"):
        call_command("serve_workspaces", "--proxy-headers")


def asgi(path: str, kind: str = "http") -> tuple[list[dict], list[str]]:
    """What WorkspaceRoutesOnly sends for a request of ``path``, and which paths reached the app behind it."""
    reached, sent = [], []

    async def app(scope, receive, send):
        reached.append(scope["path"])

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": f"{kind}.connect"} if kind == "websocket" else {"type": "http.request"}

    asyncio.run(WorkspaceRoutesOnly(app)({"type": kind, "path": path}, receive, send))
    return sent, reached


@pytest.mark.django_db(transaction=False)
def test_anything_but_the_workspaces_paths_is_refused_before_the_app():
    sent, reached = asgi("/accounts/login/")
    assert sent[0]["status"] == 404 and sent[1]["body"] == NOT_HERE and reached == []
    sent, reached = asgi("/t/tok/upload", "websocket")
    assert sent == [{"type": "websocket.close", "code": 4404}] and reached == []
    for path in ("/t/tok/workspace/files", "/t/tok/terminal", "/t/tok/model/v1/models", "/healthz"):
        sent, reached = asgi(path)
        assert sent == [] and reached == [path]
