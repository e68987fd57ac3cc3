"""Assignment: each graded upload gets the reviewers its packet asks for, spread by load; "my queue" comes
first; a recruiter reassigns on the review page, in the audit trail."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from grading import actions, pipeline
from grading.engine.core import empty_evidence
from grading.models import Assignment
from grading.tasks import sweep_submissions
from grading.tests.reviewing import make_submission, score, upload_again
from sessions_app.models import Submission
from takehome.models import AuditEvent

pytestmark = pytest.mark.django_db
ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


def assignees(submission) -> list[str]:
    return sorted(Assignment.objects.filter(submission=submission).values_list("reviewer__username", flat=True))


def graded_now(packet, name: str, **fields) -> Submission:
    """An upload graded as the worker ends it: evidence recorded, the run and the upload graded."""
    submission = make_submission(packet, name, status=Submission.Status.GRADING, **fields)
    evidence = empty_evidence("x")
    evidence["archive"].update(accepted=True, reason=None)
    pipeline.record_evidence(pipeline.claim(submission.pk), evidence, 1.0)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.GRADED
    return submission


@pytest.fixture
def team(make_reviewer, recruiter, groups):
    """Three reviewers (ann, bob, cy, made in that order), and people who must never be assigned."""
    people = [make_reviewer(name) for name in ("ann", "bob", "cy")]
    gone = make_reviewer("gone")
    gone.is_active = False
    gone.save()
    User.objects.create_superuser("root", password="pw-root")  # passes every group check, reviews nothing
    return people


def test_grading_ends_with_the_packets_number_of_reviewers_spread_by_load(team, sample_packet):
    sample_packet.reviewers_per_submission = 2
    sample_packet.save()
    first = graded_now(sample_packet, "Ada")
    assert assignees(first) == ["ann", "bob"]  # all at 0 open: the lower ids
    second = graded_now(sample_packet, "Grace")
    assert assignees(second) == ["ann", "cy"]  # cy has none open; ann and bob tie at one, ann first
    score(first, team[0], ALL_PASS)  # ann's review of Ada is done: no longer her load
    third = graded_now(sample_packet, "Alan")
    assert assignees(third) == ["ann", "bob"]  # ann 1 open, bob 1, cy 1: ann, bob by id
    assert actions.loads([u.pk for u in team]) == {team[0].pk: 2, team[1].pk: 2, team[2].pk: 1}


def test_never_the_same_reviewer_twice_and_never_more_than_the_team(team, sample_packet):
    sample_packet.reviewers_per_submission = 5
    sample_packet.save()
    submission = graded_now(sample_packet, "Ada")
    assert assignees(submission) == ["ann", "bob", "cy"]  # not the inactive one, not the superuser
    assert actions.do_assign_reviewers(submission.pk) == []
    assert actions.assign_waiting() == 0  # short of five, but the team has no one else: not looked at again


def test_only_the_upload_under_review_is_assigned_and_counts_as_load(team, sample_packet):
    refused = make_submission(sample_packet, "Ada", status=Submission.Status.REJECTED)
    assert actions.do_assign_reviewers(refused.pk) == []
    old = graded_now(sample_packet, "Grace")
    assert assignees(old) == ["ann"]
    newer = upload_again(old)  # graded straight into the database, as a test upload: the sweep assigns it
    assert actions.loads([team[0].pk]) == {team[0].pk: 0}  # superseded: no longer her load
    sweep_submissions()
    assert assignees(newer) == ["ann"]  # so she ties with the others at none open, and has the lowest id
    assert assignees(old) == ["ann"]  # the old upload keeps its assignment, which the queue no longer shows


def test_the_sweep_assigns_uploads_graded_before_any_reviewer_joined(groups, sample_packet, make_reviewer):
    submission = graded_now(sample_packet, "Ada")
    assert assignees(submission) == []
    make_reviewer("ann")
    assert sweep_submissions() == 0  # nothing sent for grading
    assert assignees(submission) == ["ann"]
    sample_packet.reviewers_per_submission = 2
    sample_packet.save()
    make_reviewer("bob")
    sweep_submissions()
    assert assignees(submission) == ["ann", "bob"]


def test_a_deactivated_reviewers_open_uploads_go_to_someone_else_at_the_sweep(team, sample_packet):
    submission = graded_now(sample_packet, "Ada")
    assert assignees(submission) == ["ann"]
    ann = team[0]
    ann.is_active = False
    ann.save()
    sweep_submissions()
    assert assignees(submission) == ["ann", "bob"]  # hers stays in the record; bob does the review
    sweep_submissions()
    assert assignees(submission) == ["ann", "bob"]


def test_my_queue_comes_first_and_the_rest_leaves_out_what_is_in_it(team, client, sample_packet):
    now = timezone.now()
    ann = team[0]
    mine_old = make_submission(sample_packet, "Ada", uploaded_at=now - timedelta(hours=3))
    theirs = make_submission(sample_packet, "Grace", uploaded_at=now - timedelta(hours=2))
    mine_new = make_submission(sample_packet, "Alan", uploaded_at=now - timedelta(hours=1))
    for s in (mine_old, mine_new):
        Assignment.objects.create(submission=s, reviewer=ann)
    Assignment.objects.create(submission=theirs, reviewer=team[1])
    client.force_login(ann)
    html = client.get("/review/").content.decode()
    mine_part, rest = html.split('id="rest-heading"')
    mine_ids = [int(x) for x in re.findall(r'data-submission="(\d+)"', mine_part)]
    assert mine_ids == [mine_old.pk, mine_new.pk]  # oldest first
    assert [int(x) for x in re.findall(r'data-submission="(\d+)"', rest)] == [theirs.pk]
    partial = client.get("/review/?part=mine", headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in partial and 'id="my-queue-rows"' in partial and f'data-submission="{mine_old.pk}"' in partial
    # the review page's "next" is the oldest of my queue, wherever the page is
    page = client.get(f"/review/{mine_new.pk}/").content.decode()
    assert f'href="/review/{mine_old.pk}/" id="next-in-queue"' in page
    score(mine_old, ann, ALL_PASS)  # done: out of my queue, into the rest (as scored)
    html = client.get("/review/?show=all").content.decode()
    mine_part, rest = html.split('id="rest-heading"')
    assert f'data-submission="{mine_old.pk}"' not in mine_part and f'data-submission="{mine_old.pk}"' in rest


def test_my_queue_shows_its_oldest_few_and_says_more_are_assigned(team, client, sample_packet):
    from grading.views import MY_QUEUE_SIZE

    now = timezone.now()
    ann = team[0]
    mine = [make_submission(sample_packet, f"Person {i}", uploaded_at=now - timedelta(minutes=100 - i))
            for i in range(MY_QUEUE_SIZE + 1)]
    for s in mine:
        Assignment.objects.create(submission=s, reviewer=ann)
    client.force_login(ann)
    html = client.get("/review/").content.decode()
    mine_part, rest = html.split('id="rest-heading"')
    assert [int(x) for x in re.findall(r'data-submission="(\d+)"', mine_part)] == [s.pk for s in mine[:-1]]
    assert "More are assigned to you" in mine_part
    score(mine[0], ann, ALL_PASS)  # one done: the newest comes in, and no more are waiting
    mine_part = client.get("/review/").content.decode().split('id="rest-heading"')[0]
    assert f'data-submission="{mine[-1].pk}"' in mine_part and "More are assigned to you" not in mine_part


def test_a_recruiter_reassigns_on_the_review_page_and_it_is_audited(team, recruiter, client, sample_packet):
    ann, bob, cy = team
    submission = make_submission(sample_packet, "Ada")
    Assignment.objects.create(submission=submission, reviewer=ann)
    client.force_login(recruiter)
    page = client.get(f"/review/{submission.pk}/").content.decode()
    assert 'id="assignments"' in page and f'id="reassign-{ann.pk}"' in page
    assert f'<option value="{bob.pk}">bob (0 open)</option>' in page and 'id="add-reviewer"' not in page
    response = client.post(f"/review/{submission.pk}/assign/", {"from": ann.pk, "to": bob.pk})
    assert response.status_code == 302
    assert assignees(submission) == ["bob"]
    assert Assignment.objects.get(submission=submission).assigned_by == recruiter
    event = AuditEvent.objects.get(action="reassign")
    assert (event.actor, event.detail, event.invitation_id) == (recruiter, "ann -> bob", submission.invitation_id)
    # bob has submitted: his review stays his, and nothing is written
    score(submission, bob, ALL_PASS)
    html = client.post(f"/review/{submission.pk}/assign/", {"from": bob.pk, "to": cy.pk}).content.decode()
    assert "has submitted their review; it stays theirs" in html
    assert assignees(submission) == ["bob"] and AuditEvent.objects.filter(action="reassign").count() == 1
    # one more reviewer, when the packet asks for two
    sample_packet.reviewers_per_submission = 2
    sample_packet.save()
    assert 'id="add-reviewer"' in client.get(f"/review/{submission.pk}/").content.decode()
    client.post(f"/review/{submission.pk}/assign/", {"to": cy.pk})
    assert assignees(submission) == ["bob", "cy"]
    assert AuditEvent.objects.filter(action="reassign", detail="added cy").exists()


@pytest.mark.parametrize("post", [{"from": "ann", "to": "cy"}, {"from": "bob", "to": "ann"}, {"from": "ann", "to": "x"},
                                  {"from": "ann", "to": "gone"}])
def test_a_reassignment_that_cannot_be_done_says_why_and_changes_nothing(team, recruiter, client, sample_packet,
                                                                         post):
    submission = make_submission(sample_packet, "Ada")
    for name in ("ann", "cy"):
        Assignment.objects.create(submission=submission, reviewer=User.objects.get(username=name))
    ids = {u.username: str(u.pk) for u in User.objects.all()}
    client.force_login(recruiter)
    response = client.post(f"/review/{submission.pk}/assign/", {k: ids.get(v, v) for k, v in post.items()})
    assert response.status_code == 200 and 'id="reassign-error"' in response.content.decode()
    assert assignees(submission) == ["ann", "cy"] and not AuditEvent.objects.filter(action="reassign").exists()


def test_only_recruiters_reassign(team, client, sample_packet):
    submission = make_submission(sample_packet, "Ada")
    Assignment.objects.create(submission=submission, reviewer=team[0])
    client.force_login(team[1])
    assert client.post(f"/review/{submission.pk}/assign/", {"from": team[0].pk, "to": team[1].pk}).status_code == 403
    assert 'name="from"' not in client.get(f"/review/{submission.pk}/").content.decode()  # no form for a reviewer
    assert assignees(submission) == ["ann"]


def test_a_recruiter_sets_the_number_of_reviewers_on_the_packet_page(recruiter_client, sample_packet):
    page = recruiter_client.get(f"/packets/{sample_packet.slug}/").content.decode()
    assert 'name="reviewers_per_submission"' in page and 'value="1"' in page
    recruiter_client.post(f"/packets/{sample_packet.slug}/reviewers", {"reviewers_per_submission": "3"})
    sample_packet.refresh_from_db()
    assert sample_packet.reviewers_per_submission == 3
    assert AuditEvent.objects.get(action="reviewers_set").detail == "reviewers per submission: 1 -> 3"
    for bad in ("0", "6", "two"):
        recruiter_client.post(f"/packets/{sample_packet.slug}/reviewers", {"reviewers_per_submission": bad})
    sample_packet.refresh_from_db()
    assert sample_packet.reviewers_per_submission == 3 and AuditEvent.objects.filter(action="reviewers_set").count() == 1

