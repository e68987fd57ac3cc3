"""The invitations board shows what came back: grading, reviews, disagreement, links to read the work."""

from datetime import timedelta

import pytest

from grading.tests.reviewing import make_submission, score
from sessions_app.models import Submission
from takehome.models import Invitation

pytestmark = pytest.mark.django_db

ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


def row_of(html: str, invitation_id: int) -> str:
    return html.split(f'data-invitation="{invitation_id}"')[1].split("</tr>")[0]


def test_the_board_shows_grading_reviews_and_disagreement(recruiter_client, sample_packet, make_reviewer):
    ann, rob = make_reviewer("ann"), make_reviewer("rob")
    agreed = make_submission(sample_packet, "Ada Agreed")
    score(agreed, ann, ALL_PASS)
    score(agreed, rob, ALL_PASS)
    split = make_submission(sample_packet, "Bo Split")
    score(split, ann, ALL_PASS)
    score(split, rob, {**ALL_PASS, "refusal_specific": False})
    waiting = make_submission(sample_packet, "Cy Waiting", status=Submission.Status.GRADING)

    html = recruiter_client.get(f"/packets/{sample_packet.slug}/invitations/").content.decode()

    row = row_of(html, agreed.invitation_id)
    assert 'data-grading="graded"' in row and "2 reviews submitted" in row and "data-disagree" not in row
    assert f'href="/review/{agreed.pk}/"' in row and f'href="/review/debrief/{sample_packet.slug}/"' in row
    assert 'data-disagree="yes"' in row_of(html, split.invitation_id)
    row = row_of(html, waiting.invitation_id)
    assert 'data-grading="grading"' in row and "0 reviews submitted" in row


def came_late(*submissions, by=timedelta(minutes=1, seconds=30)):
    """Move each submission's deadline to before its upload, by ``by`` (inside the default 5-minute grace)."""
    for submission in submissions:
        Invitation.objects.filter(pk=submission.invitation_id).update(deadline=submission.uploaded_at - by)


def test_an_upload_inside_the_grace_period_is_marked_late_in_the_outcome(recruiter_client, sample_packet, settings):
    settings.UPLOAD_GRACE_S = 300
    late, on_time = (make_submission(sample_packet, name) for name in ("Late Lou", "Prompt Pam"))
    came_late(late)
    came_late(on_time, by=-timedelta(minutes=10))
    html = recruiter_client.get(f"/packets/{sample_packet.slug}/invitations/").content.decode()
    outcome = row_of(html, late.invitation_id).split('class="outcome"')[1].split("</td>")[0]
    assert 'data-late-minutes="2"' in outcome and "late by 2 min, within grace" in outcome
    assert "late by" not in row_of(html, on_time.invitation_id)


def test_a_candidate_without_an_upload_says_so(recruiter_client, invitation, sample_packet):
    html = recruiter_client.get(f"/packets/{sample_packet.slug}/invitations/").content.decode()
    assert "no upload yet" in row_of(html, invitation.pk)


def test_the_board_costs_the_same_queries_for_many_candidates(
        recruiter_client, sample_packet, make_reviewer, django_assert_max_num_queries):
    ann = make_reviewer("ann")
    for i in range(3):
        score(make_submission(sample_packet, f"Few {i}"), ann, ALL_PASS)
    url = f"/packets/{sample_packet.slug}/invitations/"
    recruiter_client.get(url)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as few:
        recruiter_client.get(url)
    for i in range(12):
        score(make_submission(sample_packet, f"Many {i}"), ann, ALL_PASS)
    came_late(*Submission.objects.all()[:6])  # whether an upload is late is read without a query of its own
    with django_assert_max_num_queries(len(few)):
        recruiter_client.get(url)


def test_the_poll_returns_the_rows_alone(recruiter_client, invitation, sample_packet):
    response = recruiter_client.get(f"/packets/{sample_packet.slug}/invitations/", headers={"HX-Request": "true"})
    assert b"<html" not in response.content and b'id="invitation-rows"' in response.content
    assert b"Save decision" in response.content


def test_the_clock_column_says_invited_started_and_deadline(recruiter_client, invitation, sample_packet):
    from sessions_app.actions import do_start_session

    board = f"/packets/{sample_packet.slug}/invitations/"
    cell = recruiter_client.get(board).content.decode().split('class="when"')[1].split("</td>")[0]
    assert "data-invited" in cell and "data-started" not in cell and "not started yet" in cell
    do_start_session(invitation)
    cell = recruiter_client.get(board).content.decode().split('class="when"')[1].split("</td>")[0]
    assert "data-invited" in cell and "data-started" in cell and "data-deadline" in cell


