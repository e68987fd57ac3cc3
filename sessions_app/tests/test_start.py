"""/t/<token>/start: a confirmation stating the time limit and the deadline, then the clock starts once."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from takehome.models import Invitation

from .conftest import url

pytestmark = pytest.mark.django_db
YES = {"confirm": "yes"}


def test_start_sets_the_clock_and_says_until_when(client, invitation):
    r = client.post(url("start", invitation), YES, follow=True)
    inv = Invitation.objects.get(pk=invitation.pk)
    assert inv.started_at is not None
    assert inv.deadline - inv.started_at == timedelta(minutes=90)
    assert inv.status == "started"
    assert "Your clock is running: 90 minutes" in r.content.decode()


def test_a_second_start_changes_nothing_and_says_so(client, invitation):
    client.post(url("start", invitation), YES)
    before = Invitation.objects.values("started_at", "deadline").get(pk=invitation.pk)
    r = client.post(url("start", invitation), YES, follow=True)
    assert Invitation.objects.values("started_at", "deadline").get(pk=invitation.pk) == before
    assert "already started" in r.content.decode() and "nothing changed" in r.content.decode()


def test_start_from_htmx_redirects_the_whole_page(client, invitation):
    r = client.post(url("start", invitation), YES, headers={"HX-Request": "true"})
    assert r.headers["HX-Redirect"] == url("landing", invitation)


def test_start_keeps_csrf(invitation):
    r = Client(enforce_csrf_checks=True).post(url("start", invitation), YES)
    assert r.status_code == 403
    assert Invitation.objects.get(pk=invitation.pk).started_at is None


def test_start_asks_first_stating_the_time_limit_and_the_deadline(client, invitation):
    landing = client.get(url("landing", invitation)).content.decode()
    start_form = landing.split('class="start-form"')[0].rsplit("<form", 1)[1]
    assert 'method="get"' in start_form  # the landing's button only leads to the question
    before = timezone.now()
    r = client.get(url("start", invitation))
    html = r.content.decode()
    assert r.status_code == 200 and "Start your clock now?" in html
    assert "<strong>90 minutes</strong>" in html
    shown = html.split('id="deadline-if-now">')[1].split("</strong>")[0]
    shown = shown.split(">", 1)[1].split("<")[0]  # the UTC text inside its <time>
    assert shown in {f"{before + timedelta(minutes=90, seconds=s):%Y-%m-%d %H:%M} UTC" for s in (0, 60)}
    assert 'name="confirm" value="yes"' in html and "<script" not in html.split("<main>")[1].split("</main>")[0]
    assert Invitation.objects.get(pk=invitation.pk).started_at is None


def test_a_post_without_the_confirmation_starts_nothing(client, invitation):
    r = client.post(url("start", invitation))
    assert r.status_code == 200 and "Start your clock now?" in r.content.decode()
    assert Invitation.objects.get(pk=invitation.pk).started_at is None


def test_once_started_the_question_is_not_asked_again(client, invitation):
    client.post(url("start", invitation), YES)
    r = client.get(url("start", invitation), follow=True)
    assert "Start your clock now?" not in r.content.decode() and "already started" in r.content.decode()


def test_start_takes_only_get_and_post(client, invitation):
    assert client.put(url("start", invitation)).status_code == 405


def test_start_with_a_wrong_token_changes_nothing(client, invitation):
    r = client.post("/t/wrong-token/start", YES)
    assert r.status_code == 404 and "This link is not valid" in r.content.decode()
    assert not Invitation.objects.filter(started_at__isnull=False).exists()
