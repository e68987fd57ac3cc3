"""The production settings under daphne, as docker-compose.yml runs them, behind a TLS proxy.

No Docker engine runs here, so this test plays Caddy's part: it starts daphne
with the very command line of the compose file's web service (on loopback, a port
in 8460-8469) with DEBUG off and a real SECRET_KEY, plus a real `celery worker`,
and sends requests as Caddy forwards them: plain HTTP carrying
`X-Forwarded-Proto: https`, each connection opened with the PROXY protocol line
naming the client (a relay in front of daphne adds it, as Caddy does; daphne's
haproxy: endpoint refuses a connection without one). A
recruiter logs in and invites, the candidate uploads, the worker grades, a
reviewer scores and submits, all over HTTP.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
import yaml

from conftest import ROOT, Worker, _wait_for, free_port, require, wait_started
from grading.models import Review
from sessions_app.models import Submission

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
GRADING_WAIT_S = 120
PASSWORD = "a-long-enough-password-7"



def compose_web_args(port: int) -> list[str]:
    """The web service's daphne command from docker-compose.yml, bound to loopback instead."""
    command = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]["command"]
    shell_line = shlex.split(command)[2]  # sh -c "<migrate && load && exec daphne ...>"
    args = shlex.split(shell_line.split("&&")[-1])
    assert args[:2] == ["exec", "daphne"], args
    args = args[1:]
    at = args.index("-e")
    assert args[at + 1] == "haproxy:tcp:port=8000:interface=0.0.0.0", args
    args[at + 1] = f"haproxy:tcp:port={port}:interface=127.0.0.1"
    return [sys.executable, "-m", *args]


