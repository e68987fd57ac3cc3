"""/healthz and /readyz: what each check says with its service up, down or stalled, and what they never say."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import timedelta

import pytest
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from conftest import ROOT, free_port, point_celery_at, require
from grading.models import GradingRun
from grading.tests.reviewing import make_submission
from shared.health import plain_error
from shared.models import WorkerHeartbeat

SECRET_WORD = "hunter2-not-for-your-eyes"


@pytest.fixture
def worker_seen(db):
    """A worker that reported in just now."""
    return WorkerHeartbeat.objects.create(hostname="worker-7", seen_at=timezone.now())


@pytest.fixture
def production(settings):
    """The production settings a probe meets: https enforced, only the site's own host name allowed."""
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["takehome.example.com"]
    settings.HEALTH_WORKSPACES = "no"


@pytest.fixture
def closed_broker(broker_url):
    """The broker setting pointed at a closed port (with a password in its URL), for this test only."""
    import os

    before = os.environ.get("CELERY_BROKER_URL")
    url = f"redis://:{SECRET_WORD}@127.0.0.1:{free_port()}/0"
    point_celery_at(url, url)
    yield url
    point_celery_at(broker_url, before)


def probe(client, path: str):
    # why 127.0.0.1 and plain http: what a container's healthcheck sends, which production settings would
    # otherwise refuse (ALLOWED_HOSTS) or redirect (SECURE_SSL_REDIRECT)
    return client.get(path, headers={"Host": "127.0.0.1:8000"})


def states(response) -> dict:
    return {name: check["state"] for name, check in response.json()["checks"].items()}


def test_healthz_answers_without_the_database(client, production):
    # No django_db mark: a database query here would fail the test.
    response = probe(client, "/healthz")
    assert response.status_code == 200 and response.json() == {"status": "alive"}
    assert "no-store" in response["Cache-Control"]
    assert "Set-Cookie" not in response


def test_readyz_is_ready_with_the_database_the_broker_and_a_worker(client, production, worker_seen, broker_url):
    require(broker_url is not None, "redis-server is not installed (apt-get install redis-server)")
    response = probe(client, "/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ready"
    assert states(response) == {"database": "ok", "broker": "ok", "storage": "off", "workspaces": "off", "workers": "ok"}
    assert body["checks"]["workers"]["reason"].startswith("worker-7 reported in ")
    assert "no-store" in response["Cache-Control"] and "Set-Cookie" not in response


def test_readyz_needs_no_login_and_no_https_however_the_site_is_set(client, production, worker_seen):
    # Anonymous, plain http, a Host the site does not serve: an answer, never a redirect or a 400.
    for host in ("127.0.0.1:8000", "web:8000", "localhost"):
        response = client.get("/readyz", headers={"Host": host})
        assert response.status_code in (200, 503), (host, response.status_code)
        assert response["Content-Type"] == "application/json"
    assert client.get("/packets/", headers={"Host": "takehome.example.com"}).status_code == 301  # the rest: https


def test_readyz_answers_post_with_405(client, production):
    response = client.post("/readyz", headers={"Host": "127.0.0.1"})
    assert response.status_code == 405 and response["Allow"] == "GET, HEAD"


def test_readyz_fails_at_once_on_a_broker_at_a_closed_port_and_leaks_nothing(
        client, production, worker_seen, closed_broker, settings, connects):
    response = probe(client, "/readyz")
    port = int(closed_broker.rsplit(":", 1)[1].split("/")[0])
    assert [a for a in connects if a[1:] == (port,)] == [("127.0.0.1", port)]  # one try, no retry
    assert response.status_code == 503
    assert response.json()["status"] == "not ready"
    assert states(response) == {"database": "ok", "broker": "fail", "storage": "off", "workspaces": "off", "workers": "ok"}
    reason = response.json()["checks"]["broker"]["reason"]
    assert "refused" in reason.lower(), reason
    text = response.content.decode()
    assert SECRET_WORD not in text and settings.SECRET_KEY not in text and str(settings.VAR_DIR) not in text


def test_readyz_gives_up_on_a_stalled_broker_within_the_timeout(client, production, worker_seen,
                                                                 stoppable_broker, settings, connects):
    assert states(probe(client, "/readyz"))["broker"] == "ok"
    stoppable_broker.pause()  # accepts connections, answers nothing
    connects.clear()
    # why the short timeout for this probe alone: the probes of a working broker, Redis and database keep the
    # default, since a loaded machine can take longer than half a second to answer them
    default, settings.HEALTH_TIMEOUT_S = settings.HEALTH_TIMEOUT_S, 0.5
    # why no clock: the broker answers nothing, so an answer at all means the check gave up, after one try
    response = probe(client, "/readyz")
    settings.HEALTH_TIMEOUT_S = default
    assert response.status_code == 503 and states(response)["broker"] == "fail"
    assert "timeout" in response.json()["checks"]["broker"]["reason"].lower(), response.json()
    assert len([a for a in connects if a == stoppable_broker.address]) == 1, connects
    stoppable_broker.resume()
    assert probe(client, "/readyz").status_code == 200


def test_readyz_is_not_ready_without_a_recent_heartbeat(client, production, db, settings, broker_url):
    settings.WORKER_HEARTBEAT_S = 30
    response = probe(client, "/readyz")
    assert response.status_code == 503 and states(response)["workers"] == "fail"
    assert "none has ever reported" in response.json()["checks"]["workers"]["reason"]

    WorkerHeartbeat.objects.create(hostname="worker-7", seen_at=timezone.now() - timedelta(minutes=5))
    response = probe(client, "/readyz")
    assert response.status_code == 503 and states(response)["workers"] == "fail"
    reason = response.json()["checks"]["workers"]["reason"]
    assert "within 30 s" in reason and "worker-7, 5 min ago" in reason

    WorkerHeartbeat.objects.filter(hostname="worker-7").update(seen_at=timezone.now() - timedelta(seconds=29))
    assert states(probe(client, "/readyz"))["workers"] == "ok"


def test_a_worker_busy_grading_counts_as_alive(client, production, sample_packet, settings):
    # Its report waits behind the gradings in the queue; the runs it grades say it is alive meanwhile.
    settings.WORKER_HEARTBEAT_S = 30
    WorkerHeartbeat.objects.create(hostname="worker-7", seen_at=timezone.now() - timedelta(minutes=5))
    run = GradingRun.objects.create(submission=make_submission(sample_packet, status="grading"), attempt=1,
                                    worker="busy@host", heartbeat_at=timezone.now() - timedelta(seconds=10))
    response = probe(client, "/readyz")
    assert states(response)["workers"] == "ok"
    assert response.json()["checks"]["workers"]["reason"].startswith("busy@host is grading")

    GradingRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=2))
    assert states(probe(client, "/readyz"))["workers"] == "fail"  # its heartbeat stopped: it died
    GradingRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now(), outcome="graded")
    assert states(probe(client, "/readyz"))["workers"] == "fail"  # it ended: only running runs count


