"""The Caddyfile under the real `caddy` (Debian's 2.6 here, 2.7+ in compose), in front of the real daphne.

Caddy runs over plain HTTP on a free port: a wrapper config turns its admin API off and imports
the shipped Caddyfile, whose variables point it at a daphne started as make run starts it.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from conftest import ROOT, free_port, require, wait_started


def caddy() -> str:
    found = shutil.which("caddy")
    require(found is not None, "caddy is not installed (apt-get install caddy)")
    return str(found)


def caddy_env(tmp_path: Path, **variables: str) -> dict:
    """Caddy's environment: its data and autosaved config under tmp_path, the upstream's transport
    its version supports (the PROXY protocol needs 2.7)."""
    version = subprocess.run([caddy(), "version"], capture_output=True, text=True, check=True).stdout
    major, minor = (int(n) for n in re.search(r"(\d+)\.(\d+)", version).groups())
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "TAKEHOME_HOST": "takehome.example.com", **variables}
    if (major, minor) < (2, 7):
        env["TAKEHOME_UPSTREAM_TRANSPORT"] = "plain"
    return env


def test_the_caddyfile_is_valid(tmp_path):
    result = subprocess.run([caddy(), "validate", "--config", str(ROOT / "Caddyfile"), "--adapter", "caddyfile"],
                            env=caddy_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(15)


@pytest.fixture
def caddy_in_front(tmp_path):
    """daphne (make run's command line) behind Caddy; yields Caddy's URL."""
    daphne_port, caddy_port = free_port(), free_port()
    daphne = subprocess.Popen(
        [sys.executable, "-m", "daphne", "takehome.asgi:application", "--bind", "127.0.0.1", "--port",
         str(daphne_port), "--application-close-timeout", "10", "--verbosity", "0", "--no-server-name"],
        cwd=ROOT, stdout=(tmp_path / "daphne.log").open("ab"), stderr=subprocess.STDOUT)
    config = tmp_path / "Caddyfile"
    config.write_text("{\n\tadmin off\n}\nimport " + str(ROOT / "Caddyfile") + "\n")
    # make run's one daphne serves the workspaces' requests too
    env = caddy_env(tmp_path, TAKEHOME_HOST=f"http://127.0.0.1:{caddy_port}",
                    TAKEHOME_UPSTREAM=f"127.0.0.1:{daphne_port}", TAKEHOME_UPSTREAM_TRANSPORT="plain",
                    TAKEHOME_WORKSPACE_UPSTREAMS=f"127.0.0.1:{daphne_port}",
                    TAKEHOME_PROXY_PAGES=str(ROOT / "caddy"), TAKEHOME_UPLOAD_MAX_BYTES=str(20 * 2**20))
    proxy = subprocess.Popen([caddy(), "run", "--config", str(config), "--adapter", "caddyfile"], cwd=tmp_path,
                             env=env, stdout=(tmp_path / "caddy.log").open("ab"), stderr=subprocess.STDOUT)
    try:
        wait_started(proxy, lambda: listening(daphne_port) and listening(caddy_port), "daphne and Caddy",
                     tmp_path / "caddy.log", tmp_path / "daphne.log")
        yield f"http://127.0.0.1:{caddy_port}"
    finally:
        stop(proxy)
        stop(daphne)


def test_pages_through_caddy_name_no_server_and_carry_the_permissions_policy(caddy_in_front):
    page = requests.get(caddy_in_front + "/accounts/login/", timeout=30)
    assert page.status_code == 200 and "Server" not in page.headers, page.headers
    assert "camera=()" in page.headers["Permissions-Policy"]


def test_an_upload_over_caddys_limit_gets_a_page_saying_the_limit(caddy_in_front):
    r = requests.post(caddy_in_front + "/t/some-token/upload", data=b"\0" * (70 * 10**6),
                      headers={"Content-Type": "application/zip"}, timeout=120)
    assert r.status_code == 413 and r.headers["Content-Type"].startswith("text/html"), r.text[:2000]
    assert "Server" not in r.headers
    assert "larger than the limit of 20 MB" in r.text and "gate.py submit" in r.text


# --- sticky routing: an invitation's workspace requests reach the host that holds the workspace ---------------


class Upstream(ThreadingHTTPServer):
    """A stand-in for one server behind Caddy: answers every request with its own name, and keeps what it got."""

    daemon_threads = True

    def __init__(self, name: str, port: int):
        self.name, self.got = name, []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(handler):  # noqa: N805
                self.got.append((handler.path, dict(handler.headers)))
                body = self.name.encode()
                handler.send_response(200)
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body)

            do_POST = do_GET

            def log_message(handler, *args):  # noqa: N805
                pass

        super().__init__(("127.0.0.1", port), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture
def caddy_before_two_workspace_hosts(tmp_path):
    """The shipped Caddyfile in front of a web server and two workspace hosts (stand-ins answering their name)."""
    upstreams = {name: Upstream(name, free_port()) for name in ("web", "host-a", "host-b")}
    caddy_port = free_port()
    config = tmp_path / "Caddyfile"
    config.write_text("{\n\tadmin off\n}\nimport " + str(ROOT / "Caddyfile") + "\n")
    address = {name: f"127.0.0.1:{server.server_address[1]}" for name, server in upstreams.items()}
    env = caddy_env(tmp_path, TAKEHOME_HOST=f"http://127.0.0.1:{caddy_port}", TAKEHOME_UPSTREAM=address["web"],
                    TAKEHOME_UPSTREAM_TRANSPORT="plain",
                    TAKEHOME_WORKSPACE_UPSTREAMS=f"{address['host-a']} {address['host-b']}",
                    TAKEHOME_PROXY_PAGES=str(ROOT / "caddy"), TAKEHOME_UPLOAD_MAX_BYTES=str(20 * 2**20))
    proxy = subprocess.Popen([caddy(), "run", "--config", str(config), "--adapter", "caddyfile"], cwd=tmp_path,
                             env=env, stdout=(tmp_path / "caddy.log").open("ab"), stderr=subprocess.STDOUT)
    try:
        wait_started(proxy, lambda: listening(caddy_port), "Caddy", tmp_path / "caddy.log")
        yield f"http://127.0.0.1:{caddy_port}", upstreams
    finally:
        stop(proxy)
        for server in upstreams.values():
            server.shutdown()
            server.server_close()


# Every kind of request an invitation's workspace gets (sessions_app/hosted/paths.py), and the candidate's
# other requests, which the web server answers.
WORKSPACE_REQUESTS = [("GET", "workspace"), ("GET", "workspace/files"), ("GET", "workspace/files/read?path=a.py"),
                      ("POST", "workspace/files/save"), ("POST", "workspace/capture/red"), ("POST", "workspace/submit"),
                      ("GET", "workspace/read-only"), ("GET", "terminal?cols=80&rows=24"), ("GET", "model/chat"),
                      ("POST", "model/v1/chat/completions"), ("GET", "model/v1/models")]
WEB_REQUESTS = [("GET", ""), ("POST", "start"), ("GET", "download"), ("POST", "gate/red"), ("GET", "status"),
                ("POST", "upload"), ("GET", "uploads/3")]


def test_every_request_of_one_token_reaches_the_same_workspace_host_and_tokens_spread(caddy_before_two_workspace_hosts):
    base, upstreams = caddy_before_two_workspace_hosts
    http = requests.Session()
    http.trust_env = False  # loopback: never a proxy from the environment
    chosen = {}
    for number in range(40):
        token = f"Tok{number:02d}-{number * 7919:08x}_q"
        answered = set()
        for _ in range(3):
            for method, rest in WORKSPACE_REQUESTS:
                answered.add(http.request(method, f"{base}/t/{token}/{rest}", timeout=30).text)
        assert len(answered) == 1 and answered <= {"host-a", "host-b"}, (token, answered)
        chosen[token] = answered.pop()
        for method, rest in WEB_REQUESTS:
            assert http.request(method, f"{base}/t/{token}/{rest}", timeout=30).text == "web", (token, rest)
    # different tokens spread over both hosts
    assert set(chosen.values()) == {"host-a", "host-b"}, chosen
    # the header Caddy hashes on never reaches a host
    for name in ("host-a", "host-b"):
        assert upstreams[name].got and not any("X-Takehome-Workspace" in headers for _, headers in upstreams[name].got)
    # a client naming another token in that header changes nothing: Caddy replaces it with the path's
    one, other = next((a, b) for a in chosen for b in chosen if chosen[a] != chosen[b])
    steered = http.get(f"{base}/t/{one}/workspace", headers={"X-Takehome-Workspace": other}, timeout=30)
    assert steered.text == chosen[one]
    # nothing else goes to a workspace host: the recruiters' pages, the health probes, the static files
    for path in ("/accounts/login/", "/healthz", "/static/takehome/site.css", "/t/x/workspaces", "/review/1/"):
        assert http.get(base + path, timeout=30).text == "web", path
