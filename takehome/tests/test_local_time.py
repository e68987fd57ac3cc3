"""Times: the UTC text in a <time datetime> element on every page that shows one; a static script adds local time."""

import re
from datetime import datetime, timedelta, timezone

import pytest
from django.template import Context, Template
from django.templatetags.static import static

from grading.tests.reviewing import make_submission
from sessions_app.actions import do_start_session

pytestmark = pytest.mark.django_db
TIME = re.compile(r'<time datetime="(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00)" data-format="([^"]+)">([^<]+)</time>')


def test_the_filter_keeps_the_utc_text_and_gives_the_exact_moment():
    moment = datetime(2024, 5, 1, 14, 3, 7, tzinfo=timezone(timedelta(hours=2)))
    html = Template('{% load takehome_tags %}{{ t|utc_time:"Y-m-d H:i T" }}|{{ none|utc_time }}').render(
        Context({"t": moment, "none": None}))
    assert html == '<time datetime="2024-05-01T12:03:07+00:00" data-format="Y-m-d H:i T">2024-05-01 12:03 UTC</time>|'


def test_every_page_loads_the_local_time_script_from_static(client):
    html = client.get("/accounts/login/").content.decode()
    assert f'<script src="{static("takehome/localtime.js")}" defer></script>' in html


def times_on(html: str) -> list[tuple[str, str, str]]:
    found = TIME.findall(html)
    assert found, "no <time> element on the page"
    # why: a time shown outside <time> gets no local rendering. The review page's timeline (an SVG
    # axis of the evidence's own times, compared with each other) is the one place left in UTC.
    rest = re.sub(r"<svg class=\"timeline\".*?</svg>", "", TIME.sub("", html), flags=re.S)
    assert not re.search(r">\s*\d{4}-\d\d-\d\d \d\d:\d\d", rest), "a bare time on the page"
    return found


def test_the_candidates_pages_wrap_their_times(client, sample_packet):
    submission = make_submission(sample_packet, "Ada", status="queued")
    invitation = submission.invitation
    token = invitation.link_token()
    assert any("T" in fmt for _, fmt, _ in times_on(client.get(f"/t/{token}/start").content.decode()))
    do_start_session(invitation)
    times_on(client.get(f"/t/{token}/").content.decode())
    times_on(client.get(f"/t/{token}/uploads/{submission.pk}").content.decode())


def test_the_reviewers_and_recruiters_pages_wrap_their_times(client, sample_packet, reviewer, recruiter):
    submission = make_submission(sample_packet, "Ada")
    do_start_session(submission.invitation)
    client.force_login(reviewer)
    times_on(client.get("/review/").content.decode())
    times_on(client.get(f"/review/{submission.pk}/").content.decode())
    times_on(client.get(f"/review/debrief/{sample_packet.slug}/").content.decode())
    client.force_login(recruiter)
    times_on(client.get(f"/packets/{sample_packet.slug}/invitations/").content.decode())


def test_the_server_times_of_the_receipts_on_the_review_page_are_wrapped(client, sample_packet, reviewer):
    from grading.tests.test_review_detail import witnessed_evidence

    submission = make_submission(sample_packet, "Ada", evidence=witnessed_evidence())
    client.force_login(reviewer)
    html = client.get(f"/review/{submission.pk}/").content.decode()
    receipts = html.split('class="list compact receipt-list"')[1].split("</table>")[0]
    assert ('<td class="mono"><time datetime="2026-11-30T14:07:00+00:00" data-format="Y-m-d H:i:s">'
            "2026-11-30 14:07:00</time></td>") in receipts