def test_readyz_with_the_database_unreachable(client, production, worker_seen, monkeypatch, settings):
    live = connections[DEFAULT_DB_ALIAS].settings_dict
    if connections[DEFAULT_DB_ALIAS].vendor == "sqlite":
        monkeypatch.setitem(live, "NAME", str(settings.VAR_DIR / "no-such-folder" / "db.sqlite3"))
    else:
        monkeypatch.setitem(live, "PORT", str(free_port()))
    response = probe(client, "/readyz")  # a closed port or a missing folder: refused at once, no timeout to wait
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"]["state"] == "fail" and checks["workers"]["state"] == "unknown"
    assert str(settings.VAR_DIR) not in response.content.decode()


@pytest.mark.parametrize(("error", "shown"), [
    (OSError("Error 111 connecting to 127.0.0.1:6379. Connection refused."),
     "OSError: Error 111 connecting to 127.0.0.1:6379. Connection refused."),
    (OSError("Error 2 connecting to /srv/takehome/var/redis/redis.sock. No such file or directory."),
     "OSError: Error 2 connecting to redis.sock. No such file or directory."),
    (ValueError("cannot reach redis://:s3cret@redis:6379/0"), "ValueError: cannot reach redis://redis:6379/0"),
    (ValueError("postgres://takehome:s3cret@postgres:5432/takehome refused"),
     "ValueError: postgres://postgres:5432/takehome refused"),
    (ValueError('connection to server at "127.0.0.1", port 5432 failed\n\tIs the server running?'),
     'ValueError: connection to server at "127.0.0.1", port 5432 failed'),
    (TimeoutError(), "TimeoutError"),
])
def test_a_failing_check_shows_its_error_without_credentials_or_paths(error, shown):
    assert plain_error(error) == shown


def test_a_worker_reports_in_three_times_per_interval_and_stale_reports_are_dropped(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["record-heartbeat"]
    assert entry["schedule"] == settings.WORKER_HEARTBEAT_S / 3
    assert entry["options"]["expires"] == settings.WORKER_HEARTBEAT_S


# --- manage.py health -----------------------------------------------------------------------------------------


def test_the_command_prints_each_check_and_fails_when_not_ready(production, db, settings):
    from django.core.management import CommandError, call_command

    out = io.StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("health", stdout=out)
    assert failed.value.returncode == 1 and str(failed.value) == "Not ready: workers."
    lines = out.getvalue().splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["database", "ok"], ["broker", "ok"], ["storage", "off"], ["workspaces", "off"], ["workers", "fail"]]

    WorkerHeartbeat.objects.create(hostname="worker-7", seen_at=timezone.now())
    out = io.StringIO()
    call_command("health", "workers", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("workers  ok       worker-7 reported in ") and lines[1:] == ["Ready."]

    out = io.StringIO()
    call_command("health", "--json", stdout=out)
    assert json.loads(out.getvalue())["status"] == "ready"


def test_the_command_refuses_a_check_it_does_not_have(db):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="No check called heartbeat: use database, broker, ") as refused:
        call_command("health", "heartbeat")
    assert refused.value.returncode == 2


