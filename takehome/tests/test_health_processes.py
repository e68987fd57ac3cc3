"""Health with real processes: /readyz follows a worker and the broker as they stop and return, and the compose
file's healthchecks, run as written, answer for daphne, the worker and beat.

No Docker engine runs here: each healthcheck's command is run beside a process started as its service starts it.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, Worker, _wait_for, free_port
from takehome.tests.test_deployment_behind_proxy import compose_web_args

HEARTBEAT_S = 3  # the worker heartbeat's interval here: beat asks every second


def healthcheck(service: str) -> list[str]:
    """The compose service's healthcheck as a command line for this machine (the image's `python` is ours)."""
    test = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"][service]["healthcheck"]["test"]
    if test[0] == "CMD-SHELL":
        # why PATH: the image has celery on it; here it is in the virtualenv running the tests
        return ["sh", "-c", f"PATH={Path(sys.executable).parent}:$PATH " + test[1].replace("$$", "$")]
    return [sys.executable if word == "python" else word for word in test[1:]]


def run(command: list[str], env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def readyz(client) -> dict:
    response = client.get("/readyz")
    body = response.json()
    assert (response.status_code == 200) == (body["status"] == "ready")
    return {name: check["state"] for name, check in body["checks"].items()}


def not_ready_within(client, names: set[str], seconds: float) -> float:
    """Seconds until /readyz says every check in ``names`` fails; fails the test past ``seconds``."""
    start = time.monotonic()
    _wait_for(lambda: all(readyz(client)[name] == "fail" for name in names), seconds,
              f"/readyz to fail {sorted(names)}", interval=0.2)
    return time.monotonic() - start


class Beat:
    """`celery -A takehome beat`, as the compose file's beat service runs it, its schedule under ``folder``."""

    def __init__(self, env: dict, folder: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "takehome", "beat", "--loglevel=INFO",
             "--schedule", str(folder / "beat-schedule")],
            cwd=ROOT, env=env, stdout=(folder / "beat.log").open("ab"), stderr=subprocess.STDOUT,
            start_new_session=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)


@pytest.mark.worker
def test_readyz_follows_the_worker_and_the_broker_and_the_healthchecks_say_so(
        client, worker_env, stoppable_broker, settings, tmp_path):
    settings.WORKER_HEARTBEAT_S, settings.HEALTH_WORKSPACES = HEARTBEAT_S, "no"
    env = {**worker_env, "TAKEHOME_WORKER_HEARTBEAT_S": str(HEARTBEAT_S), "TAKEHOME_HEALTH_WORKSPACES": "no",
           "TAKEHOME_WARM_SANDBOXES": "0"}
    worker = Worker(env, tmp_path / "worker.log", name=f"health-{os.getpid()}")
    beat = Beat(env, tmp_path)
    worker.start()
    try:
        _wait_for(lambda: readyz(client) == {"database": "ok", "broker": "ok", "storage": "off", "workspaces": "off",
                                          "workers": "ok"},
                  60, "/readyz to say ready", interval=0.2)
        # The worker's healthcheck pings this very worker; beat's asks for a fresh heartbeat.
        ping = healthcheck("worker")
        ping[-1] = ping[-1].replace("celery@$HOSTNAME", f"{worker.name}@{socket.gethostname()}")
        done = run(ping, env)
        assert done.returncode == 0 and "pong" in done.stdout, done.stdout + done.stderr
        done = run(healthcheck("beat"), env)
        assert done.returncode == 0, done.stdout + done.stderr

        # The worker stops: not ready within one heartbeat interval (a little for the test's own polling).
        worker.stop()
        assert not_ready_within(client, {"workers"}, HEARTBEAT_S + 2) <= HEARTBEAT_S + 1
        quick = [*ping[:-1], ping[-1].replace("--timeout 10", "--timeout 2")]
        assert "--timeout 2" in quick[-1] and run(quick, env).returncode != 0
        assert run(healthcheck("beat"), env).returncode == 1
        worker.start()
        _wait_for(lambda: readyz(client)["workers"] == "ok", 60, "the worker to report in again", interval=0.2)

        # The broker stops: its check fails at once, and the heartbeats stop with it.
        stoppable_broker.stop()
        assert not_ready_within(client, {"broker"}, 2) < 1
        assert not_ready_within(client, {"workers"}, HEARTBEAT_S + 2) <= HEARTBEAT_S + 1
        stoppable_broker.start()
        _wait_for(lambda: set(readyz(client).values()) == {"ok", "off"}, 90, "/readyz to say ready again",
                  interval=0.2)
    finally:
        worker.stop()
        beat.stop()


@pytest.fixture
def compose_daphne(tmp_path):
    """daphne as the compose file's web service starts it (its haproxy: endpoint, on loopback), in production
    mode for another host name than the probe's."""
    port = free_port()
    env = {**os.environ, "DEBUG": "false", "SECRET_KEY": secrets.token_urlsafe(50),
           "ALLOWED_HOSTS": "takehome.example.com", "SITE_URL": "https://takehome.example.com"}
    log = tmp_path / "daphne.log"
    web = subprocess.Popen(compose_web_args(port), cwd=ROOT, env=env, stdout=log.open("ab"),
                           stderr=subprocess.STDOUT, start_new_session=True)

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            assert web.poll() is None, log.read_text(errors="replace")[-3000:]
            return False

    _wait_for(listening, 60, "daphne to listen", interval=0.2)
    yield port
    os.killpg(web.pid, signal.SIGTERM)
    web.wait(30)


def test_the_web_healthcheck_reaches_daphne_through_its_proxy_protocol_endpoint(compose_daphne):
    probe = healthcheck("web")
    assert probe[-1] == "http://127.0.0.1:8000/healthz"
    probe[-1] = f"http://127.0.0.1:{compose_daphne}/healthz"
    done = run(probe, os.environ)
    assert done.returncode == 0, done.stderr

    # Without the PROXY line daphne's endpoint drops the connection: the probe says so and fails.
    done = run([p for p in probe if p != "--proxy-protocol"], os.environ)
    assert done.returncode == 1 and "closed the connection without answering" in done.stderr
    # Any other page refuses the probe's Host (not one of ALLOWED_HOSTS), and a status but 200 fails it.
    done = run([*probe[:-1], f"http://127.0.0.1:{compose_daphne}/accounts/login/"], os.environ)
    assert done.returncode == 1 and " 400 Bad Request" in done.stderr


def test_the_web_healthcheck_fails_when_nothing_listens():
    done = run([sys.executable, "-m", "shared.probe", "--proxy-protocol", f"http://127.0.0.1:{free_port()}/healthz"],
               os.environ)
    assert done.returncode == 1 and "refused" in done.stderr.lower()
