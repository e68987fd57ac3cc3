"""The funnel is kept as a tally by the actions themselves: it always equals a fresh count of the rows."""

from collections import defaultdict
from contextlib import contextmanager

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from grading import lifecycle
from grading.tests.reviewing import score
from sessions_app import actions as candidate
from sessions_app.models import ModelExchange, Submission
from sessions_app.tests.helpers import RED_LOG, honest_zip, sha
from sessions_app.uploads import IncomingArchive
from takehome import funnel
from takehome.actions import do_decide, do_invite_candidates
from takehome.invites import InviteRow
from takehome.models import FunnelTally, Invitation

pytestmark = pytest.mark.django_db

ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


def recount(packet) -> dict[str, int]:
    """The funnel counted afresh from every row, as a first build does."""
    totals = defaultdict(int)
    for facts in funnel.all_facts(Invitation.objects.filter(packet_version__packet=packet)).values():
        for name, value in funnel.counters(facts).items():
            totals[name] += value
    return dict(totals)


def kept(packet) -> dict[str, int]:
    return {name: n for name, n in funnel.counts(packet).items() if n}


def upload(invitation, tmp_path, name="w.zip"):
    data = honest_zip()
    path = tmp_path / name
    path.write_bytes(data)
    return candidate.do_accept_upload(invitation, IncomingArchive(path, sha(data), len(data), name)).submission


def graded(submission):
    run = lifecycle.start_run(submission.pk, worker="w1@host")
    lifecycle.finish_graded(run)


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Run what follows as a transaction that commits: the funnel's updates run after it (nothing else does)."""
    @contextmanager
    def commit():
        with django_capture_on_commit_callbacks() as callbacks:
            yield
        for callback in callbacks:
            if hasattr(callback, "funnel_invitations"):
                callback()
    return commit


def test_the_tally_follows_every_action_of_a_candidates_journey(sample_packet, recruiter, make_reviewer,
                                                                   media_root, tmp_path, settings, committed):
    settings.UPLOAD_INTERVAL_S = 0
    assert kept(sample_packet) == {}  # built, empty, before anyone is invited
    version = sample_packet.latest_version()
    report = candidate.GateReport(log_text=RED_LOG, tree_hashes={}, local_time="")
    done = {}

    def step(what: str, action) -> None:
        with committed():
            done[what] = action()
        assert kept(sample_packet) == recount(sample_packet), f"after: {what}"

    step("invite", lambda: [new.invitation for new in do_invite_candidates(
        version, [InviteRow(1, "Ada", "ada@example.com"), InviteRow(2, "Bo", "bo@example.com")], recruiter,
        send=False)])
    ada, bo = done["invite"]
    step("open", lambda: candidate.do_open_invitation(ada))
    step("start", lambda: candidate.do_start_session(ada))
    step("red", lambda: candidate.do_record_gate_step(ada, "red", report))
    step("model window", lambda: candidate.do_record_model_exchange(
        ada, messages=[{"role": "user", "content": "why?"}], tokens_in=30, tokens_out=12))
    step("upload", lambda: upload(ada, tmp_path))
    first = done["upload"]
    step("graded", lambda: (lifecycle.message_sent(first.pk, "t1", "upload"), graded(first)))
    step("review submitted", lambda: score(first, make_reviewer("ann"), ALL_PASS))
    step("a second upload", lambda: upload(ada, tmp_path, "again.zip"))  # under review, not graded yet
    second = done["a second upload"]
    step("the second refused: the first is under review again", lambda: (
        lifecycle.message_sent(second.pk, "t2", "upload"),
        lifecycle.finish_rejected(lifecycle.start_run(second.pk, worker="w1@host"), "a symbolic link")))
    step("decided", lambda: do_decide(ada, "advance", "", recruiter))
    step("undecided again", lambda: do_decide(ada, "undecided", "", recruiter))
    step("regrade", lambda: lifecycle.regrade(first.pk))
    step("another candidate starts", lambda: candidate.do_start_session(bo))

    assert kept(sample_packet) == {
        "invited": 2, "opened": 2, "started": 2, "red": 1, "red_timed": 1,
        **{f"red_le_{e}": 1 for e in funnel.TIME_TO_RED_EDGES},
        "submitted": 1, "task_timed": 1, **{f"task_le_{e}": 1 for e in funnel.TIME_ON_TASK_EDGES},
        "reviewed": 1, "model_candidates": 1, "model_requests": 1, "model_tokens_in": 30, "model_tokens_out": 12,
    }  # after the regrade: queued, so no longer graded; its review still counts
    assert Submission.objects.get(pk=first.pk).status == Submission.Status.QUEUED