def test_the_command_exits_1_when_not_ready_and_0_once_a_worker_reports_in(worker_env):
    command = [sys.executable, "manage.py", "health"]
    env = {**worker_env, "TAKEHOME_HEALTH_WORKSPACES": "no"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "workers     fail" in done.stdout and "Not ready: workers." in done.stderr
    assert "System check" not in done.stderr  # the sandbox's checks are not readiness

    WorkerHeartbeat.objects.create(hostname="worker-7", seen_at=timezone.now())
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith("Ready.\n")


# --- the S3 bucket of uploads and recordings (TAKEHOME_STORAGE=s3) ---------------------------------------------


@pytest.fixture
def fresh_storage_answer(monkeypatch):
    """No answer of the bucket's kept from an earlier test."""
    from shared import health

    monkeypatch.setattr(health, "_storage_seen", {})
    return health


def bucket_client(s3_server: str):
    import boto3

    return boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1", aws_access_key_id="test-key",
                        aws_secret_access_key="test-secret")


def point_storage_at(settings, endpoint: str, bucket: str = "takehome") -> None:
    from shared.stored import s3_storage

    settings.STORAGES = {**settings.STORAGES, "default": s3_storage(
        bucket=bucket, endpoint_url=endpoint, region="us-east-1", access_key="test-key",
        secret_key=SECRET_WORD)}


def test_readyz_asks_the_bucket_and_reuses_its_answer_for_a_few_seconds(
        client, production, worker_seen, s3_bucket, s3_server, fresh_storage_answer, monkeypatch):
    assert fresh_storage_answer.STORAGE_CACHE_S == 5.0  # a few seconds
    # why longer here: on a loaded machine the probes below may be more than a few seconds apart, and the
    # answer they must reuse would be gone; what is kept, and for which bucket, is the same at any length.
    monkeypatch.setattr(fresh_storage_answer, "STORAGE_CACHE_S", 3600)
    response = probe(client, "/readyz")
    assert response.status_code == 200, response.content
    assert states(response)["storage"] == "ok"
    assert response.json()["checks"]["storage"]["reason"] == "the bucket answered (asked just now)"

    bucket_client(s3_server).delete_bucket(Bucket=s3_bucket.name)
    # polled again at once: the answer of a moment ago, no request to the S3 server
    response = probe(client, "/readyz")
    assert response.status_code == 200 and states(response)["storage"] == "ok"

    monkeypatch.setattr(fresh_storage_answer, "STORAGE_CACHE_S", 0)  # that answer is old now
    response = probe(client, "/readyz")
    assert response.status_code == 503 and response.json()["status"] == "not ready"
    storage = response.json()["checks"]["storage"]
    assert storage["state"] == "fail"
    assert storage["reason"].startswith("the bucket does not exist on the S3 server (TAKEHOME_S3_BUCKET)")
    assert s3_bucket.name not in response.content.decode() and s3_server not in response.content.decode()

    bucket_client(s3_server).create_bucket(Bucket=s3_bucket.name)
    assert states(probe(client, "/readyz"))["storage"] == "ok"


def test_readyz_fails_at_once_on_an_s3_server_that_is_not_there_and_leaks_nothing(
        client, production, worker_seen, settings, fresh_storage_answer, connects):
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    point_storage_at(settings, endpoint)
    response = probe(client, "/readyz")
    assert [a for a in connects if a[1:] == (port,)] == [("127.0.0.1", port)]  # one try, no retry
    assert response.status_code == 503
    assert response.json()["checks"]["storage"] == {
        "state": "fail",
        "reason": "the S3 server cannot be reached (TAKEHOME_S3_ENDPOINT_URL): nothing answers there (asked just now)"}
    text = response.content.decode()
    assert SECRET_WORD not in text and "test-key" not in text and endpoint not in text


def test_readyz_gives_up_on_a_stalled_s3_server_within_the_timeout(client, production, worker_seen, settings,
                                                                   fresh_storage_answer):
    import socket

    settings.HEALTH_TIMEOUT_S = 0.5
    with socket.socket() as stalled:  # accepts connections (the kernel's backlog), never answers
        stalled.bind(("127.0.0.1", 0))
        stalled.listen(8)
        point_storage_at(settings, f"http://127.0.0.1:{stalled.getsockname()[1]}")
        # why no clock: the server never answers, so an answer at all means the check gave up, and its
        # reason says after how long (a wall-time bound would fail on a loaded machine, not on a defect)
        response = probe(client, "/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["storage"]["reason"].startswith(
        "the S3 server did not answer within 0.5 s (TAKEHOME_S3_ENDPOINT_URL)")


def test_the_command_checks_the_bucket_alone(production, db, s3_bucket, fresh_storage_answer):
    from django.core.management import call_command

    out = io.StringIO()
    call_command("health", "storage", stdout=out)
    assert out.getvalue().splitlines() == ["storage  ok       the bucket answered (asked just now)", "Ready."]
