"""The queue: latest submissions, filters, names hidden per packet, live status, pagination."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from grading import lifecycle, pipeline
from grading.tests.reviewing import make_submission, score
from sessions_app.models import Submission
from takehome.tests.factories import make_packet

pytestmark = pytest.mark.django_db
HX = {"HX-Request": "true"}
ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


def shown(response) -> list[int]:
    return [int(x) for x in re.findall(r'data-submission="(\d+)"', response.content.decode())]


def test_latest_per_invitation_newest_first_and_not_yet_scored_by_me(rob, reviewer, sample_packet):
    now = timezone.now()
    old = make_submission(sample_packet, "Ada", uploaded_at=now - timedelta(hours=2))
    newer = make_submission(sample_packet, "Grace", uploaded_at=now - timedelta(hours=1))
    done = make_submission(sample_packet, "Alan", uploaded_at=now)
    superseded = Submission.objects.create(invitation=old.invitation, archive="uploads/old.zip", sha256="1" * 64,
                                           size=1, is_latest=False, uploaded_at=now - timedelta(hours=3))
    score(done, reviewer, ALL_PASS)
    assert shown(rob.get("/review/")) == [newer.pk, old.pk]
    everything = rob.get("/review/?show=all")
    assert shown(everything) == [done.pk, newer.pk, old.pk] and superseded.pk not in shown(everything)
    assert "submitted" in everything.content.decode().split(f'data-submission="{done.pk}"')[1].split("</tr>")[0]


def test_filter_by_packet(rob, sample_packet):
    other = make_packet()
    mine = make_submission(sample_packet, "Ada")
    theirs = make_submission(other, "Grace")
    assert shown(rob.get(f"/review/?packet={other.slug}")) == [theirs.pk]
    assert shown(rob.get(f"/review/?packet={sample_packet.slug}")) == [mine.pk]


def test_an_unknown_packet_filters_nothing_and_offers_no_debrief(rob, sample_packet):
    mine = make_submission(sample_packet, "Ada")
    response = rob.get("/review/?packet=no-such-packet")
    assert shown(response) == [mine.pk]
    assert "/review/debrief/no-such-packet/" not in response.content.decode()


def test_hidden_names_show_a_code(rob, sample_packet):
    submission = make_submission(sample_packet, "Ada Lovelace")
    sample_packet.hide_candidate_names = True
    sample_packet.save()
    html = rob.get("/review/").content.decode()
    label = submission.invitation.hidden_label()
    assert "Ada Lovelace" not in html and label in html and "Candidate #" not in html


def test_status_updates_live_while_grading(rob, sample_packet):
    grading = make_submission(sample_packet, "Ada", status=Submission.Status.GRADING)
    html = rob.get("/review/").content.decode()
    assert 'id="queue-rows"' in html and 'hx-trigger="every 3s"' in html
    partial = rob.get("/review/?show=todo", headers=HX)
    assert b"<html" not in partial.content and b'id="queue-rows"' in partial.content
    Submission.objects.filter(pk=grading.pk).update(status="graded")
    partial = rob.get("/review/?show=todo", headers=HX).content.decode()
    assert "Graded" in partial and 'hx-trigger="every 10s"' in partial  # slower: only new rows to wait for


def test_the_first_page_brings_in_new_uploads_without_a_reload(rob, sample_packet):
    first = make_submission(sample_packet, "Ada", status=Submission.Status.GRADED)
    html = rob.get(f"/review/?packet={sample_packet.slug}&show=all").content.decode()
    poll = re.search(r'<tbody id="queue-rows" hx-get="([^"]+)" hx-trigger="every 10s"', html)
    assert poll, "the first page must poll even when nothing is grading"
    newer = make_submission(sample_packet, "Grace")
    partial = rob.get(poll.group(1).replace("&amp;", "&"), headers=HX)
    assert b"<html" not in partial.content and shown(partial) == [newer.pk, first.pk]


def test_a_later_page_polls_only_while_its_rows_grade(rob, sample_packet):
    subs = [make_submission(sample_packet, f"Candidate {i}", status=Submission.Status.GRADED) for i in range(52)]
    response = rob.get(f"/review/?show=all&after={subs[-50].pk}")
    assert shown(response) == [subs[1].pk, subs[0].pk]
    assert "hx-trigger" not in response.content.decode().split('id="queue-rows"')[1].split(">")[0]
    Submission.objects.filter(pk=subs[0].pk).update(status="grading")
    later = rob.get(f"/review/?show=all&after={subs[-50].pk}").content.decode()
    assert f'hx-get="/review/?show=all&amp;after={subs[-50].pk}" hx-trigger="every 3s"' in later


def test_paginated_with_a_fixed_number_of_queries(rob, sample_packet, django_assert_max_num_queries):
    for i in range(55):
        make_submission(sample_packet, f"Candidate {i}")
    # session, user, groups (view + nav), count, the page's ids, its rows, their reviews, packets filter
    with django_assert_max_num_queries(10):
        first = rob.get("/review/")
    assert len(shown(first)) == 50 and b"55 submissions" in first.content
    assert len(shown(rob.get(f"/review/?after={shown(first)[-1]}"))) == 5


def test_packet_page_toggles_hidden_names(client, recruiter, sample_packet):
    client.force_login(recruiter)
    page = client.get(f"/packets/{sample_packet.slug}/").content.decode()
    assert 'name="hide"' in page and "Hide candidate names from reviewers" in page
    response = client.post(f"/packets/{sample_packet.slug}/candidate-names", {"hide": "on"})
    assert response.status_code == 302
    sample_packet.refresh_from_db()
    assert sample_packet.hide_candidate_names is True
    client.post(f"/packets/{sample_packet.slug}/candidate-names", {})
    sample_packet.refresh_from_db()
    assert sample_packet.hide_candidate_names is False


def test_only_recruiters_toggle_names(client, reviewer, sample_packet):
    client.force_login(reviewer)
    assert client.post(f"/packets/{sample_packet.slug}/candidate-names", {"hide": "on"}).status_code == 403


def row_of(response, submission) -> str:
    return response.content.decode().split(f'data-submission="{submission.pk}"')[1].split("</tr>")[0]


def test_a_refused_upload_never_hides_the_graded_one_at_any_moment(rob, invitation, media_root, tmp_path, settings):
    """Real multipart uploads; the worker's steps taken by hand, so each moment can be looked at."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    from grading.tests.zips import make_zip
    from sessions_app.actions import do_start_session
    from sessions_app.tests.helpers import honest_zip

    settings.UPLOAD_INTERVAL_S = 0
    do_start_session(invitation)
    candidate = Client()

    def upload(data: bytes) -> Submission:
        r = candidate.post(f"/t/{invitation.raw_token}/upload", {"archive": SimpleUploadedFile("w.zip", data)},
                           headers={"X-Takehome-Client": "gate"})
        assert r.status_code == 201, r.content
        return Submission.objects.get(pk=r.json()["submission"])

    good = upload(honest_zip())
    assert shown(rob.get("/review/?show=all")) == [good.pk]  # 1. uploaded: under review, grading to come
    lifecycle.finish_graded(pipeline.claim(good.pk))
    assert shown(rob.get("/review/?show=all")) == [good.pk]  # 2. graded

    symlink = make_zip(tmp_path / "bad.zip", {"refund-sum/invoices.py": b"x = 1\n"},
                       symlinks={"refund-sum/link": "/etc/passwd"}).read_bytes()
    bad = upload(symlink)
    # 3. Not unpacked yet, so not known to be refused: the newer upload is the one under review.
    assert shown(rob.get("/review/?show=all")) == [bad.pk]
    lifecycle.finish_rejected(pipeline.claim(bad.pk), "The archive holds a symbolic link (refund-sum/link).")
    # 4. Refused: the graded upload is under review again, graded once and not again.
    response = rob.get("/review/?show=all")
    assert shown(response) == [good.pk] and "Graded" in row_of(response, good)
    assert Submission.objects.get(pk=good.pk).runs.count() == 1


