"""The packet's funnel, kept as a tally: read in one query, whatever the number of candidates.

Each invitation contributes a few counters to its packet's funnel (invited,
opened, started, red run witnessed with its delay, submitted with its time on
task, graded, reviewed, decided, and its use of the model window). Counting
them across 70,000 candidates on every view of the packet page took seconds,
so the counts are kept instead: every action that changes what an invitation
contributes calls ``touch(invitation_id)`` inside its transaction, which
works out the invitation's counters afresh from its own rows, compares them
with what it contributed before (its ``FunnelEntry``) and adds the difference
to the packet's ``FunnelTally``. Working them out afresh each time makes a
touch idempotent: touching too often costs a few small queries, never a
wrong count. A packet whose tally was never built (an install from before
the tally, or after ``manage.py rebuild_funnel``) is built on first read,
with grouped queries over its rows.

The counters an invitation contributes are decided by one pure function,
``counters()``, for a touch and a rebuild alike.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count, F, Min, Sum

from .models import Decision, FunnelEntry, FunnelTally, Invitation, Packet

# Bucket edges, in minutes, of the two time distributions; the last bucket is open-ended.
TIME_TO_RED_EDGES = (5, 10, 15, 20, 30, 45, 60)
TIME_ON_TASK_EDGES = (15, 30, 45, 60, 75, 90, 120)
BUILT = "_built"  # the marker counter: this packet's tally holds every invitation


@dataclass(frozen=True)
class Facts:
    """What one invitation's contribution is worked out from, read from its own rows."""

    opened_at: datetime | None = None
    started_at: datetime | None = None
    submitted_at: datetime | None = None  # the latest upload's time
    first_red_at: datetime | None = None  # the first accepted red receipt
    graded: bool = False  # its upload under review is graded
    reviewed: bool = False  # that upload has a submitted review
    decided: bool = False  # an advance or a decline is recorded
    model_requests: int = 0
    model_tokens_in: int = 0
    model_tokens_out: int = 0


def counters(facts: Facts) -> dict[str, int]:
    """The counters one invitation adds to its packet's funnel (zeros left out).

    Revoked invitations count too: they were invited. Each distribution is
    kept as "at most N minutes" per edge; the chart's buckets are the
    differences.
    """
    found = {
        "invited": 1,
        "opened": facts.opened_at is not None,
        "started": facts.started_at is not None,
        "red": facts.first_red_at is not None,
        "submitted": facts.submitted_at is not None,
        "graded": facts.graded,
        "reviewed": facts.reviewed,
        "decided": facts.decided,
        "model_candidates": facts.model_requests > 0,
        "model_requests": facts.model_requests,
        "model_tokens_in": facts.model_tokens_in,
        "model_tokens_out": facts.model_tokens_out,
    }
    if facts.first_red_at is not None and facts.started_at is not None:
        found.update(_timed("red", facts.first_red_at - facts.started_at, TIME_TO_RED_EDGES))
    if facts.submitted_at is not None and facts.started_at is not None:
        found.update(_timed("task", facts.submitted_at - facts.started_at, TIME_ON_TASK_EDGES))
    return {name: int(value) for name, value in found.items() if value}


def _timed(prefix: str, delay: timedelta, edges: tuple[int, ...]) -> dict[str, bool]:
    return {f"{prefix}_timed": True, **{f"{prefix}_le_{edge}": delay <= timedelta(minutes=edge) for edge in edges}}


def forget_all(**_) -> None:
    """Have every packet's tally counted again on its next read.

    Connected to the deletion of every row the funnel counts (takehome.apps):
    a deletion (an erasure of a candidate, say) goes through no action, so
    nothing could say what it took away. Deletions are rare; a rebuild reads
    a packet's rows once.
    """
    FunnelTally.objects.filter(counter=BUILT).delete()


# --- reading ----------------------------------------------------------------------------------


def counts(packet: Packet) -> dict[str, int]:
    """The packet's funnel counters (missing ones are 0): one query, after the first build."""
    found = dict(FunnelTally.objects.filter(packet=packet).values_list("counter", "n"))
    if BUILT not in found:
        rebuild(packet)
        found = dict(FunnelTally.objects.filter(packet=packet).values_list("counter", "n"))
    found.pop(BUILT, None)
    return defaultdict(int, found)


# --- keeping it ------------------------------------------------------------------------------


def touch(invitation_id: int) -> None:
    """Bring one invitation's part of its packet's funnel up to date; call it inside the changing transaction.

    Takes the packet's row lock first, so touches of one packet (and a
    rebuild) queue instead of racing on its tally rows. Does nothing while the
    packet's tally was never built: the build will count this invitation.
    """
    with transaction.atomic():
        packet_id = Invitation.objects.values_list("packet_version__packet_id", flat=True).get(pk=invitation_id)
        # why the packet's row: the one lock that orders every writer of this packet's tally.
        Packet.objects.select_for_update().filter(pk=packet_id).values_list("pk", flat=True).first()
        if not FunnelTally.objects.filter(packet_id=packet_id, counter=BUILT).exists():
            return
        entry = FunnelEntry.objects.filter(invitation_id=invitation_id).first()
        before = entry.counts if entry is not None else {}
        after = counters(facts_of(invitation_id))
        if after == before:
            return
        _add(packet_id, {name: after.get(name, 0) - before.get(name, 0) for name in {*before, *after}})
        if entry is None:
            FunnelEntry.objects.create(invitation_id=invitation_id, packet_id=packet_id, counts=after)
        else:
            FunnelEntry.objects.filter(pk=entry.pk).update(counts=after)


