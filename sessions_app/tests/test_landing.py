"""GET /t/<token>/: the candidate's page."""

import re

import pytest

from sessions_app.models import Submission
from takehome.actions import do_create_version, do_revoke_invitation
from takehome.models import Invitation
from takehome.tests.factories import InvitationFactory, make_packet

from .conftest import url

pytestmark = pytest.mark.django_db


def test_it_shows_title_prompt_time_limit_and_the_rules(client, invitation):
    r = client.get(url("landing", invitation))
    assert r.status_code == 200
    html = r.content.decode()
    assert "Refunds in the invoice total" in html
    assert "90 minutes" in html
    assert "Red means the test runner printed FAILED" in html
    assert "<strong>" in html  # markdown rendered
    assert 'id="start-button"' in html
    assert "Download the project" not in html  # only once the clock runs


def test_it_marks_the_invitation_opened_once(client, invitation):
    client.get(url("landing", invitation))
    first = Invitation.objects.get(pk=invitation.pk).opened_at
    client.get(url("landing", invitation))
    assert first is not None
    assert Invitation.objects.get(pk=invitation.pk).opened_at == first
    assert Invitation.objects.get(pk=invitation.pk).status == "opened"


def test_the_prompt_is_sanitised(client):
    version = make_packet(prompt="Hi <script>alert(1)</script> [x](javascript:alert(2))").latest_version()
    inv = InvitationFactory(packet_version=version)
    html = client.get(url("landing", inv)).content.decode()
    assert "<script>alert(1)" not in html
    assert "javascript:alert" not in html


@pytest.mark.parametrize("token", ["nope", "x" * 48, "a" * 300])
def test_unknown_tokens_get_the_not_valid_page(client, invitation, token):
    r = client.get(f"/t/{token}/")
    assert r.status_code == 404
    assert "This link is not valid" in r.content.decode()


def test_a_revoked_link_is_not_valid(client, invitation):
    do_revoke_invitation(invitation)
    r = client.get(url("landing", invitation))
    assert r.status_code == 404
    assert "This link is not valid" in r.content.decode()
    assert Invitation.objects.get(pk=invitation.pk).opened_at is None


def test_lookups_are_rate_limited_per_address(client, invitation, settings, held_minute):
    settings.TOKEN_LOOKUPS_PER_MINUTE = 3
    for _ in range(3):
        assert client.get("/t/guess/").status_code == 404
    r = client.get(url("landing", invitation))  # even the right token waits: no oracle for a guesser
    assert r.status_code == 429
    assert "Too many requests" in r.content.decode()
    assert 1 <= int(r["Retry-After"]) <= 60
    gate = client.get(url("status", invitation), headers={"X-Takehome-Client": "gate"})
    assert gate.status_code == 429 and 1 <= int(gate["Retry-After"]) <= 60
    other = client.get(url("landing", invitation), REMOTE_ADDR="10.0.0.9")
    assert other.status_code == 200


def test_requests_on_valid_links_never_count_against_the_address(client, sample_packet, settings, held_minute):
    """Forty candidates behind one office address: their own links are never refused."""
    settings.TOKEN_LOOKUPS_PER_MINUTE = 3
    invitations = [InvitationFactory(packet_version=sample_packet.latest_version()) for _ in range(4)]
    for invitation in invitations * 3:
        assert client.get(url("landing", invitation)).status_code == 200
        assert client.get(url("status", invitation), headers={"X-Takehome-Client": "gate"}).status_code == 200
    assert client.get("/t/guess/").status_code == 404  # and guessing still counts from zero


def test_revoked_links_count_as_misses(client, sample_packet, settings, held_minute):
    settings.TOKEN_LOOKUPS_PER_MINUTE = 2
    revoked, live = (InvitationFactory(packet_version=sample_packet.latest_version()) for _ in range(2))
    do_revoke_invitation(revoked)
    assert [client.get(url("landing", revoked)).status_code for _ in range(2)] == [404, 404]
    assert client.get(url("landing", live)).status_code == 429


def test_after_start_it_shows_the_countdown_next_steps_and_upload_form(client, started, settings):
    settings.UPLOAD_MAX_BYTES = 5 * 1024 * 1024
    html = client.get(url("landing", started)).content.decode()
    assert 'id="countdown"' in html
    assert 'id="next-steps"' in html
    assert url("download", started) in html
    assert 'id="upload-form"' in html and 'name="archive"' in html
    assert "at most <strong>5 MB</strong>" in html
    assert 'data-seconds-left="' in html


def test_the_upload_list_partial_is_a_fragment_and_never_polls(client, started, media_root):
    Submission.objects.create(invitation=started, archive="uploads/aa/x.zip", sha256="a" * 64, size=10,
                              original_name="<b>mine</b>.zip")
    r = client.get(url("landing", started), headers={"HX-Request": "true"})
    html = r.content.decode()
    assert r.status_code == 200
    assert "<html" not in html
    assert html.strip().startswith('<section class="card" id="upload-list"')
    assert "hx-trigger" not in html  # why: nothing on it moves with grading (docs/evidence.md)
    assert "&lt;b&gt;mine&lt;/b&gt;.zip" in html and "<b>mine</b>" not in html


