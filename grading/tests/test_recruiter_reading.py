"""Recruiters read the review page, the queue and the debrief; they never mark. Reviewers stay blind."""

import pytest

from grading.models import Mark, Review
from grading.tests.reviewing import make_submission, score

pytestmark = pytest.mark.django_db

ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


@pytest.fixture
def reviewed(submission, reviewer, ann):
    score(submission, ann, ALL_PASS, notes={"red_log": "ann's note"})
    score(submission, reviewer, {**ALL_PASS, "red_log": False})
    return submission


def test_the_review_page_is_read_only_for_a_recruiter(client, recruiter, reviewed):
    client.force_login(recruiter)
    html = client.get(f"/review/{reviewed.pk}/").content.decode()
    assert 'id="reader-note"' in html and "only reviewers mark" in html
    assert "/mark/" not in html and "Submit my review" not in html and "<textarea" not in html
    # Every submitted review is shown, the diff unfolded.
    assert "ann&#x27;s note" in html or "ann's note" in html
    assert "Reviewers&#x27; marks" in html or "Reviewers' marks" in html
    assert "Folded until you have scored" not in html


def test_a_recruiter_posting_a_mark_gets_a_clear_403_and_nothing_changes(client, recruiter, reviewed):
    before = list(Mark.objects.order_by("pk").values_list("pk", "passed", "note"))
    client.force_login(recruiter)
    response = client.post(f"/review/{reviewed.pk}/mark/red_log/", {"passed": "false", "note": "x"},
                           headers={"HX-Request": "true"})
    assert response.status_code == 403
    assert "Only reviewers mark reviews" in response.content.decode()
    assert list(Mark.objects.order_by("pk").values_list("pk", "passed", "note")) == before
    assert Review.objects.count() == 2


def test_a_reviewer_is_still_blind_until_they_submit(client, submission, ann, cy):
    score(submission, ann, ALL_PASS, notes={"red_log": "ann's secret"})
    client.force_login(cy)
    html = client.get(f"/review/{submission.pk}/").content.decode()
    assert "ann&#x27;s secret" not in html and "ann's secret" not in html
    assert "/mark/red_log/" in html
    html = client.get(f"/review/debrief/{submission.invitation.packet.slug}/").content.decode()
    assert "hidden until you submit your own" in html


def test_the_debrief_shows_every_mark_and_real_names_to_a_recruiter(client, recruiter, reviewed, sample_packet):
    sample_packet.hide_candidate_names = True
    sample_packet.save()
    client.force_login(recruiter)
    html = client.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    assert "Ada Lovelace" in html and "Candidate #" not in html
    assert "hidden until you submit your own" not in html
    assert "≠ disagree" in html
    assert "Save decision" in html


def test_the_queue_shows_a_recruiter_every_upload(client, recruiter, reviewed):
    client.force_login(recruiter)
    html = client.get("/review/").content.decode()
    assert f'data-submission="{reviewed.pk}"' in html
    assert "Not yet scored by me" not in html and "My review" not in html
    # The htmx poll keeps the reader's columns.
    rows = client.get("/review/?show=all", headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in rows and rows.count("<td") == 6


def test_the_debrief_index_lists_packets_without_filtering_the_queue(client, recruiter, reviewed, sample_packet):
    make_submission(sample_packet, "Bo Second")
    client.force_login(recruiter)
    html = client.get("/review/debrief/").content.decode()
    row = html.split(f'data-packet="{sample_packet.slug}"')[1].split("</tr>")[0]
    assert f'href="/review/debrief/{sample_packet.slug}/"' in row
    assert "<td>2</td>" in row  # invited


def test_the_packet_page_links_its_debrief(client, recruiter, sample_packet):
    client.force_login(recruiter)
    html = client.get(f"/packets/{sample_packet.slug}/").content.decode()
    assert f'href="/review/debrief/{sample_packet.slug}/"' in html
