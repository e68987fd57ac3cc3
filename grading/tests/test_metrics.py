"""GET /metrics: Prometheus' scrape, behind a bearer token, with numbers read from the database.

The rows are made the way the app makes them (grading's lifecycle, the refused-upload action), and each
number is read back through the endpoint, as Prometheus reads it.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from grading import lifecycle
from grading.models import GradingRun
from grading.tests.reviewing import make_submission
from sessions_app import actions
from sessions_app.models import ModelExchange, Submission, Workspace

pytestmark = pytest.mark.django_db
TOKEN = "m" * 24


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN = TOKEN
    return TOKEN


def scrape(client) -> dict[tuple, float]:
    """Every sample of /metrics: (name, (label, value) pairs...) -> value."""
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {(s.name, *sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.content.decode()) for s in family.samples}


def exported_names(client) -> set[str]:
    """The names a query may use: each family's, and its samples' (_total, _bucket, _count, _sum)."""
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    names = set()
    for family in text_string_to_metric_families(response.content.decode()):
        names.add(family.name)
        names |= {f"{family.name}{suffix}" for suffix in {"counter": ("_total",),
                                                          "histogram": ("_bucket", "_count", "_sum")}.get(family.type, ())}
        names |= {s.name for s in family.samples}
    return names


def test_without_a_token_set_there_is_no_endpoint(client, settings):
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 404


@pytest.mark.parametrize("authorization", [
    None,
    "",
    "Bearer ",
    "Bearer wrong-token-of-some-length",
    f"Bearer {TOKEN}x",
    f"Bearer {TOKEN[:-1]}",
    f"Basic {TOKEN}",
    TOKEN,
])
def test_a_missing_or_wrong_token_is_refused(client, token, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"takehome_" not in response.content


def test_the_right_token_gets_the_metrics(client, token):
    samples = scrape(client)
    assert samples[("takehome_grading_queue_depth",)] == 0
    assert samples[("takehome_gradings_total", ("outcome", "graded"))] == 0
    # case of the scheme does not matter (RFC 7235)
    assert client.get("/metrics", headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200


def grade(submission: Submission, seconds: float) -> GradingRun:
    """A worker's run on ``submission`` that took ``seconds``, ended graded."""
    run = lifecycle.start_run(submission.pk, task_id="t", worker="w@host")
    GradingRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(seconds=seconds))
    lifecycle.finish_graded(run)
    return run


def test_gradings_follow_the_database(client, token, sample_packet):
    before = scrape(client)
    waiting = make_submission(sample_packet, status=Submission.Status.QUEUED)
    failing = make_submission(sample_packet, name="Grace Hopper", status=Submission.Status.QUEUED)
    Submission.objects.filter(pk=waiting.pk).update(status_changed_at=timezone.now() - timedelta(seconds=90))
    now = scrape(client)
    assert now[("takehome_grading_queue_depth",)] == 2
    assert 89 <= now[("takehome_grading_queue_oldest_seconds",)] < 120

    run = lifecycle.start_run(waiting.pk, task_id="t1", worker="w@host")
    now = scrape(client)
    assert now[("takehome_grading_queue_depth",)] == 1
    assert now[("takehome_gradings_running",)] == 1

    GradingRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(seconds=7))
    lifecycle.finish_graded(run)
    retried = lifecycle.start_run(failing.pk, task_id="t2", worker="w@host")
    lifecycle.retry_later(retried, "Traceback ...\ngrading.engine.sandbox.results.SandboxUnavailable: no bwrap")
    now = scrape(client)
    graded = ("outcome", "graded")
    assert now[("takehome_gradings_running",)] == 0
    assert now[("takehome_gradings_total", graded)] == before[("takehome_gradings_total", graded)] + 1
    assert now[("takehome_gradings_total", ("outcome", "retried"))] == 1
    assert now[("takehome_sandbox_failures_total",)] == 1
    # the graded run took 7 s: above the 5 s bucket, within the 10 s one
    assert now[("takehome_grading_duration_seconds_bucket", ("le", "5.0"), graded)] == 0
    assert now[("takehome_grading_duration_seconds_bucket", ("le", "10.0"), graded)] == 1
    assert now[("takehome_grading_duration_seconds_bucket", ("le", "+Inf"), graded)] == 1
    assert now[("takehome_grading_duration_seconds_count", graded)] == 1
    assert 7 <= now[("takehome_grading_duration_seconds_sum", graded)] < 8
    assert now[("takehome_grading_queue_depth",)] == 1  # the retried upload waits again


def test_the_histogram_is_cumulative_over_runs(client, token, sample_packet):
    for seconds in (0.5, 3, 3, 45, 700):
        grade(make_submission(sample_packet, name=f"c{seconds}", status=Submission.Status.QUEUED), seconds)
    now = scrape(client)
    graded = ("outcome", "graded")
    counts = {le: now[("takehome_grading_duration_seconds_bucket", ("le", le), graded)]
              for le in ("1.0", "2.5", "5.0", "60.0", "600.0", "+Inf")}
    assert counts == {"1.0": 1, "2.5": 1, "5.0": 3, "60.0": 4, "600.0": 4, "+Inf": 5}
    assert 751 <= now[("takehome_grading_duration_seconds_sum", graded)] < 753


