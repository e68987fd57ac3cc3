"""A recruiter in headless Chromium finds a person across packets as they type, opens their page, and goes from
an invitation there to its row on the board."""

import pytest

from conftest import log_in, screenshot
from grading.tests.reviewing import make_submission, score
from takehome.tests.factories import CandidateFactory, InvitationFactory, make_packet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_find_a_person_and_follow_an_invitation_to_the_board(live_server, page, recruiter, sample_packet,
                                                             make_reviewer):
    ada = make_submission(sample_packet, "Ada Lovelace")
    score(ada, make_reviewer("rob"), dict(red_log=True, model_waited=True, refusal_specific=False,
                                          test_names_bug=True))
    tiny = make_packet("tiny", "Tiny packet")
    on_tiny = InvitationFactory(candidate=ada.invitation.candidate, packet_version=tiny.latest_version())
    for name in ("Alan Turing", "Grace Hopper"):
        InvitationFactory(candidate=CandidateFactory(name=name), packet_version=sample_packet.latest_version())

    log_in(page, live_server.url, "rita")
    page.get_by_role("link", name="Candidates", exact=True).click()
    page.wait_for_url("**/candidates/")
    assert page.locator("tr[data-candidate]").count() == 3
    before = page.evaluate("performance.timeOrigin")  # changes with each page load
    page.fill("#id_q", "lovel")
    page.wait_for_url("**/candidates/?q=lovel")  # the address follows the search, without a page load
    page.locator("tr[data-candidate]").first.wait_for()
    assert page.evaluate("performance.timeOrigin") == before
    assert page.locator("tr[data-candidate]").count() == 1
    row = page.locator("tr[data-candidate]").inner_text()
    assert "Refunds in the invoice total" in row and "Tiny packet" in row
    screenshot(page, "recruiter-candidates")

    page.get_by_role("link", name="Ada Lovelace").click()
    page.locator(f'tr[data-invitation="{ada.invitation_id}"]').wait_for()
    assert page.locator("tr[data-invitation]").count() == 2
    assert "1 review submitted" in page.locator(f'tr[data-invitation="{ada.invitation_id}"]').inner_text()
    screenshot(page, "recruiter-candidate-page")

    page.locator(f'tr[data-invitation="{on_tiny.pk}"]').get_by_role("link", name="On the board").click()
    page.wait_for_url(f"**/packets/tiny/invitations/#invitation-{on_tiny.pk}")
    page.locator(f"#invitation-{on_tiny.pk}").wait_for()
