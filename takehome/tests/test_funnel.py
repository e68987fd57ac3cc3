"""The packet's funnel and time distributions: counted by the database, drawn as SVG with the numbers beside."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from grading.tests.reviewing import make_submission, score
from sessions_app.models import GateReceipt, ModelExchange, Submission
from takehome import charts
from takehome.actions import do_decide
from takehome.models import FunnelTally, Invitation
from takehome.pages import funnel
from takehome.tests.factories import InvitationFactory, make_packet

ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


# --- pure geometry ---------------------------------------------------------------------------


@pytest.mark.parametrize("edges, at_most, total, expected", [
    ((5, 10), [2, 5], 6, [("≤5", 2), ("5–10", 3), (">10", 1)]),
    ((5, 10), [0, 0], 0, [("≤5", 0), ("5–10", 0), (">10", 0)]),
    ((5, 10), [3, 3], 3, [("≤5", 3), ("5–10", 0), (">10", 0)]),
])
def test_buckets_are_the_differences_of_cumulative_counts(edges, at_most, total, expected):
    assert charts.buckets(edges, at_most, total) == expected


def test_the_funnel_bars_scale_to_the_first_step():
    chart = charts.funnel_chart([("invited", "Invited", 10), ("opened", "Opened", 5), ("decided", "Decided", 0)])
    widths = [bar.w for bar in chart.bars]
    assert widths == [charts.BAR_AREA_W, charts.BAR_AREA_W / 2, 0]
    assert [bar.percent for bar in chart.bars] == [100, 50, 0]
    assert all(bar.y + bar.h <= chart.height for bar in chart.bars)


def test_an_empty_funnel_and_histogram_draw_no_bar():
    assert all(bar.w == 0 for bar in charts.funnel_chart([("invited", "Invited", 0)]).bars)
    chart = charts.histogram([("≤5", 0), (">5", 0)])
    assert chart.total == 0 and all(bar.h == 0 for bar in chart.bars)


def test_the_tallest_histogram_bar_fills_the_plot_and_stays_inside():
    chart = charts.histogram([("a", 1), ("b", 4), ("c", 2)])
    tallest = max(chart.bars, key=lambda b: b.h)
    assert tallest.label == "b" and tallest.y == charts.HIST_TOP
    assert all(b.y + b.h == pytest.approx(chart.axis_y) and b.x + b.w <= chart.width for b in chart.bars)


# --- the counts ------------------------------------------------------------------------------


def journey(packet, red_after=None, upload_after=None, opened=True):
    """An invitation that went as far as told; times in minutes after Start."""
    now = timezone.now()
    start = now - timedelta(hours=3)
    invitation = InvitationFactory(packet_version=packet.latest_version(), opened_at=start if opened else None,
                                   started_at=start if opened else None)
    if red_after is not None:
        GateReceipt.objects.create(invitation=invitation, step="red", accepted=False,
                                   received_at=start + timedelta(minutes=red_after / 2))  # refused: not counted
        GateReceipt.objects.create(invitation=invitation, step="red", received_at=start + timedelta(minutes=red_after))
    if upload_after is not None:
        Invitation.objects.filter(pk=invitation.pk).update(submitted_at=start + timedelta(minutes=upload_after))
    return invitation


@pytest.mark.django_db
def test_the_funnel_counts_each_step(sample_packet, make_reviewer, recruiter):
    journey(sample_packet, opened=False)
    journey(sample_packet)  # opened and started, nothing more
    journey(sample_packet, red_after=3)
    journey(sample_packet, red_after=12, upload_after=50)
    graded = make_submission(sample_packet, "Graded One")
    Invitation.objects.filter(pk=graded.invitation_id).update(
        opened_at=timezone.now() - timedelta(minutes=100), started_at=timezone.now() - timedelta(minutes=100),
        submitted_at=timezone.now())
    score(graded, make_reviewer("ann"), ALL_PASS)
    do_decide(graded.invitation, "advance", "", recruiter)
    make_submission(sample_packet, "Still Grading", status=Submission.Status.GRADING)
    undecided = make_submission(sample_packet, "Undecided")
    do_decide(undecided.invitation, "undecided", "", recruiter)

    result = funnel(sample_packet)

    assert {key: count for key, _, count in result["steps"]} == {
        "invited": 7, "opened": 4, "started": 4, "red": 2, "submitted": 2, "graded": 2, "reviewed": 1, "decided": 1}
    times = {name: chart for name, _, chart, _ in result["times"]}
    assert [(b.label, b.count) for b in times["time-to-red"].bars if b.count] == [("≤5", 1), ("10–15", 1)]
    assert [(b.label, b.count) for b in times["time-on-task"].bars if b.count] == [("45–60", 1), ("90–120", 1)]


@pytest.mark.django_db
def test_a_first_count_costs_the_same_queries_whatever_the_number_of_candidates(sample_packet):
    # A packet's first count (then kept as its tally, takehome.funnel) reads its rows with grouped queries.
    for i in range(3):
        journey(sample_packet, red_after=i, upload_after=30 + i)
    with CaptureQueriesContext(connection) as few:
        funnel(sample_packet)
    for i in range(20):
        journey(sample_packet, red_after=i, upload_after=30 + i)
    FunnelTally.objects.all().delete()
    with CaptureQueriesContext(connection) as many:
        assert funnel(sample_packet)["invited"] == 23
    assert len(few) == len(many)


@pytest.mark.django_db
def test_the_packet_page_draws_accessible_charts_with_the_numbers(recruiter_client, sample_packet):
    journey(sample_packet, red_after=7, upload_after=40)
    html = recruiter_client.get(f"/packets/{sample_packet.slug}/").content.decode()
    funnel_html = html.split('id="funnel"')[1].split("</section>")[0]
    assert funnel_html.count("<svg") == 3 and 'role="img"' in funnel_html
    assert '<title id="funnel-title">' in funnel_html and '<desc id="funnel-desc">Invited: 1;' in funnel_html
    assert 'aria-labelledby="time-to-red-title time-to-red-desc"' in funnel_html
    numbers = funnel_html.split('data-numbers="funnel"')[1].split("</table>")[0]
    assert '<tr data-step="red"><th scope="row">Red run witnessed</th><td>1</td></tr>' in numbers
    assert "<script" not in funnel_html and "style=" not in funnel_html


@pytest.mark.django_db
def test_the_packet_page_counts_who_used_the_model_window_requests_and_tokens(recruiter_client, sample_packet):
    used, twice = journey(sample_packet, red_after=3), journey(sample_packet, red_after=5)
    journey(sample_packet, red_after=4)  # red, but never asked the model
    ModelExchange.objects.create(invitation=used, tokens_in=100, tokens_out=40)
    ModelExchange.objects.create(invitation=twice, tokens_in=200, tokens_out=60)
    ModelExchange.objects.create(invitation=twice, error="the model server timed out", tokens_in=50)
    elsewhere = InvitationFactory(packet_version=make_packet().latest_version())  # another packet's window
    ModelExchange.objects.create(invitation=elsewhere, tokens_in=999, tokens_out=999)

    assert funnel(sample_packet)["model"] == {"candidates": 2, "requests": 3, "tokens_in": 350, "tokens_out": 100}
    html = recruiter_client.get(f"/packets/{sample_packet.slug}/").content.decode()
    numbers = html.split('data-numbers="model-window"')[1].split("</table>")[0]
    assert '<th scope="row">Candidates who used it</th><td>2</td>' in numbers
    assert '<th scope="row">Requests (failed ones included)</th><td>3</td>' in numbers
    assert "<td>350 / 100</td>" in numbers