def test_an_update_runs_after_the_commit_once_however_often_it_was_asked(sample_packet, committed,
                                                                        django_capture_on_commit_callbacks):
    invite(sample_packet, committed, "ada@example.com")
    new = Invitation.objects.get()
    assert kept(sample_packet) == {"invited": 1}
    with django_capture_on_commit_callbacks() as callbacks:
        candidate.do_start_session(new)
        funnel.touch(new.pk)
        assert kept(sample_packet) == {"invited": 1}  # nothing yet: the transaction has not committed
    updates = [c for c in callbacks if hasattr(c, "funnel_invitations")]
    assert len(updates) == 1
    updates[0]()
    assert kept(sample_packet) == {"invited": 1, "opened": 1, "started": 1}


def invite(packet, committed, *emails):
    with committed():
        do_invite_candidates(packet.latest_version(), [InviteRow(i, e.split("@")[0], e) for i, e in enumerate(emails)],
                             None, send=False)


def test_reading_the_funnel_costs_one_query_whatever_the_number_of_candidates(sample_packet, committed):
    invite(sample_packet, committed, *(f"c{i}@example.com" for i in range(3)))
    funnel.counts(sample_packet)
    with CaptureQueriesContext(connection) as few:
        assert funnel.counts(sample_packet)["invited"] == 3
    invite(sample_packet, committed, *(f"d{i}@example.com" for i in range(30)))
    with CaptureQueriesContext(connection) as many:
        assert funnel.counts(sample_packet)["invited"] == 33
    assert len(few) == len(many) == 1


def test_a_packet_never_counted_is_built_after_migrate_or_else_on_first_read(sample_packet, committed):
    invite(sample_packet, committed, "ada@example.com")
    FunnelTally.objects.all().delete()  # as an install from before the tally holds it
    call_command("migrate", verbosity=0)
    assert FunnelTally.objects.filter(packet=sample_packet, counter=funnel.BUILT).exists()
    FunnelTally.objects.all().delete()
    assert kept(sample_packet) == {"invited": 1} == recount(sample_packet)
    assert FunnelTally.objects.filter(packet=sample_packet, counter=funnel.BUILT).exists()


def test_a_deletion_has_the_tally_counted_again(sample_packet, committed, django_capture_on_commit_callbacks):
    invite(sample_packet, committed, *(f"c{i}@example.com" for i in range(3)))
    assert kept(sample_packet)["invited"] == 3
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        Invitation.objects.filter(candidate__email__in=["c1@example.com", "c2@example.com"]).delete()  # no action
    assert len(callbacks) == 1  # forgotten once, however many rows went
    assert kept(sample_packet) == {"invited": 1} == recount(sample_packet)


def test_a_deletion_of_a_later_room_s_row_has_the_tally_counted_again(sample_packet, committed,
                                                                      django_capture_on_commit_callbacks):
    invite(sample_packet, committed, "ada@example.com")
    with committed():
        candidate.do_record_model_exchange(Invitation.objects.get(), messages=[{"role": "user", "content": "why?"}],
                                           tokens_in=30, tokens_out=12)
    assert kept(sample_packet)["model_requests"] == 1
    with django_capture_on_commit_callbacks(execute=True):
        ModelExchange.objects.all().delete()  # no action: the desk connects the candidate's rows (grading.apps)
    assert kept(sample_packet) == {"invited": 1} == recount(sample_packet)
