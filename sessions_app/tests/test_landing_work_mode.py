"""The candidate's page after Start, per the packet's work mode (step 10): zip, hosted or both."""

import pytest
from django.urls import reverse

from sessions_app.actions import do_start_session
from takehome.tests.factories import InvitationFactory, make_packet

from .conftest import url

pytestmark = pytest.mark.django_db


def page_for(client, mode: str, start: bool = True) -> str:
    invitation = InvitationFactory(packet_version=make_packet(work_mode=mode).latest_version())
    if start:
        do_start_session(invitation)
    response = client.get(url("landing", invitation))
    assert response.status_code == 200
    return response.content.decode()


def workspace_href(html: str) -> str:
    return html.split('id="workspace-link"')[0].rsplit('href="', 1)[1].split('"')[0]


def test_zip_is_todays_page_with_no_workspace(client):
    html = page_for(client, "zip")
    assert 'id="download-link"' in html and 'id="upload-form"' in html
    assert 'id="workspace-link"' not in html and 'id="work-ways"' not in html
    assert "gate.py</code> enforces this order" in html and "hosted workspace" not in html


def test_hosted_offers_only_the_workspace(client):
    invitation = InvitationFactory(packet_version=make_packet(work_mode="hosted").latest_version())
    do_start_session(invitation)
    html = client.get(url("landing", invitation)).content.decode()
    assert "Open your workspace" in html
    assert workspace_href(html) == reverse("sessions_app:workspace", kwargs={"token": invitation.raw_token})
    # nothing to download, nothing to upload: the workspace is where the work is done and submitted
    assert 'id="download-link"' not in html and 'id="upload-form"' not in html and "gate.py" not in html
    assert "Nothing to install" in html


def test_both_puts_the_two_ways_side_by_side_each_with_what_it_means(client):
    html = page_for(client, "both")
    hosted = html.split('id="way-hosted"')[1].split('id="way-zip"')[0]
    zip_way = html.split('id="way-zip"')[1]
    assert "Open your workspace" in hosted and "Nothing to install" in hosted
    assert "the server runs the tests itself" in hosted.lower()
    assert "Download the project" in zip_way and "gate.py" in zip_way and "upload" in zip_way
    assert 'id="upload-form"' in html  # the zip way still uploads here


@pytest.mark.parametrize("mode", ["zip", "hosted", "both"])
def test_before_start_no_way_is_open(client, mode):
    html = page_for(client, mode, start=False)
    assert 'id="workspace-link"' not in html and 'id="download-link"' not in html


@pytest.mark.parametrize("mode, words", [
    ("zip", "The project download is ready once it runs."),
    ("hosted", "Your workspace opens once it runs."),
    ("both", "The project download, or a workspace in your browser, is ready once it runs."),
])
def test_the_start_confirmation_says_what_opens(client, mode, words):
    invitation = InvitationFactory(packet_version=make_packet(work_mode=mode).latest_version())
    assert words in client.get(url("start", invitation)).content.decode()


@pytest.mark.parametrize("mode, words", [("zip", "Upload your work before then"),
                                         ("hosted", "Submit your work from your workspace before then")])
def test_a_resent_link_after_start_says_how_the_work_is_handed_in(mailoutbox, mode, words):
    from takehome.actions import do_send_invitation

    invitation = InvitationFactory(packet_version=make_packet(work_mode=mode).latest_version())
    do_start_session(invitation)
    do_send_invitation(invitation)
    assert words in mailoutbox[-1].body


def test_the_sample_packets_page_offers_both(client, sample_packet):
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    html = client.get(url("landing", invitation)).content.decode()
    assert 'id="way-hosted"' in html and 'id="way-zip"' in html


@pytest.mark.parametrize("mode, words, not_said", [
    ("zip", "Download the project below.", "workspace"),
    ("hosted", "Open your workspace below.", "Download"),
    ("both", "Choose below: open a workspace in your browser, or download the project.", "Download the project below"),
])
def test_the_banner_after_start_names_the_ways_the_packet_offers(client, mode, words, not_said):
    invitation = InvitationFactory(packet_version=make_packet(work_mode=mode).latest_version())
    response = client.post(url("start", invitation), {"confirm": "yes"}, follow=True)
    banner = response.content.decode().split("Your clock is running")[1].split("</li>")[0]
    assert words in banner and not_said not in banner
