"""POST /t/<token>/start: the clock starts once."""

from datetime import timedelta

import pytest
from django.test import Client

from takehome.models import Invitation

from .conftest import url

pytestmark = pytest.mark.django_db


def test_start_sets_the_clock_and_says_until_when(client, invitation):
    r = client.post(url("start", invitation), follow=True)
    inv = Invitation.objects.get(pk=invitation.pk)
    assert inv.started_at is not None
    assert inv.deadline - inv.started_at == timedelta(minutes=90)
    assert inv.status == "started"
    assert "Your clock is running: 90 minutes" in r.content.decode()


def test_a_second_start_changes_nothing_and_says_so(client, invitation):
    client.post(url("start", invitation))
    before = Invitation.objects.values("started_at", "deadline").get(pk=invitation.pk)
    r = client.post(url("start", invitation), follow=True)
    assert Invitation.objects.values("started_at", "deadline").get(pk=invitation.pk) == before
    assert "already started" in r.content.decode() and "nothing changed" in r.content.decode()


def test_start_from_htmx_redirects_the_whole_page(client, invitation):
    r = client.post(url("start", invitation), headers={"HX-Request": "true"})
    assert r.headers["HX-Redirect"] == url("landing", invitation)


def test_start_keeps_csrf(invitation):
    r = Client(enforce_csrf_checks=True).post(url("start", invitation))
    assert r.status_code == 403
    assert Invitation.objects.get(pk=invitation.pk).started_at is None


def test_start_needs_post(client, invitation):
    assert client.get(url("start", invitation)).status_code == 405


def test_start_with_a_wrong_token_changes_nothing(client, invitation):
    r = client.post("/t/wrong-token/start")
    assert r.status_code == 404 and "This link is not valid" in r.content.decode()
    assert not Invitation.objects.filter(started_at__isnull=False).exists()
