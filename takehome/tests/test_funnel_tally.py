"""The funnel is kept as a tally by the actions themselves: it always equals a fresh count of the rows."""

from collections import defaultdict

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from grading import lifecycle
from grading.tests.reviewing import score
from sessions_app import actions as candidate
from sessions_app.models import Submission
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
    for facts in funnel.all_facts(packet).values():
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


def test_the_tally_follows_every_action_of_a_candidates_journey(sample_packet, recruiter, make_reviewer,
                                                                   media_root, tmp_path, settings):
    settings.UPLOAD_INTERVAL_S = 0
    assert kept(sample_packet) == {}  # built, empty, before anyone is invited
    version = sample_packet.latest_version()
    steps = []

    def step(what: str) -> None:
        assert kept(sample_packet) == recount(sample_packet), f"after: {what}"
        steps.append(what)

    ada, bo = (new.invitation for new in do_invite_candidates(
        version, [InviteRow(1, "Ada", "ada@example.com"), InviteRow(2, "Bo", "bo@example.com")], recruiter,
        send=False))
    step("invite")
    candidate.do_open_invitation(ada)
    step("open")
    candidate.do_start_session(ada)
    step("start")
    report = candidate.GateReport(log_text=RED_LOG, tree_hashes={}, local_time="")
    candidate.do_record_gate_step(ada, "red", report)
    step("red")
    candidate.do_record_model_exchange(ada, messages=[{"role": "user", "content": "why?"}], tokens_in=30,
                                       tokens_out=12)
    step("model window")
    first = upload(ada, tmp_path)
    step("upload")
    lifecycle.message_sent(first.pk)
    graded(first)
    step("graded")
    score(first, make_reviewer("ann"), ALL_PASS)
    step("review submitted")
    second = upload(ada, tmp_path, "again.zip")  # the new upload is under review, not graded yet
    step("a second upload")
    lifecycle.message_sent(second.pk)
    lifecycle.finish_rejected(lifecycle.start_run(second.pk, worker="w1@host"), "a symbolic link")
    step("the second refused: the first is under review again")
    do_decide(ada, "advance", "", recruiter)
    step("decided")
    do_decide(ada, "undecided", "", recruiter)
    step("undecided again")
    lifecycle.regrade(first.pk)
    step("regrade")
    candidate.do_start_session(bo)
    step("another candidate starts")

    assert kept(sample_packet) == {
        "invited": 2, "opened": 2, "started": 2, "red": 1, "red_timed": 1, **{f"red_le_{e}": 1 for e in funnel.TIME_TO_RED_EDGES},
        "submitted": 1, "task_timed": 1, **{f"task_le_{e}": 1 for e in funnel.TIME_ON_TASK_EDGES},
        "reviewed": 1, "model_candidates": 1, "model_requests": 1, "model_tokens_in": 30, "model_tokens_out": 12,
    }  # after the regrade: queued, so no longer graded; its review still counts
    assert Submission.objects.get(pk=first.pk).status == Submission.Status.QUEUED


def test_reading_the_funnel_costs_one_query_whatever_the_number_of_candidates(sample_packet, recruiter):
    version = sample_packet.latest_version()
    do_invite_candidates(version, [InviteRow(i, f"C{i}", f"c{i}@example.com") for i in range(3)], recruiter, send=False)
    funnel.counts(sample_packet)
    with CaptureQueriesContext(connection) as few:
        assert funnel.counts(sample_packet)["invited"] == 3
    do_invite_candidates(version, [InviteRow(i, f"D{i}", f"d{i}@example.com") for i in range(30)], recruiter,
                         send=False)
    with CaptureQueriesContext(connection) as many:
        assert funnel.counts(sample_packet)["invited"] == 33
    assert len(few) == len(many) == 1


def test_a_packet_never_counted_is_built_on_first_read(sample_packet, recruiter):
    version = sample_packet.latest_version()
    do_invite_candidates(version, [InviteRow(1, "Ada", "ada@example.com")], recruiter, send=False)
    FunnelTally.objects.all().delete()  # as an install from before the tally holds it
    assert kept(sample_packet) == {"invited": 1} == recount(sample_packet)
    assert FunnelTally.objects.filter(packet=sample_packet, counter=funnel.BUILT).exists()


def test_a_deletion_has_the_tally_counted_again(sample_packet, recruiter):
    version = sample_packet.latest_version()
    do_invite_candidates(version, [InviteRow(i, f"C{i}", f"c{i}@example.com") for i in range(3)], recruiter, send=False)
    assert kept(sample_packet)["invited"] == 3
    Invitation.objects.filter(candidate__email="c1@example.com").delete()  # by hand: no action sees it
    assert kept(sample_packet) == {"invited": 2} == recount(sample_packet)