def board_pages(client, url: str) -> list[list[int]]:
    """Every page of the board, newest first, followed by its Older links: the invitation ids of each."""
    import re

    pages, address = [], url
    while True:
        html = client.get(address).content.decode()
        pages.append([int(pk) for pk in re.findall(r'<tr data-invitation="(\d+)"', html)])
        older = re.search(r'<a href="([^"]*)" rel="next">', html)
        if not older:
            return pages
        address = url + older.group(1).replace("&amp;", "&")


def many_invitations(sample_packet, n: int) -> list:
    """n invitations, a minute apart, oldest first."""
    from datetime import timedelta

    from django.utils import timezone

    from takehome.tests.factories import InvitationFactory

    start = timezone.now() - timedelta(days=1)
    return [InvitationFactory(packet_version=sample_packet.latest_version(), created_at=start + timedelta(minutes=i))
            for i in range(n)]


def test_the_board_is_paged_and_every_candidate_is_on_exactly_one_page(recruiter_client, sample_packet):
    from takehome.views import BOARD_PAGE_SIZE

    invitations = many_invitations(sample_packet, BOARD_PAGE_SIZE + 7)
    pages = board_pages(recruiter_client, f"/packets/{sample_packet.slug}/invitations/")
    assert [len(p) for p in pages] == [BOARD_PAGE_SIZE, 7]
    assert sum(pages, []) == [inv.pk for inv in reversed(invitations)]  # newest first, none twice
    html = recruiter_client.get(f"/packets/{sample_packet.slug}/invitations/").content.decode()
    assert f"{BOARD_PAGE_SIZE + 7} candidates" in html


def test_a_later_page_polls_itself_and_the_first_polls_for_new_invitations(recruiter_client, sample_packet):
    from takehome.views import BOARD_PAGE_SIZE

    invitations = many_invitations(sample_packet, BOARD_PAGE_SIZE + 1)
    board = f"/packets/{sample_packet.slug}/invitations/"
    first = recruiter_client.get(board).content.decode()
    assert f'hx-get="{board}"' in first
    second_page = f"{board}?after={invitations[1].pk}"
    second = recruiter_client.get(second_page, headers={"HX-Request": "true"}).content.decode()
    assert f'hx-get="{second_page}"' in second and f'data-invitation="{invitations[0].pk}"' in second


def test_acting_on_a_row_of_a_later_page_comes_back_to_that_row(recruiter_client, sample_packet):
    from takehome.views import BOARD_PAGE_SIZE

    invitations = many_invitations(sample_packet, BOARD_PAGE_SIZE + 5)
    board = f"/packets/{sample_packet.slug}/invitations/"
    oldest, newest = invitations[0], invitations[-1]
    response = recruiter_client.post(f"/packets/invitations/{oldest.pk}/decide", {"outcome": "advance", "note": ""})
    assert response.status_code == 302 and response["Location"] == f"{board}?after={invitations[1].pk}#invitation-{oldest.pk}"
    assert f'data-invitation="{oldest.pk}"' in recruiter_client.get(response["Location"]).content.decode()
    response = recruiter_client.post(f"/packets/invitations/{newest.pk}/decide", {"outcome": "advance", "note": ""})
    assert response["Location"] == f"{board}#invitation-{newest.pk}"  # on the first page: the first page


def test_the_first_pages_poll_brings_its_pager_along_so_no_row_is_skipped(recruiter_client, sample_packet):
    from takehome.views import BOARD_PAGE_SIZE

    invitations = many_invitations(sample_packet, BOARD_PAGE_SIZE + 3)
    board = f"/packets/{sample_packet.slug}/invitations/"
    assert f'after={invitations[3].pk}" rel="next"' in recruiter_client.get(board).content.decode()
    from django.utils import timezone

    from takehome.models import Invitation

    newer = many_invitations(sample_packet, 2)  # two invitations arrive while the page is open
    Invitation.objects.filter(pk__in=[i.pk for i in newer]).update(created_at=timezone.now())
    poll = recruiter_client.get(board, headers={"HX-Request": "true"}).content.decode()
    assert f'after={invitations[5].pk}" rel="next"' in poll  # the rows pushed off the page come next