def test_workspaces_model_exchanges_and_refused_uploads_follow_the_database(client, token, invitation):
    Workspace.objects.create(invitation=invitation, host="ws-1", uid=63000)
    ModelExchange.objects.create(invitation=invitation, tokens_in=120, tokens_out=30)
    ModelExchange.objects.create(invitation=invitation, tokens_in=50, tokens_out=5, client_gone=True)
    ModelExchange.objects.create(invitation=invitation, error="upstream answered 500")
    ModelExchange.objects.create(invitation=invitation, tokens_in=999, tokens_out=999, finished=False)
    actions.do_record_refused_upload(invitation, "Too soon: ...", code="too_soon")
    actions.do_record_refused_upload(invitation, "Too soon: ...", code="too_soon")
    actions.do_record_refused_upload(invitation, "This file is not a zip.", code="not_zip")
    now = scrape(client)
    assert now[("takehome_workspaces_open", ("host", "ws-1"))] == 1
    assert now[("takehome_workspace_shells_running", ("host", "ws-1"))] == 1
    assert now[("takehome_model_exchanges_total", ("result", "answered"))] == 1
    assert now[("takehome_model_exchanges_total", ("result", "client_gone"))] == 1
    assert now[("takehome_model_exchanges_total", ("result", "error"))] == 1
    assert now[("takehome_model_exchanges_in_flight",)] == 1
    # tokens of ended requests only: one under way holds a reservation, not what it used
    assert now[("takehome_model_tokens_total", ("direction", "in"))] == 170
    assert now[("takehome_model_tokens_total", ("direction", "out"))] == 35
    assert now[("takehome_uploads_refused_total", ("reason", "too_soon"))] == 2
    assert now[("takehome_uploads_refused_total", ("reason", "not_zip"))] == 1
    assert now[("takehome_uploads_refused_total", ("reason", "cannot_unpack"))] == 0

    Workspace.objects.filter(invitation=invitation).update(shell_stopped_at=timezone.now())
    assert scrape(client)[("takehome_workspace_shells_running", ("host", "ws-1"))] == 0
    Workspace.objects.filter(invitation=invitation).update(closed=True)
    assert ("takehome_workspaces_open", ("host", "ws-1")) not in scrape(client)


def test_an_upload_refused_through_the_page_is_counted_by_its_reason(client, token, invitation, media_root):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from sessions_app.tests.conftest import url

    actions.do_start_session(invitation)
    client.post(url("upload", invitation), {"archive": SimpleUploadedFile("work.zip", b"%PDF-1.4 not a zip")})
    assert scrape(client)[("takehome_uploads_refused_total", ("reason", "not_zip"))] == 1


def test_a_scrape_is_seven_queries_whatever_the_rows(client, token, sample_packet):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            scrape(client)
        return len(captured.captured_queries)

    empty = queries()
    for n in range(5):
        grade(make_submission(sample_packet, name=f"c{n}", status=Submission.Status.QUEUED), n)
    assert queries() == empty == 7


# --- the Grafana dashboard beside the docs ------------------------------------------------------------

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "takehome.json"


def queries(node) -> list[str]:
    """Every PromQL expression of the dashboard, however deep its panels nest."""
    if isinstance(node, dict):
        return ([node["expr"]] if isinstance(node.get("expr"), str) else []) + [
            q for value in node.values() for q in queries(value)]
    if isinstance(node, list):
        return [q for value in node for q in queries(value)]
    return []


def test_the_dashboard_queries_only_what_the_endpoint_exports_and_shows_all_of_it(client, token):
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "takehome" and dashboard["panels"]
    used = {name for expr in queries(dashboard) for name in re.findall(r"\b[a-z_][a-z0-9_]*\b", expr)
            if name.startswith("takehome_")}
    exported = exported_names(client)
    assert used and used <= exported, f"the dashboard queries what /metrics does not export: {used - exported}"
    families = {name for name in exported if not name.endswith(("_total", "_bucket", "_count", "_sum"))}
    shown = {name for name in families if used & {name + suffix for suffix in ("", "_total", "_bucket", "_count", "_sum")}}
    assert shown == families, f"exported but on no panel: {families - shown}"


def test_a_run_s_seconds_are_exact_whatever_its_start_s_fraction(sample_packet):
    """A run of 7 s is 7 s, never 6.99996 below its bucket's bound (SQLite counts in julianday's doubles)."""
    from grading.metrics import Seconds

    run = grade(make_submission(sample_packet, status=Submission.Status.QUEUED), 1)
    start = timezone.now().replace(microsecond=123)
    for ms in range(0, 1000, 7):
        began = start + timedelta(milliseconds=ms)
        GradingRun.objects.filter(pk=run.pk).update(started_at=began, finished_at=began + timedelta(seconds=7))
        took = GradingRun.objects.filter(pk=run.pk).annotate(s=Seconds("started_at", "finished_at")).get().s
        assert took == pytest.approx(7.0, abs=1e-3) and took >= 7.0, (ms, took)
