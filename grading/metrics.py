"""What /metrics exports for Prometheus: read from the database at each scrape, in a few aggregate queries.

why from the database, not counters kept in memory: the web server, the
workers, beat and `serve_workspaces` are separate processes, on one host or
several, and every number here is already a row, or a sum of rows, in the
database, which is the source of truth. Read there, any web process answers
the same whatever served the request or ran the grading, a restart resets
nothing, and no multiprocess folder has to be shared between containers
(what prometheus-client's multiprocess mode needs). The grading latency
histogram is built the same way, from each run's stored start and end.

The totals are exported as counters: each only grows as rows are added.
Deleting an invitation deletes its rows, and Prometheus reads the drop as a
counter reset, as after a restart.

Each scrape runs seven queries, each one pass over a table at most (grading
runs, uploads, receipts, model exchanges, open workspaces), with no rows
brought into Python: 50 to 100 ms with 10,000 rows in each on SQLite, on a
busy 2-core machine. Read here because the desk is the room that may read
all three (see grading/outcomes.py).
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, FloatField, Func, Min, Q, Sum
from django.db.models.lookups import LessThanOrEqual
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from sessions_app.models import GateReceipt, ModelExchange, Submission, Workspace

from .models import GradingRun

Outcome = GradingRun.Outcome
# Seconds from a worker starting a grading run to its end. A sample grading takes 3 to 20 s; a run's hard
# limit is TAKEHOME_GRADING_TIME_LIMIT_S (600).
DURATION_BUCKETS = (1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
ENDED = [o for o in Outcome.values if o != Outcome.RUNNING]
# The reason of a refused upload kept before its code was (sessions_app migration 0015).
UNRECORDED = "unrecorded"
# An upload that was stored but cannot be unpacked: the candidate's page says why at once.
CANNOT_UNPACK = "cannot_unpack"


def grading_queue() -> Iterator[Metric]:
    """Uploads waiting for a grading (received or queued), and how long the longest-waiting has waited."""
    waiting = Submission.objects.filter(status__in=[Submission.Status.RECEIVED, Submission.Status.QUEUED]).aggregate(
        n=Count("pk"), since=Min("status_changed_at"))
    yield GaugeMetricFamily("takehome_grading_queue_depth",
                            "Uploads waiting to be graded (received or queued), from the database.",
                            value=waiting["n"])
    waited = (timezone.now() - waiting["since"]).total_seconds() if waiting["since"] else 0.0
    yield GaugeMetricFamily("takehome_grading_queue_oldest_seconds",
                            "How long the upload waiting longest has waited since it was received or sent "
                            "back to the queue; 0 when none waits.", value=max(waited, 0.0))


class Seconds(Func):
    """Seconds from one datetime column to another, in the database's own arithmetic.

    why not Django's datetime subtraction: on SQLite it is a Python function
    called for every row and every bucket, and a scrape over 10,000 runs took
    1.6 s; julianday() is SQLite's own, and the scrape takes milliseconds.
    """

    output_field = FloatField()

    def _operands(self, compiler, connection):
        (start, start_params), (end, end_params) = (compiler.compile(e) for e in self.get_source_expressions())
        return start, end, (*start_params, *end_params)

    def as_sqlite(self, compiler, connection, **extra):
        start, end, params = self._operands(compiler, connection)
        # why round to the millisecond: a julianday is a double of days, so a 7 s run came out as 6.99996 s,
        # below its own bucket's bound of 7
        return f"round((julianday({end}) - julianday({start})) * 86400.0, 3)", params

    def as_postgresql(self, compiler, connection, **extra):
        start, end, params = self._operands(compiler, connection)
        return f"EXTRACT(EPOCH FROM ({end} - {start}))", params


def gradings() -> Iterator[Metric]:
    """Grading runs: those running, those ended by outcome, and how long each took (one query)."""
    took = Seconds("started_at", "finished_at")
    timed = Q(finished_at__isnull=False)
    buckets = {f"le{i}": Count("pk", filter=timed & LessThanOrEqual(took, b)) for i, b in enumerate(DURATION_BUCKETS)}
    rows = {row["outcome"]: row for row in GradingRun.objects.values("outcome").order_by().annotate(
        n=Count("pk"), timed=Count("pk", filter=timed), total=Sum(took, filter=timed), **buckets)}
    yield GaugeMetricFamily("takehome_gradings_running", "Grading runs in progress on a worker.",
                            value=rows.get(Outcome.RUNNING, {}).get("n", 0))
    ended = CounterMetricFamily("takehome_gradings", "Grading runs ended, by outcome: graded, rejected (the archive "
                                "was refused), error (given up), retried (our side failed), lost (the worker died).",
                                labels=["outcome"])
    histogram = HistogramMetricFamily("takehome_grading_duration_seconds",
                                      "Seconds from a worker starting a grading run to its end, by outcome.",
                                      labels=["outcome"])
    for outcome in ENDED:
        row = rows.get(outcome, {})
        ended.add_metric([outcome], row.get("n", 0))
        counts = [(str(b), row.get(f"le{i}", 0)) for i, b in enumerate(DURATION_BUCKETS)]
        histogram.add_metric([outcome], [*counts, ("+Inf", row.get("timed", 0))], row.get("total") or 0.0)
    yield ended
    yield histogram


def sandbox_failures() -> Iterator[Metric]:
    """Grading runs our side ended because the sandbox could not start (SandboxUnavailable in their error)."""
    failed = GradingRun.objects.filter(outcome__in=[Outcome.RETRIED, Outcome.ERROR],
                                       error__contains="SandboxUnavailable").count()
    yield CounterMetricFamily("takehome_sandbox_failures",
                              "Grading runs that failed because the sandbox could not start (retried, or given up).",
                              value=failed)


def workspaces() -> Iterator[Metric]:
    """Hosted workspaces open on each host, and those of them whose shell runs."""
    opened = GaugeMetricFamily("takehome_workspaces_open", "Hosted workspaces open (not yet closed at their "
                               "deadline), by the host that holds them.", labels=["host"])
    shells = GaugeMetricFamily("takehome_workspace_shells_running", "Open hosted workspaces whose shell runs "
                               "(not stopped as idle), by host.", labels=["host"])
    for row in (Workspace.objects.filter(closed=False).values("host").order_by("host")
                .annotate(n=Count("pk"), shells=Count("pk", filter=Q(shell_stopped_at__isnull=True)))):
        opened.add_metric([row["host"]], row["n"])
        shells.add_metric([row["host"]], row["shells"])
    yield opened
    yield shells


def model_exchanges() -> Iterator[Metric]:
    """Requests through the model window by how they ended, those under way, and the tokens they used."""
    done = Q(finished=True)
    found = ModelExchange.objects.aggregate(
        answered=Count("pk", filter=done & Q(error="", client_gone=False)),
        client_gone=Count("pk", filter=done & Q(error="", client_gone=True)),
        error=Count("pk", filter=done & ~Q(error="")),
        in_flight=Count("pk", filter=Q(finished=False)),
        tokens_in=Sum("tokens_in", filter=done), tokens_out=Sum("tokens_out", filter=done))
    exchanges = CounterMetricFamily("takehome_model_exchanges", "Requests through the model window that ended, by "
                                    "result: answered, client_gone (the client left mid-reply), error (upstream).",
                                    labels=["result"])
    for result in ("answered", "client_gone", "error"):
        exchanges.add_metric([result], found[result])
    yield exchanges
    yield GaugeMetricFamily("takehome_model_exchanges_in_flight", "Requests through the model window waiting on "
                            "the upstream.", value=found["in_flight"])
    tokens = CounterMetricFamily("takehome_model_tokens", "Tokens of the model window's ended requests, as the "
                                 "upstream counted them (estimated where it gave none): in (prompt), out (reply).",
                                 labels=["direction"])
    tokens.add_metric(["in"], found["tokens_in"] or 0)
    tokens.add_metric(["out"], found["tokens_out"] or 0)
    yield tokens


def refused_uploads() -> Iterator[Metric]:
    """Uploads refused, by reason: those the rules or the file turned away (a refused receipt each), and
    those stored that cannot be unpacked."""
    refused = CounterMetricFamily("takehome_uploads_refused", "Uploads and hosted submits refused, by reason "
                                  "(deadline, too_soon, too_many_uploads, not_zip, too_large, cannot_unpack...). "
                                  "Past 50 refusals of one invitation no more are kept, nor counted.",
                                  labels=["reason"])
    by_code = (GateReceipt.objects.filter(step=GateReceipt.Step.UPLOAD, accepted=False)
               .values("refusal_code").order_by("refusal_code").annotate(n=Count("pk")))
    for row in by_code:
        refused.add_metric([row["refusal_code"] or UNRECORDED], row["n"])
    refused.add_metric([CANNOT_UNPACK], Submission.objects.exclude(unpack_refusal="").count())
    yield refused


class TakehomeCollector(Collector):
    """Everything /metrics exports, collected afresh at each scrape."""

    def collect(self) -> Iterator[Metric]:
        for part in (grading_queue, gradings, sandbox_failures, workspaces, model_exchanges, refused_uploads):
            yield from part()