class ProxyProtocolRelay:
    """Caddy's part on the wire: each connection to ``port`` goes on to daphne's ``target`` port after a PROXY v1
    line naming the client. ``target`` is chosen once ``port`` is taken."""

    def __init__(self, port: int):
        self.listener = socket.create_server(("127.0.0.1", port))
        self.target = free_port()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                client, (host, client_port) = self.listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=60)
            except OSError:  # daphne is not listening yet: the client sees the connection close
                client.close()
                continue
            upstream.sendall(f"PROXY TCP4 {host} 127.0.0.1 {client_port} {self.target}\r\n".encode())
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.copy, args=(source, sink), daemon=True).start()

    @staticmethod
    def copy(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()


class Browser:
    """One person's requests, as Caddy forwards them to daphne."""

    def __init__(self, base: str, site: str):
        self.base, self.site = base, site
        self.http = requests.Session()
        self.http.trust_env = False  # loopback: never a proxy from the environment
        self.http.headers["X-Forwarded-Proto"] = "https"

    def cookies(self) -> dict:
        # why by hand: every cookie is Secure in production, so requests keeps them from this
        # http:// address; the proxy is the https end, and the browser would send them to it.
        return {"Cookie": "; ".join(f"{c.name}={c.value}" for c in self.http.cookies)}

    def get(self, path: str) -> requests.Response:
        return self.http.get(self.base + path, headers=self.cookies(), allow_redirects=False, timeout=30)

    def post(self, path: str, data=None, files=None, htmx: bool = False) -> requests.Response:
        # why Origin and Referer: Django checks them on every https POST (CSRF), as a browser sends them.
        headers = {"Origin": self.site, "Referer": self.site + path,
                   "X-CSRFToken": self.http.cookies.get("csrftoken", ""), **self.cookies()}
        if htmx:
            headers["HX-Request"] = "true"
        return self.http.post(self.base + path, data=data, files=files, headers=headers,
                              allow_redirects=False, timeout=60)

    def log_in(self, username: str) -> None:
        assert self.get("/accounts/login/").status_code == 200
        r = self.post("/accounts/login/", {"username": username, "password": PASSWORD})
        assert r.status_code == 302, r.text[-2000:]


def collected_static(env: dict) -> Path:
    """The static files as the image's build collects them (whitenoise's manifest, compressed): once per
    content of static/, shared by the tests of every test process (compressing every file is most of it)."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "static").rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    folder = Path(os.environ.get("TAKEHOME_VAR_DIR") or ROOT / "var") / "collected-static" / digest.hexdigest()[:16]
    if (folder / "staticfiles.json").exists():
        return folder
    staging = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT,
                   env={**env, "TAKEHOME_STATIC_ROOT": str(staging)}, check=True, timeout=300)
    try:
        staging.rename(folder)  # why a rename: another test process may be collecting the same at once
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not (folder / "staticfiles.json").exists():
            raise
    return folder


def raw_request(port: int, path: str, client_ip: str) -> int:
    """One request as Caddy sends it with `proxy_protocol v1`: the PROXY line first. Returns the status."""
    request = (f"PROXY TCP4 {client_ip} 127.0.0.1 40000 {port}\r\n"
               f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Forwarded-Proto: https\r\n"
               "Connection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(request)
        first = conn.makefile("rb").readline().decode()
    return int(first.split()[1])


def misses_in_one_minute(port: int, client_ip: str) -> list[int] | None:
    """Four look-ups of unknown links from ``client_ip``: their statuses, or None when a minute turned between
    the first and the last.

    why: the server counts misses in wall-clock minutes (sessions_app/links.py), so look-ups that straddle a
    minute's turn are counted in two windows; on a loaded machine four of them through the proxy can take
    seconds. Asked again from another address, in the new minute, they fit in one.
    """
    began = time.time()
    statuses = [raw_request(port, f"/t/no-such-token-{i}/", client_ip) for i in range(4)]
    return statuses if began // 60 == time.time() // 60 else None


@pytest.fixture
def production(worker_env, media_root, tmp_path, sample_packet):
    """daphne with the compose file's command behind the relay, and a worker, in production mode.

    Yields (base URL, site URL, the worker, daphne's own port).
    """
    from sessions_app.tests.helpers import runner_python

    require(shutil.which("bwrap") is not None, "bubblewrap is not installed (apt-get install bubblewrap)")
    require(runner_python().exists(), f"{runner_python()} is missing: run `make runner`")
    port = free_port()
    relay = ProxyProtocolRelay(port)
    web_port = relay.target
    site = f"https://127.0.0.1:{port}"
    env = {
        **worker_env,
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "SITE_URL": site,
        "TAKEHOME_STATIC_ROOT": "",  # set below
        "EMAIL_URL": "consolemail://",
        # One count of link look-ups for the web and worker processes, as Redis gives it in compose.
        "CACHE_URL": f"filecache://{tmp_path / 'cache'}",
        "TAKEHOME_TOKEN_LOOKUPS_PER_MINUTE": "3",
        # why: the candidate here uploads a finished zip at once; the path is what is tested.
        "TAKEHOME_MIN_RED_TO_GREEN_S": "0",
    }
    env["TAKEHOME_STATIC_ROOT"] = str(collected_static(env))
    log = tmp_path / "daphne.log"
    web = subprocess.Popen(compose_web_args(web_port), cwd=ROOT, env=env, stdout=log.open("ab"),
                           stderr=subprocess.STDOUT, start_new_session=True)
    worker = Worker(env, tmp_path / "worker.log", name=f"prod-{port}")
    worker.start()
    base = f"http://127.0.0.1:{port}"

    def up():
        try:
            return requests.get(base + "/accounts/login/", headers={"X-Forwarded-Proto": "https"},
                                timeout=5).status_code == 200
        except (requests.ConnectionError, requests.Timeout):  # not up yet, or up and still busy starting
            return False

    try:
        wait_started(web, up, "daphne to answer", log, interval=0.5)
        yield base, site, worker, web_port
    finally:
        relay.close()
        worker.stop()
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGTERM)  # daphne and anything it started
            try:
                web.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(web.pid, signal.SIGKILL)
                web.wait(30)


@pytest.fixture
def people(groups, settings):
    """A recruiter and a reviewer whose passwords production's hasher can check."""
    from django.contrib.auth.models import User

    # why: the test process hashes with MD5 for speed; production knows only its default hashers.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    for name, group in (("rita", "recruiter"), ("rob", "reviewer")):
        User.objects.create_user(name, password=PASSWORD).groups.add(groups[group])


def test_plain_http_goes_to_https_forwarded_https_is_served_securely_and_clients_are_told_apart(production):
    base, site, _, web_port = production
    plain = requests.get(base + "/accounts/login/", allow_redirects=False, timeout=30)
    assert plain.status_code == 301 and plain.headers["Location"] == site + "/accounts/login/"

    r = requests.get(base + "/accounts/login/", headers={"X-Forwarded-Proto": "https"}, timeout=30)
    assert r.status_code == 200
    assert r.headers["Strict-Transport-Security"].startswith("max-age=")
    assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    assert "; secure" in r.headers["Set-Cookie"].lower()  # the CSRF cookie only ever travels over https
    # Static files come from whitenoise with the manifest's hashed names.
    css = re.search(r'href="(/static/takehome/site\.[0-9a-f]+\.css)"', r.text)
    assert css, "the stylesheet is not served under its hashed name"
    assert requests.get(base + css.group(1), headers={"X-Forwarded-Proto": "https"}, timeout=30).status_code == 200

    # Link look-ups are counted per client address, which Caddy passes in the PROXY protocol line.
    first = misses_in_one_minute(web_port, "203.0.113.9") or misses_in_one_minute(web_port, "203.0.113.11")
    assert first == [404, 404, 404, 429]
    # Another candidate behind the same proxy is not held back by the first one's misses.
    assert raw_request(web_port, "/t/no-such-token-x/", "203.0.113.10") == 404


def test_log_in_invite_upload_grade_and_review_behind_the_proxy(production, people, sample_packet):
    from sessions_app.tests.helpers import honest_zip

    base, site, worker, _ = production

    recruiter = Browser(base, site)
    recruiter.log_in("rita")
    invite = f"/packets/{sample_packet.slug}/invite/"
    assert recruiter.get(invite).status_code == 200
    r = recruiter.post(invite, {"lines": "Ada Lovelace, ada@example.com"})
    assert r.status_code == 200, r.text[-2000:]
    links = set(re.findall(re.escape(site) + r"/t/([^/\"]+)/", r.text))
    assert len(links) == 1, r.text[-3000:]
    token = links.pop()

    candidate = Browser(base, site)
    landing = f"/t/{token}/"
    assert candidate.get(landing).status_code == 200
    assert candidate.get(f"/t/{token}/start").status_code == 200  # Start asks first
    assert candidate.post(f"/t/{token}/start", {"confirm": "yes"}).status_code in (200, 302)
    r = candidate.post(f"/t/{token}/upload", files={"archive": ("work.zip", honest_zip(), "application/zip")})
    assert r.status_code in (200, 201, 302), r.text[-2000:]
    submission = Submission.objects.get(invitation__candidate__email="ada@example.com")

    def graded():
        return Submission.objects.filter(pk=submission.pk, status__in=Submission.FINISHED).first()

    try:
        done = _wait_for(graded, GRADING_WAIT_S, "the upload to be graded", interval=0.5)
    except AssertionError:
        raise AssertionError("worker log:\n" + worker.output()[-6000:])
    assert done.status == Submission.Status.GRADED, done.reject_reason

    reviewer = Browser(base, site)
    reviewer.log_in("rob")
    page = reviewer.get(f"/review/{submission.pk}/")
    assert page.status_code == 200 and "Ada Lovelace" in page.text
    for cell in ("red_log", "model_waited", "refusal_specific", "test_names_bug"):
        r = reviewer.post(f"/review/{submission.pk}/mark/{cell}/", {"passed": "true", "note": ""}, htmx=True)
        assert r.status_code == 200 and "Saved: pass" in r.text, r.text[-2000:]
    r = reviewer.post(f"/review/{submission.pk}/submit/", {"confirm": "yes"})  # final marks: confirmed
    assert r.status_code == 302, r.text[-2000:]
    assert reviewer.get(f"/review/{submission.pk}/").text.count("Your review is submitted") == 1
    review = Review.objects.get(submission=submission)
    assert review.submitted_at is not None and review.reviewer.username == "rob"