@pytest.mark.parametrize("status", ["grading", "graded", "superseded", "error", "rejected"])
def test_the_upload_list_is_the_same_whatever_grading_did(client, started, status):
    upload = Submission.objects.create(invitation=started, archive="uploads/aa/x.zip", sha256="a" * 64, size=10)
    before = client.get(url("landing", started), headers={"HX-Request": "true"}).content.decode()
    Submission.objects.filter(pk=upload.pk).update(status=status, is_latest=status not in Submission.REFUSED,
                                                   reject_reason="the worker's words")
    after = client.get(url("landing", started), headers={"HX-Request": "true"}).content.decode()
    assert after == before and "received, will be reviewed" in after and "hx-trigger" not in after



def test_the_invitation_keeps_its_version_after_the_packet_changes(client, invitation, sample_packet):
    from takehome.actions import sample_content

    content = sample_content()[2]
    do_create_version(sample_packet, content.__class__(**{**content.__dict__, "time_limit_minutes": 5}))
    assert "90 minutes" in client.get(url("landing", invitation)).content.decode()
    assert "5 minutes" not in client.get(url("landing", invitation)).content.decode()


def test_once_uploads_close_the_page_stops_offering_the_download_and_the_steps(client, started, settings):
    from datetime import timedelta

    from django.utils import timezone

    settings.UPLOAD_GRACE_S = 300
    Invitation.objects.filter(pk=started.pk).update(deadline=timezone.now() - timedelta(seconds=301))
    html = client.get(url("landing", started)).content.decode()
    assert 'id="next-steps"' in html and "Time is up: there is nothing left to do" in html
    assert "Download the project" not in html and "upload it below" not in html


def test_the_clock_knows_when_uploads_close_and_the_uploads_table_scrolls_on_a_phone(client, started):
    Submission.objects.create(invitation=started, sha256="a" * 64, size=10, original_name="work.zip",
                              archive="uploads/x.zip", status=Submission.Status.GRADED)
    html = client.get(url("landing", started)).content.decode()
    assert 'src="/static/sessions_app/session.js"' in html
    # The countdown's words when the deadline passes with the page open, for session.js to show: the
    # closing time in a <time>, so the candidate's local time is added beside it.
    passed = html.split('<template id="deadline-passed">')[1].split("</template>")[0]
    assert passed.startswith("The deadline has passed. Upload your zip now") and '<time datetime="' in passed
    listing = html.split('id="upload-list"')[1]
    assert listing.index('class="table-scroll"') < listing.index("<table")


def upload_row(invitation, minutes_ago: int, status: str, is_latest: bool = False, reason: str = "") -> Submission:
    from datetime import timedelta

    from django.utils import timezone

    return Submission.objects.create(
        invitation=invitation, archive=f"uploads/{minutes_ago}.zip", sha256=f"{minutes_ago:064d}", size=10,
        original_name=f"{minutes_ago}.zip", uploaded_at=timezone.now() - timedelta(minutes=minutes_ago),
        status=status, is_latest=is_latest, reject_reason=reason, unpack_refusal=reason)


def listing(client, invitation) -> str:
    return client.get(url("landing", invitation)).content.decode().split('id="upload-list"')[1]


def text_of(html: str) -> str:
    """The words of a piece of a page, its tags (a <time>, say) left out."""
    return re.sub(r"<[^>]+>", "", html)


def row(html: str, submission: Submission) -> str:
    return html.split(f'data-submission="{submission.pk}"')[1].split("</tr>")[0]


def test_the_page_says_which_upload_reviewers_see_when_a_later_one_was_refused(client, started):
    good = upload_row(started, 10, "graded", is_latest=True)
    bad = upload_row(started, 2, "rejected", reason="The archive holds a symbolic link (link); replace it")
    html = listing(client, started)
    note = text_of(html.split('id="reviewed-note"')[1].split("</p>")[0])
    assert f"Reviewers will see your upload received at {good.uploaded_at:%H:%M:%S}" in note
    assert f"Your later upload of {bad.uploaded_at:%H:%M:%S} was not accepted, so it does not replace it." in note
    assert "for review</span>" in row(html, good) and "for review</span>" not in row(html, bad)
    assert "not accepted" in row(html, bad) and "symbolic link" in row(html, bad)


def test_a_pending_upload_is_the_one_reviewed_and_its_grading_is_not_shown(client, started):
    upload_row(started, 10, "graded")
    pending = upload_row(started, 1, "queued", is_latest=True)
    note = text_of(listing(client, started).split('id="reviewed-note"')[1].split("</p>")[0])
    assert f"Reviewers will see your upload received at {pending.uploaded_at:%H:%M:%S}" in note
    assert "its results are not shown here" in note and "not accepted" not in note


def test_when_nothing_was_accepted_the_page_says_so(client, started):
    upload_row(started, 5, "rejected", reason="The archive holds a symbolic link")
    upload_row(started, 1, "rejected", is_latest=True, reason="The archive holds a symbolic link")
    note = listing(client, started).split('id="reviewed-note"')[1].split("</p>")[0]
    assert "None of your uploads has been accepted" in note and "upload again" in note


def test_a_superseded_upload_reads_as_received_and_replaced(client, started):
    old = upload_row(started, 5, "superseded")
    upload_row(started, 1, "graded", is_latest=True)
    status = row(listing(client, started), old)
    assert "received, replaced by a newer upload" in status and "graded" not in status


def test_the_upload_form_states_the_limits(client, started, settings):
    settings.UPLOAD_INTERVAL_S, settings.UPLOAD_MAX_COUNT = 10, 30
    form = client.get(url("landing", started)).content.decode().split('id="upload-form"')[1]
    assert "at most once every 10 seconds and 30 times in all" in form
    assert "latest <em>accepted</em> upload is the one reviewed" in form