def _add(packet_id: int, delta: dict[str, int]) -> None:
    # why sorted: two packets' touches never wait on each other, but one packet's rows are
    # always taken in the same order, so no two writers can hold them crosswise.
    for name in sorted(delta):
        if not delta[name]:
            continue
        if not FunnelTally.objects.filter(packet_id=packet_id, counter=name).update(n=F("n") + delta[name]):
            FunnelTally.objects.create(packet_id=packet_id, counter=name, n=delta[name])


def facts_of(invitation_id: int) -> Facts:
    """One invitation's facts, from its own rows (a handful of indexed queries)."""
    from grading.models import Review
    from sessions_app.models import GateReceipt, ModelExchange, Submission

    inv = Invitation.objects.values("opened_at", "started_at", "submitted_at").get(pk=invitation_id)
    first_red = GateReceipt.objects.filter(invitation_id=invitation_id, step=GateReceipt.Step.RED,
                                           accepted=True).aggregate(at=Min("received_at"))["at"]
    latest = Submission.objects.latest_per_invitation().filter(invitation_id=invitation_id).values(
        "pk", "status").first()
    reviewed = latest is not None and Review.objects.submitted().filter(submission_id=latest["pk"]).exists()
    decided = Decision.objects.filter(invitation_id=invitation_id).exclude(choice=Decision.Choice.UNDECIDED).exists()
    model = ModelExchange.objects.filter(invitation_id=invitation_id).aggregate(
        requests=Count("pk"), tokens_in=Sum("tokens_in", default=0), tokens_out=Sum("tokens_out", default=0))
    return Facts(
        opened_at=inv["opened_at"], started_at=inv["started_at"], submitted_at=inv["submitted_at"],
        first_red_at=first_red, graded=latest is not None and latest["status"] == Submission.Status.GRADED,
        reviewed=reviewed, decided=decided, model_requests=model["requests"],
        model_tokens_in=model["tokens_in"], model_tokens_out=model["tokens_out"],
    )


def all_facts(packet: Packet) -> dict[int, Facts]:
    """Every invitation's facts in the packet, from six grouped queries over its rows (for a rebuild)."""
    from grading.models import Review
    from sessions_app.models import GateReceipt, ModelExchange, Submission

    invitations = Invitation.objects.filter(packet_version__packet=packet)
    reds = dict(GateReceipt.objects.filter(invitation__in=invitations, step=GateReceipt.Step.RED, accepted=True)
                .values("invitation_id").annotate(at=Min("received_at")).values_list("invitation_id", "at"))
    latest = Submission.objects.latest_per_invitation().filter(invitation__in=invitations)
    graded = set(latest.filter(status=Submission.Status.GRADED).values_list("invitation_id", flat=True))
    reviewed = set(Review.objects.submitted().filter(submission__in=latest)
                   .values_list("submission__invitation_id", flat=True))
    decided = set(Decision.objects.filter(invitation__in=invitations).exclude(choice=Decision.Choice.UNDECIDED)
                  .values_list("invitation_id", flat=True))
    model = {row["invitation_id"]: row for row in ModelExchange.objects.filter(invitation__in=invitations)
             .values("invitation_id").annotate(requests=Count("pk"), tokens_in=Sum("tokens_in", default=0),
                                               tokens_out=Sum("tokens_out", default=0))}
    facts = {}
    for pk, opened, started, submitted in invitations.values_list("pk", "opened_at", "started_at", "submitted_at"):
        used = model.get(pk, {})
        facts[pk] = Facts(opened_at=opened, started_at=started, submitted_at=submitted, first_red_at=reds.get(pk),
                          graded=pk in graded, reviewed=pk in reviewed, decided=pk in decided,
                          model_requests=used.get("requests", 0), model_tokens_in=used.get("tokens_in", 0),
                          model_tokens_out=used.get("tokens_out", 0))
    return facts


@transaction.atomic
def rebuild(packet: Packet) -> None:
    """Count the packet's funnel again from its rows and keep it as its tally; its first build, or a repair."""
    Packet.objects.select_for_update().filter(pk=packet.pk).values_list("pk", flat=True).first()
    FunnelEntry.objects.filter(packet=packet).delete()
    FunnelTally.objects.filter(packet=packet).delete()
    totals: dict[str, int] = defaultdict(int)
    entries = []
    for pk, facts in all_facts(packet).items():
        found = counters(facts)
        entries.append(FunnelEntry(invitation_id=pk, packet=packet, counts=found))
        for name, value in found.items():
            totals[name] += value
    FunnelEntry.objects.bulk_create(entries, batch_size=2000)
    FunnelTally.objects.bulk_create([FunnelTally(packet=packet, counter=name, n=n) for name, n in totals.items()]
                                    + [FunnelTally(packet=packet, counter=BUILT, n=1)])
