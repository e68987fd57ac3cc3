"""Candidates across packets: the search by name or email, and one person's page with every invitation."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from grading.tests.reviewing import make_submission, score
from takehome import pages
from takehome.actions import do_decide, do_revoke_invitation
from takehome.models import Candidate

from .factories import CandidateFactory, InvitationFactory, make_packet

pytestmark = pytest.mark.django_db

SEARCH = reverse("candidates:search")
ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


def listed(html: str) -> list[str]:
    """The names the search lists, in order."""
    return re.findall(r'<a href="/candidates/\d+/">([^<]+)</a>', html)


@pytest.fixture
def two_packets(sample_packet):
    return sample_packet, make_packet("tiny", "Tiny packet")


def invite(packet, name, email):
    candidate = Candidate.objects.filter(email=email).first() or CandidateFactory(name=name, email=email)
    return InvitationFactory(candidate=candidate, packet_version=packet.latest_version())


@pytest.mark.parametrize("text, expected", [
    ("ada", ["Ada Lovelace"]),
    ("LOVELACE", ["Ada Lovelace"]),
    ("turing@example", ["Alan Turing"]),  # the email
    ("example.com", ["Ada Lovelace", "Alan Turing", "Grace Hopper"]),
    ("a lovelace", ["Ada Lovelace"]),  # every word must match, in the name or the email
    ("hopper navy", []),
    ("", ["Ada Lovelace", "Alan Turing", "Grace Hopper"]),  # nothing typed: everyone, by name
])
def test_the_search_finds_people_by_name_or_email_across_packets(recruiter_client, two_packets, text, expected):
    refunds, tiny = two_packets
    invite(refunds, "Grace Hopper", "grace@example.com")
    invite(refunds, "Ada Lovelace", "ada@example.com")
    invite(tiny, "Ada Lovelace", "ada@example.com")
    invite(tiny, "Alan Turing", "turing@example.com")
    html = recruiter_client.get(SEARCH, {"q": text}).content.decode()
    assert listed(html) == expected
    if not expected:
        assert f"Nobody's name or email holds “{text}”" in html


def test_each_person_in_the_search_shows_their_invitations(recruiter_client, two_packets):
    refunds, tiny = two_packets
    invite(refunds, "Ada Lovelace", "ada@example.com")
    invite(tiny, "Ada Lovelace", "ada@example.com")
    html = recruiter_client.get(SEARCH, {"q": "ada"}).content.decode()
    row = html.split('data-candidate="')[1].split("</tr>")[0]
    assert "Refunds in the invoice total" in row and "Tiny packet" in row and row.count("<li>") == 2


def test_the_search_is_paged_by_name_and_keeps_the_words(recruiter_client, sample_packet):
    for n in range(pages.CANDIDATE_PAGE_SIZE + 3):
        invite(sample_packet, f"Person {n:02d}", f"p{n}@example.com")
    invite(sample_packet, "Someone Else", "else@example.org")
    first = recruiter_client.get(SEARCH, {"q": "person"}).content.decode()
    assert listed(first) == [f"Person {n:02d}" for n in range(25)]
    assert "28 candidates" in first
    after = re.search(r'href="\?(q=person&amp;after=\d+)" rel="next"', first).group(1).replace("&amp;", "&")
    second = recruiter_client.get(SEARCH + "?" + after).content.decode()
    assert listed(second) == ["Person 25", "Person 26", "Person 27"]


def test_the_search_answers_htmx_with_its_results_alone(recruiter_client, sample_packet):
    invite(sample_packet, "Ada Lovelace", "ada@example.com")
    partial = recruiter_client.get(SEARCH, {"q": "ada"}, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in partial and partial.lstrip().startswith('<div id="candidate-results">')
    assert listed(partial) == ["Ada Lovelace"]
    full = recruiter_client.get(SEARCH, {"q": "ada"}).content.decode()
    assert "<html" in full and 'id="candidate-results"' in full and 'value="ada"' in full


def test_the_search_costs_the_same_queries_for_many_people(recruiter_client, two_packets):
    refunds, tiny = two_packets

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert recruiter_client.get(SEARCH).status_code == 200
        return len(captured)

    invite(refunds, "Ada Lovelace", "ada@example.com")
    few = queries()
    for n in range(12):
        invite(refunds, f"Person {n}", f"p{n}@example.com")
        invite(tiny, f"Person {n}", f"p{n}@example.com")
    assert queries() == few


def test_a_persons_page_lists_every_invitation_with_its_outcome_and_links(
        recruiter_client, two_packets, make_reviewer, recruiter):
    refunds, tiny = two_packets
    refunds.hide_candidate_names = True  # hidden from reviewers, not from the recruiter
    refunds.save()
    submission = make_submission(refunds, name="Ada Lovelace")
    ada = submission.invitation.candidate
    score(submission, make_reviewer("rob"), ALL_PASS)
    do_decide(submission.invitation, "advance", "Strong red log.", recruiter)
    revoked = invite(tiny, ada.name, ada.email)
    do_revoke_invitation(revoked, recruiter)
    invite(tiny, "Someone Else", "else@example.com")

    response = recruiter_client.get(reverse("candidates:detail", args=[ada.pk]))
    html = response.content.decode()
    assert response.status_code == 200 and "Ada Lovelace" in html and ada.email in html
    assert html.count('data-invitation="') == 2 and "Someone Else" not in html
    graded = html.split(f'data-invitation="{submission.invitation_id}"')[1].split("</tr>")[0]
    assert "Refunds in the invoice total" in graded and "v1" in graded
    assert 'data-grading="graded"' in graded and "1 review submitted" in graded
    assert 'data-decision="advance"' in graded and "Strong red log." in graded
    assert reverse("grading:review-detail", args=[submission.pk]) in graded
    assert reverse("grading:debrief-detail", args=[refunds.slug]) in graded
    gone = html.split(f'data-invitation="{revoked.pk}"')[1].split("</tr>")[0]
    assert "Tiny packet" in gone and "status-revoked" in gone and "data-revoked" in gone
    assert "no upload yet" in gone and "Review page" not in gone
    # newest first
    assert html.index(f'data-invitation="{revoked.pk}"') < html.index(f'data-invitation="{submission.invitation_id}"')

    board = recruiter_client.get(reverse("takehome:invitation-on-board", args=[revoked.pk]))
    assert board.status_code == 302
    assert board["Location"] == f"/packets/tiny/invitations/#invitation-{revoked.pk}"


def test_a_persons_invitations_are_paged(recruiter_client, monkeypatch):
    monkeypatch.setattr(pages, "PERSON_PAGE_SIZE", 2)
    invitations = [invite(make_packet(f"p{n}", f"Packet {n}"), "Ada Lovelace", "ada@example.com") for n in range(3)]
    url = reverse("candidates:detail", args=[invitations[0].candidate_id])
    first = recruiter_client.get(url).content.decode()
    assert re.findall(r'data-invitation="(\d+)"', first) == [str(invitations[2].pk), str(invitations[1].pk)]
    assert "3 invitations" in first
    second = recruiter_client.get(url, {"after": invitations[1].pk}).content.decode()
    assert re.findall(r'data-invitation="(\d+)"', second) == [str(invitations[0].pk)]


def test_the_board_and_the_navigation_lead_to_the_search_and_the_person(recruiter_client, sample_packet):
    invitation = invite(sample_packet, "Ada Lovelace", "ada@example.com")
    board = recruiter_client.get(reverse("takehome:invitation-board", args=[sample_packet.slug])).content.decode()
    assert f'<a href="/candidates/{invitation.candidate_id}/"' in board
    assert f'href="{SEARCH}">Candidates</a>' in board


def test_reviewers_get_neither_the_search_nor_a_persons_page(client, reviewer, sample_packet):
    ada = invite(sample_packet, "Ada Lovelace", "ada@example.com").candidate
    client.force_login(reviewer)
    assert client.get(SEARCH, {"q": "ada"}).status_code == 403
    assert client.get(reverse("candidates:detail", args=[ada.pk])).status_code == 403
    assert f'href="{SEARCH}"' not in client.get(reverse("grading:queue")).content.decode()


def test_a_person_who_does_not_exist_is_a_404_and_anonymous_visitors_log_in(recruiter_client, client):
    assert recruiter_client.get(reverse("candidates:detail", args=[999])).status_code == 404
    client.logout()
    assert client.get(SEARCH)["Location"].startswith("/accounts/login/")
