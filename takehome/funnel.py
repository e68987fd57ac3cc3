"""The packet's funnel, kept as a tally: read in one query, whatever the number of candidates.

Each invitation contributes a few counters to its packet's funnel (invited,
opened, started, red run witnessed with its delay, submitted with its time on
task, graded, reviewed, decided, and its use of the model window). Counting
them across 70,000 candidates on every view of the packet page took seconds,
so the counts are kept instead: every action that changes what an invitation
contributes calls ``touch(invitation_id)``. Once its transaction has
committed, the invitation's counters are worked out afresh from its own rows,
compared with what it contributed before (its ``FunnelEntry``), and the
difference is added to the packet's ``FunnelTally``. Working them out afresh
makes an update idempotent: touching too often costs a few small queries,
never a wrong count. A packet whose tally was never built is built after
``migrate`` (takehome.apps) or, failing that, on first read; a deletion, which
no action sees, has every packet counted again.

Locks, since the tally's rows are shared by every candidate of a packet: an
update runs after the changing transaction, in one of its own that takes the
invitations' rows (in id order), then, on PostgreSQL, a shared advisory lock
per packet, then the tally's rows in the counters' order; a build takes that
advisory lock exclusively. Nothing waits on anything in another order.

The counters an invitation contributes are decided by one pure function,
``counters()``, for an update and a build alike. The facts it is given come
from the invitation's own rows and, for what the rooms after the recruiter's
hold (red runs, uploads, reviews, the model window), from their answers to
``takehome.signals.funnel_facts_read`` (grading.outcomes); those rooms call
``touch`` when their rows change.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import F, QuerySet

from .models import Decision, FunnelEntry, FunnelTally, Invitation, Packet
from .signals import funnel_facts_read

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
    """Have every packet's tally counted again on its next read, once the current transaction commits.

    Connected to the deletion of every row the funnel counts (takehome.apps):
    a deletion (an erasure of a candidate, say) goes through no action, so
    nothing could say what it took away. Deletions are rare; a build reads a
    packet's rows once. Many deletions in one transaction forget once.
    """
    if any(getattr(func, "funnel_forget", False) for func in _after_commit()):
        return

    def forget() -> None:
        forget.done = True
        with transaction.atomic():
            for pk in Packet.objects.order_by("pk").values_list("pk", flat=True):
                _lock_packet(pk, shared=False)  # why: a build under way finishes first, then is forgotten
            FunnelTally.objects.filter(counter=BUILT).delete()

    forget.funnel_forget = True
    transaction.on_commit(forget, robust=True)


# --- reading ----------------------------------------------------------------------------------


def counts(packet: Packet) -> dict[str, int]:
    """The packet's funnel counters (missing ones are 0): one query, once built."""
    found = dict(FunnelTally.objects.filter(packet=packet).values_list("counter", "n"))
    if BUILT not in found:
        build(packet)
        found = dict(FunnelTally.objects.filter(packet=packet).values_list("counter", "n"))
    found.pop(BUILT, None)
    return defaultdict(int, found)


# --- keeping it ------------------------------------------------------------------------------


def touch(*invitation_ids: int) -> None:
    """Have these invitations' part of their packets' funnels brought up to date once the transaction commits.

    why after the commit, in a transaction of its own: inside the changing
    transaction the tally's rows would be held while it runs on (an upload
    storing its file) and taken after locks other writers take in another
    order. A crash between the commit and the update leaves the invitation's
    old counters until its next change or ``manage.py rebuild_funnel``.
    Outside a transaction it runs at once; touched again in the same
    transaction, an invitation is updated once.
    """
    ids = set(invitation_ids)
    for func in _after_commit():
        ids -= getattr(func, "funnel_invitations", set())
    if not ids:
        return

    def update() -> None:
        update.done = True
        refresh(ids)

    update.funnel_invitations, update.done = ids, False
    transaction.on_commit(update, robust=True)


def _after_commit() -> list:
    """The functions the current transaction will still run once it commits (none outside a transaction)."""
    conn = transaction.get_connection()
    if not conn.in_atomic_block:
        return []
    return [entry[1] for entry in conn.run_on_commit if not getattr(entry[1], "done", False)]


