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


def test_the_server_times_on_the_review_page_are_wrapped(client, sample_packet, reviewer):
    from grading.tests.test_review_detail import witnessed_evidence

    submission = make_submission(sample_packet, "Ada", evidence=witnessed_evidence())
    client.force_login(reviewer)
    html = client.get(f"/review/{submission.pk}/").content.decode()
    receipts = html.split('class="list compact receipt-list"')[1].split("</table>")[0]
    assert ('<td class="mono"><time datetime="2026-11-30T14:07:00+00:00" data-format="Y-m-d H:i:s">'
            "2026-11-30 14:07:00</time></td>") in receipts
    red = html.split('<ul class="receipts">')[1].split("</ul>")[0]
    assert ('<li data-receipt="11"><time datetime="2026-11-30T14:01:00+00:00" data-format="Y-m-d H:i:s T">'
            "2026-11-30 14:01:00 UTC</time>: red accepted") in red
    events = html.split('<details class="events">')[1].split("</details>")[0]
    # A server's time (with its zone) is wrapped as written; a zip's DOS time has no zone and stays as it is.
    assert ('<td><time datetime="2026-11-30T14:01:00+00:00" data-format="Y-m-d H:i:s">2026-11-30T14:01:00+00:00'
            "</time></td><td>server receipt</td>") in events
    assert "<td>2026-11-30T14:08:48</td><td>zip DOS time (zone unknown)</td>" in events


def test_a_model_exchanges_time_says_its_zone_inside_the_time_element(client, sample_packet, reviewer):
    """The local time is added right after <time>: a zone written after it would read as the local time's."""
    from grading.tests.test_review_model import ask, evidence_with

    submission = make_submission(sample_packet, "Ada", evidence=evidence_with(ask(9, "Why?", "Because.")))
    client.force_login(reviewer)
    summary = client.get(f"/review/{submission.pk}/").content.decode().split('data-exchange="1" open>')[1]
    assert summary.split("</summary>")[0].startswith(
        '\n  <summary>Exchange 1 <span data-turn>(Conversation 1, turn 1)</span>: <time datetime="2026-11-30T14:09:00+00:00" data-format="Y-m-d H:i:s T">'
        "2026-11-30 14:09:00 UTC</time> · qwen2.5-coder")


@pytest.mark.parametrize("text, shown", [
    ("2026-11-30T14:08:49.897405+00:00",
     '<time datetime="2026-11-30T14:08:49+00:00" data-format="Y-m-d H:i:s">2026-11-30T14:08:49.897405+00:00</time>'),
    ("2026-11-30T15:08:49+01:00",
     '<time datetime="2026-11-30T14:08:49+00:00" data-format="Y-m-d H:i:s">2026-11-30T15:08:49+01:00</time>'),
    ("2026-11-30T14:08:48", "2026-11-30T14:08:48"),  # no zone: nobody's local time
    ("<b>not a time</b>", "&lt;b&gt;not a time&lt;/b&gt;"),
    ("—", "—"),
])
def test_a_time_kept_as_text_is_wrapped_only_when_it_has_a_zone(text, shown):
    html = Template("{% load takehome_tags %}{{ t|server_time }}").render(Context({"t": text}))
    assert html == shown


def test_the_banner_after_start_wraps_the_deadline(client, sample_packet):
    from takehome.tests.factories import InvitationFactory

    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    token = invitation.raw_token
    for said in ("Your clock is running", "Your clock was already started"):
        html = client.post(f"/t/{token}/start", {"confirm": "yes"}, follow=True).content.decode()
        banner = html.split('<ul class="messages">')[1].split("</ul>")[0]
        assert said in banner
        assert [fmt for _, fmt, _ in TIME.findall(banner)] == ["H:i T"] * (1 if said.endswith("running") else 2)
        assert "UTC" not in TIME.sub("", banner)  # every time says its zone inside its <time>


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/Sao_Paulo"])
@pytest.mark.parametrize("fmt", ["Y-m-d H:i", "Y-m-d H:i T", "Y-m-d H:i:s T", "Y-m-d H:i:s", "H:i", "D j M Y"])
def test_the_server_side_text_is_djangos_own_format_whatever_the_zone(zone, fmt):
    from datetime import UTC, datetime

    from django.template.defaultfilters import date as date_filter
    from django.utils import timezone

    from takehome.templatetags.takehome_tags import utc_time

    for when in (datetime(2026, 1, 15, 23, 59, 58, tzinfo=UTC), datetime(2026, 7, 1, 0, 0, 1, tzinfo=UTC)):
        with timezone.override(zone):
            assert f">{date_filter(timezone.localtime(when), fmt)}</time>" in utc_time(when, fmt)
