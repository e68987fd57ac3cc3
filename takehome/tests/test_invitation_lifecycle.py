"""An invitation's clock and life live on its model: one reading of the phase, the time left and the close of
uploads for every page, and the model's methods the only writers of its lifecycle fields."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from takehome.models import Invitation

from .writers import Watched, field_writes, writes_outside

INVITATION = Watched(
    frozenset({"Invitation"}), frozenset({"sent_at", "opened_at", "started_at", "deadline", "submitted_at", "revoked_at"}),
    # a packet's self-check and a grading run have a started_at of their own, a review a submitted_at
    others=frozenset({"PacketCheck", "check", "GradingRun", "run", "Review", "review"}),
)


# --- the clock ------------------------------------------------------------------------------------

@pytest.fixture
def clock(invitation, settings):
    """An invitation started at 10:00 with a 90-minute limit and 5 minutes of grace; the instant it started."""
    settings.UPLOAD_GRACE_S = 300
    start = timezone.now().replace(hour=10, minute=0, second=0, microsecond=0)
    invitation.started_at, invitation.deadline = start, start + timedelta(minutes=90)
    return invitation, start


def test_before_start_there_is_no_clock(invitation):
    now = timezone.now()
    assert invitation.phase == invitation.phase_at(now) == Invitation.NOT_STARTED
    assert invitation.seconds_left is None and invitation.upload_closes_at is None
    assert invitation.seconds_until_closed_at(now) is None
    assert invitation.deadline_if_started(now) == now + timedelta(minutes=invitation.packet_version.time_limit_minutes)


@pytest.mark.parametrize("after, phase, left", [
    (timedelta(0), Invitation.RUNNING, 5400),
    (timedelta(minutes=89, seconds=59, milliseconds=500), Invitation.RUNNING, 0),
    (timedelta(minutes=90), Invitation.RUNNING, 0),  # the deadline itself is still on time
    (timedelta(minutes=90, microseconds=1), Invitation.GRACE, 0),
    (timedelta(minutes=95), Invitation.GRACE, 0),  # the last moment uploads are taken
    (timedelta(minutes=95, microseconds=1), Invitation.CLOSED, 0),
])
def test_the_phase_and_the_time_left_at_an_instant(clock, after, phase, left):
    invitation, start = clock
    assert invitation.phase_at(start + after) == phase
    assert invitation.seconds_left_at(start + after) == left
    assert invitation.upload_closes_at == start + timedelta(minutes=95)
    assert invitation.seconds_until_closed_at(start + after) == (timedelta(minutes=95) - after).total_seconds()


def test_the_properties_read_the_clock_now(clock):
    invitation, _ = clock
    invitation.deadline = timezone.now() + timedelta(minutes=10)
    assert invitation.phase == Invitation.RUNNING and 590 < invitation.seconds_left <= 600
    invitation.deadline = timezone.now() - timedelta(minutes=6)
    assert invitation.phase == Invitation.CLOSED and invitation.seconds_left == 0


# --- its life -------------------------------------------------------------------------------------

def stored(invitation) -> Invitation:
    return Invitation.objects.get(pk=invitation.pk)


def test_opening_counts_the_first_time_only(invitation):
    assert invitation.mark_opened() is True
    first = stored(invitation).opened_at
    assert first is not None and invitation.opened_at == first
    assert invitation.mark_opened() is False and stored(invitation).opened_at == first
    # another copy of the row, read before the first view, does not open it again
    stale = Invitation.objects.get(pk=invitation.pk)
    stale.opened_at = None
    assert stale.mark_opened() is False and stored(invitation).opened_at == first


def test_the_clock_starts_once_and_a_lock_reads_the_stored_clock(invitation):
    other = Invitation.objects.get(pk=invitation.pk)
    other.lock()
    assert other.start_clock() is True
    row = stored(invitation)
    assert row.deadline == row.started_at + timedelta(minutes=invitation.packet_version.time_limit_minutes)
    assert row.opened_at == row.started_at
    invitation.lock()  # a copy read before the Start learns of it under the lock
    assert (invitation.started_at, invitation.deadline) == (row.started_at, row.deadline)
    assert invitation.start_clock() is False and stored(invitation).deadline == row.deadline


def test_extending_moves_the_deadline_and_reopens_a_passed_one(invitation):
    invitation.lock()
    with pytest.raises(ValueError):
        invitation.extend_deadline(10)  # not started: no deadline to move
    invitation.start_clock()
    before = invitation.deadline
    invitation.extend_deadline(30)
    assert stored(invitation).deadline == before + timedelta(minutes=30)
    invitation.deadline = timezone.now() - timedelta(hours=1)
    invitation.extend_deadline(10)
    assert timezone.now() + timedelta(minutes=9) < stored(invitation).deadline <= timezone.now() + timedelta(minutes=10)


def test_sent_submitted_and_revoked(invitation):
    invitation.mark_sent()
    at = timezone.now() - timedelta(minutes=1)
    invitation.mark_submitted(at)
    assert invitation.revoke() is True
    row = stored(invitation)
    assert row.sent_at is not None and row.submitted_at == at and row.revoked_at is not None
    assert invitation.revoke() is False and stored(invitation).revoked_at == row.revoked_at
    assert row.status == Invitation.Status.REVOKED


# --- only the model writes an invitation's life ---------------------------------------------------

@pytest.mark.parametrize("source, written", [
    ("Invitation.objects.filter(pk=1).update(deadline=d)", [(1, "deadline")]),
    ("invitation.revoked_at = timezone.now()", [(1, "revoked_at")]),
    ("locked.started_at, locked.deadline = now, now + limit", [(1, "started_at"), (1, "deadline")]),
    ("invitation.save(update_fields=['sent_at'])", [(1, "sent_at")]),
    ("Invitation(candidate=c, packet_version=v, started_at=now)", [(1, "started_at")]),
    ("Invitation.objects.update_or_create(pk=1, defaults={'opened_at': now})", [(1, "opened_at")]),
    ("candidate.invitations.update(revoked_at=now)", [(1, "revoked_at")]),
    ("Invitation.objects.bulk_update(rows, ['deadline'])", [(1, "deadline")]),
    ("setattr(invitation, 'submitted_at', now)", [(1, "submitted_at")]),
    ("x = 1\ninvitation.deadline += step", [(2, "deadline")]),
    ("class Invitation:\n    def f(self):\n        self.deadline = d", [(3, "deadline")]),
    # Reads and look-alikes are not writes.
    ("Invitation.objects.filter(revoked_at__isnull=True, deadline__lt=now)", []),
    ("if invitation.deadline is None: pass", []),
    ("Invitation.objects.values_list('started_at', flat=True)", []),
    ("Facts(opened_at=o, started_at=s)", []),
    ("class Facts:\n    started_at: object = None\n    def f(self):\n        self.started_at = 1", []),
    # A packet's self-check and a review are other models with fields of the same names.
    ("PacketCheck.objects.filter(pk=1).update(status='queued', started_at=None)", []),
    ("review.submitted_at = now; review.save(update_fields=['submitted_at'])", []),
])
def test_the_write_finder_tells_an_invitations_writes_from_reads(source, written):
    assert field_writes(source, INVITATION) == written


def test_only_the_invitation_model_writes_its_lifecycle():
    offenders = writes_outside(INVITATION, {"takehome/models.py": INVITATION.fields})
    assert offenders == [], ("write an invitation's sent_at, opened_at, started_at, deadline, submitted_at and "
                             "revoked_at only through its methods in takehome/models.py (lock, mark_sent, "
                             "mark_opened, start_clock, mark_submitted, extend_deadline, revoke):\n"
                             + "\n".join(offenders))