def refresh(invitation_ids) -> None:
    """Work these invitations' counters out afresh and add what changed to their packets' tallies, now.

    Does nothing for a packet whose tally was never built: its build will count them.
    """
    with transaction.atomic():
        locked = list(Invitation.objects.select_for_update(of=("self",)).filter(pk__in=list(invitation_ids))
                      .order_by("pk").values_list("pk", "packet_version__packet_id"))
        per_packet: dict[int, list[int]] = defaultdict(list)
        for pk, packet_id in locked:
            per_packet[packet_id].append(pk)
        for packet_id, pks in sorted(per_packet.items()):
            _lock_packet(packet_id, shared=True)
            if FunnelTally.objects.filter(packet_id=packet_id, counter=BUILT).exists():
                _apply(packet_id, pks)


def _apply(packet_id: int, pks: list[int]) -> None:
    facts = all_facts(Invitation.objects.filter(pk__in=pks))
    entries = {e.invitation_id: e for e in FunnelEntry.objects.filter(invitation_id__in=pks)}
    delta: dict[str, int] = defaultdict(int)
    new, changed = [], []
    for pk in pks:
        after = counters(facts[pk])
        entry = entries.get(pk)
        before = entry.counts if entry is not None else {}
        if after == before:
            continue
        for name in {*before, *after}:
            delta[name] += after.get(name, 0) - before.get(name, 0)
        if entry is None:
            new.append(FunnelEntry(invitation_id=pk, packet_id=packet_id, counts=after))
        else:
            entry.counts = after
            changed.append(entry)
    FunnelEntry.objects.bulk_create(new, batch_size=2000)
    FunnelEntry.objects.bulk_update(changed, ["counts"], batch_size=2000)
    # why sorted: every writer takes a packet's tally rows in the same order, so none holds them crosswise.
    for name in sorted(delta):
        if delta[name] and not FunnelTally.objects.filter(packet_id=packet_id, counter=name).update(
                n=F("n") + delta[name]):
            FunnelTally.objects.create(packet_id=packet_id, counter=name, n=delta[name])


ADVISORY_NAMESPACE = 7315  # the first key of the funnel's advisory locks, apart from any other use


def _lock_packet(packet_id: int, shared: bool) -> None:
    """PostgreSQL: the packet's advisory lock until the transaction ends (updates share it, a build does not).

    SQLite needs none: its writers take the whole database, one at a time.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT pg_advisory_xact_lock{'_shared' if shared else ''}(%s, %s)",
                           [ADVISORY_NAMESPACE, packet_id])


def all_facts(invitations: QuerySet) -> dict[int, Facts]:
    """The facts of these invitations, from six grouped queries over their rows: two here (the invitations,
    their decisions), four by the rooms after the recruiter's (their answers to funnel_facts_read)."""
    theirs: dict[int, dict] = defaultdict(dict)
    for _, answer in funnel_facts_read.send(sender=Invitation, invitations=invitations):
        for pk, found in answer.items():
            theirs[pk].update(found)
    decided = set(Decision.objects.filter(invitation__in=invitations).exclude(choice=Decision.Choice.UNDECIDED)
                  .values_list("invitation_id", flat=True))
    facts = {}
    for pk, opened, started, submitted in invitations.values_list("pk", "opened_at", "started_at", "submitted_at"):
        facts[pk] = Facts(opened_at=opened, started_at=started, submitted_at=submitted, decided=pk in decided,
                          **theirs[pk])
    return facts


def build(packet: Packet) -> None:
    """Count the packet's funnel from its rows unless that was done meanwhile (two readers at once build once)."""
    with transaction.atomic():
        _lock_packet(packet.pk, shared=False)
        if not FunnelTally.objects.filter(packet=packet, counter=BUILT).exists():
            rebuild(packet)


def build_missing(**_) -> None:
    """Build every packet's tally not built yet: after ``migrate`` (takehome.apps), so no page waits for one."""
    for packet in Packet.objects.exclude(funnel_tally__counter=BUILT):
        build(packet)


@transaction.atomic
def rebuild(packet: Packet) -> None:
    """Count the packet's funnel again from its rows and keep it as its tally; its first build, or a repair."""
    _lock_packet(packet.pk, shared=False)
    FunnelEntry.objects.filter(packet=packet).delete()
    FunnelTally.objects.filter(packet=packet).delete()
    totals: dict[str, int] = defaultdict(int)
    entries = []
    for pk, facts in all_facts(Invitation.objects.filter(packet_version__packet=packet)).items():
        found = counters(facts)
        entries.append(FunnelEntry(invitation_id=pk, packet=packet, counts=found))
        for name, value in found.items():
            totals[name] += value
    FunnelEntry.objects.bulk_create(entries, batch_size=2000)
    FunnelTally.objects.bulk_create([FunnelTally(packet=packet, counter=name, n=n) for name, n in totals.items()]
                                    + [FunnelTally(packet=packet, counter=BUILT, n=1)])