def test_a_candidate_whose_only_upload_was_refused_has_a_row_that_says_so(rob, invitation, sample_packet,
                                                                        media_root, tmp_path, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    from grading.tests.zips import make_zip
    from sessions_app.actions import do_start_session

    do_start_session(invitation)
    data = make_zip(tmp_path / "bad.zip", {"refund-sum/invoices.py": b"x = 1\n"},
                    symlinks={"refund-sum/link": "/etc/passwd"}).read_bytes()
    r = Client().post(f"/t/{invitation.raw_token}/upload", {"archive": SimpleUploadedFile("w.zip", data)},
                      headers={"X-Takehome-Client": "gate"})
    bad = Submission.objects.get(pk=r.json()["submission"])
    lifecycle.finish_rejected(pipeline.claim(bad.pk), "The archive holds a symbolic link (refund-sum/link).")
    good = make_submission(sample_packet, "Grace")
    response = rob.get("/review/?show=all")
    assert shown(response) == [good.pk, bad.pk]  # the candidate keeps a row, as the intro says
    html = response.content.decode()
    intro = html.split('<p class="muted">One row per candidate')[1].split("</p>")[0]
    assert "when none of their uploads was accepted, their latest refused one, which says so" in intro
    row = row_of(response, bad)
    assert "No upload accepted: this latest one was refused: The archive holds a symbolic link" in row
    assert "No upload accepted" not in row_of(response, good)


def test_after_a_review_the_queue_offers_the_newer_upload(rob, reviewer, sample_packet):
    from grading.tests.reviewing import upload_again

    first = make_submission(sample_packet, "Ada", uploaded_at=timezone.now() - timedelta(hours=1))
    score(first, reviewer, ALL_PASS)
    assert shown(rob.get("/review/")) == []
    newer = upload_again(first)
    response = rob.get("/review/")
    assert shown(response) == [newer.pk]
    row = row_of(response, newer)
    assert "not started" in row and "you reviewed an earlier upload" in row and "and 1 of an earlier upload" in row


def test_the_queue_shows_whether_each_candidates_deadline_has_passed(rob, sample_packet, settings):
    from takehome.models import Invitation

    settings.UPLOAD_GRACE_S = 300
    now = timezone.now()
    running, grace, closed = (make_submission(sample_packet, name) for name in ("Ada", "Grace", "Alan"))
    for submission, deadline in ((running, now + timedelta(minutes=30)), (grace, now - timedelta(minutes=2)),
                                 (closed, now - timedelta(hours=1))):
        Invitation.objects.filter(pk=submission.invitation_id).update(started_at=now - timedelta(hours=2),
                                                                      deadline=deadline)
    response = rob.get("/review/")
    assert 'data-phase="running"' in row_of(response, running) and "may upload again until" in row_of(response, running)
    assert "still to come" in row_of(response, running)  # the deadline, in its column: not yet passed
    assert 'data-phase="grace"' in row_of(response, grace) and "may still upload until" in row_of(response, grace)
    assert 'data-phase="closed"' in row_of(response, closed) and "passed · final" in row_of(response, closed)
    assert "<th>Candidate's deadline</th>" in response.content.decode()


def test_a_tampered_submission_is_marked_in_the_queue(rob, sample_packet):
    from grading.pipeline import record_evidence
    from grading.tests.test_review_detail import tampered_evidence

    honest = make_submission(sample_packet, name="Honest Hal")
    cheat = make_submission(sample_packet, name="Cheat Chen", status=Submission.Status.GRADING)
    record_evidence(pipeline.claim(cheat.pk), tampered_evidence(), 1.0)
    html = rob.get("/review/?show=all").content.decode()
    rows = {pk: html.split(f'data-submission="{pk}"')[1].split("</tr>")[0] for pk in (honest.pk, cheat.pk)}
    assert "tampered-tag" in rows[cheat.pk] and "tampered-tag" not in rows[honest.pk]


def test_an_upload_inside_the_grace_period_is_marked_late(rob, sample_packet, settings):
    from takehome.models import Invitation

    settings.UPLOAD_GRACE_S = 300
    late, on_time = (make_submission(sample_packet, name) for name in ("Late Lou", "Prompt Pam"))
    for submission, after in ((late, timedelta(minutes=1, seconds=30)), (on_time, -timedelta(minutes=10))):
        Invitation.objects.filter(pk=submission.invitation_id).update(deadline=submission.uploaded_at - after)
    response = rob.get("/review/?show=all")
    assert "late by 2 min, within grace" in row_of(response, late)
    assert "late by" not in row_of(response, on_time)
