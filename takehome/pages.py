"""The read side of the recruiter's desk: what the invitations board and the packet's funnel show.

Views stay HTTP-only and call these. Each function costs a fixed number of
queries, whatever the number of candidates: rows are gathered per page with
``__in`` lookups, and the funnel is counted by the database.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import Count, Exists, F, OuterRef, Q, Subquery

from grading.models import Mark, Review
from sessions_app.models import GateReceipt, Submission

from . import charts
from .models import AuditEvent, Decision, Invitation, Packet


@dataclass
class BoardRow:
    """One candidate's line on the invitations board: the invitation and what came back of it."""

    invitation: Invitation
    submission: Submission | None = None  # the upload under review
    reviews: int = 0  # submitted reviews of that upload
    disagree: bool = False  # two submitted reviews differ on at least one cell
    decision: Decision | None = None
    events: list = field(default_factory=list)  # AuditEvents, newest first


def board_rows(packet: Packet) -> list[BoardRow]:
    """The board's rows, newest invitation first, with grading status, reviews, disagreement, decision, history.

    Five queries in all: the invitations (with their decision), their uploads
    under review, the submitted reviews counted per upload, the uploads whose
    reviewers disagree, and the audit events.
    """
    invitations = list(Invitation.objects.for_board().filter(packet_version__packet=packet).select_related(
        "decision__decided_by"))
    rows = {inv.pk: BoardRow(inv) for inv in invitations}
    for inv in invitations:
        try:
            rows[inv.pk].decision = inv.decision
        except Decision.DoesNotExist:
            pass
    latest = {s.pk: s for s in Submission.objects.filter(invitation_id__in=list(rows)).only(
        "pk", "invitation_id", "status", "uploaded_at", "is_latest") if s.is_latest}
    for s in latest.values():
        rows[s.invitation_id].submission = s
    reviews = dict(Review.objects.submitted().filter(submission_id__in=list(latest)).values("submission_id")
                   .annotate(n=Count("pk")).values_list("submission_id", "n"))
    # A cell where the submitted marks hold both a pass and a fail is a disagreement.
    split = set(Mark.objects.filter(review__submission_id__in=list(latest), review__submitted_at__isnull=False)
                .values("review__submission_id", "cell").annotate(kinds=Count("passed", distinct=True))
                .filter(kinds__gt=1).values_list("review__submission_id", flat=True))
    for pk, s in latest.items():
        row = rows[s.invitation_id]
        row.reviews = reviews.get(pk, 0)
        row.disagree = pk in split
    events = defaultdict(list)
    for event in AuditEvent.objects.filter(invitation_id__in=list(rows)).order_by("-at", "-pk"):
        events[event.invitation_id].append(event)
    for pk, row in rows.items():
        row.events = events[pk]
    return [rows[inv.pk] for inv in invitations]


# --- the funnel ---------------------------------------------------------------------------

FUNNEL_STEPS = (
    ("invited", "Invited"),
    ("opened", "Opened the link"),
    ("started", "Started the clock"),
    ("red", "Red run witnessed"),
    ("submitted", "Submitted"),
    ("graded", "Graded"),
    ("reviewed", "Reviewed"),
    ("decided", "Decided"),
)
# Bucket edges, in minutes, of the two time distributions; the last bucket is open-ended.
TIME_TO_RED_EDGES = (5, 10, 15, 20, 30, 45, 60)
TIME_ON_TASK_EDGES = (15, 30, 45, 60, 75, 90, 120)


def funnel(packet: Packet) -> dict:
    """The packet's funnel and time distributions, counted by the database in one aggregate query.

    Every candidate invited to any version of the packet counts, revoked ones
    included (they were invited). "Red run witnessed" is an accepted red
    receipt from the gate; "graded" an upload under review that was graded;
    "reviewed" one with at least one submitted review; "decided" a recorded
    advance or decline. Time to red runs from Start to the first accepted red
    receipt; time on task from Start to the first upload. Each distribution is
    counted as "at most N minutes" per edge, in the same query, and the
    buckets are the differences.
    """
    red = GateReceipt.objects.filter(invitation_id=OuterRef("pk"), step=GateReceipt.Step.RED, accepted=True)
    latest = Submission.objects.filter(invitation_id=OuterRef("pk"), is_latest=True)
    # why Subquery(...[:1]) and not Exists: aggregating over an annotated queryset wraps it in a
    # subquery, and Django leaves boolean Exists annotations out of it (the count came out 0).
    qs = Invitation.objects.filter(packet_version__packet=packet).annotate(
        red_at=Subquery(red.order_by("received_at").values("received_at")[:1]),
        graded_id=Subquery(latest.filter(status=Submission.Status.GRADED).values("pk")[:1]),
        reviewed_id=Subquery(latest.filter(Exists(Review.objects.filter(
            submission_id=OuterRef("pk"), submitted_at__isnull=False))).values("pk")[:1]),
        decided_id=Subquery(Decision.objects.filter(invitation_id=OuterRef("pk")).exclude(
            choice=Decision.Choice.UNDECIDED).values("pk")[:1]),
    )
    aggregates = {
        "invited": Count("pk"),
        "opened": Count("pk", filter=Q(opened_at__isnull=False)),
        "started": Count("pk", filter=Q(started_at__isnull=False)),
        "red": Count("pk", filter=Q(red_at__isnull=False)),
        "submitted": Count("pk", filter=Q(submitted_at__isnull=False)),
        "graded": Count("pk", filter=Q(graded_id__isnull=False)),
        "reviewed": Count("pk", filter=Q(reviewed_id__isnull=False)),
        "decided": Count("pk", filter=Q(decided_id__isnull=False)),
        "red_timed": Count("pk", filter=Q(red_at__isnull=False, started_at__isnull=False)),
        "task_timed": Count("pk", filter=Q(submitted_at__isnull=False, started_at__isnull=False)),
    }
    for edge in TIME_TO_RED_EDGES:
        aggregates[f"red_le_{edge}"] = Count("pk", filter=Q(
            started_at__isnull=False, red_at__lte=F("started_at") + timedelta(minutes=edge)))
    for edge in TIME_ON_TASK_EDGES:
        aggregates[f"task_le_{edge}"] = Count("pk", filter=Q(
            started_at__isnull=False, submitted_at__lte=F("started_at") + timedelta(minutes=edge)))
    counts = qs.aggregate(**aggregates)
    steps = [(key, label, counts[key]) for key, label in FUNNEL_STEPS]
    to_red = charts.histogram(
        charts.buckets(TIME_TO_RED_EDGES, [counts[f"red_le_{e}"] for e in TIME_TO_RED_EDGES], counts["red_timed"]))
    on_task = charts.histogram(
        charts.buckets(TIME_ON_TASK_EDGES, [counts[f"task_le_{e}"] for e in TIME_ON_TASK_EDGES], counts["task_timed"]))
    return {
        "steps": steps,
        "funnel_chart": charts.funnel_chart(steps),
        # (id, title, chart, what is measured)
        "times": [
            ("time-to-red", "Time to red", to_red,
             "From pressing Start to the gate's first accepted red run, in minutes."),
            ("time-on-task", "Time on task", on_task, "From pressing Start to the first upload, in minutes."),
        ],
    }
