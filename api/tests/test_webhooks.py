"""Webhooks: the signature, the addresses refused, the delivery with Celery's retries (the task applied in
this process, its retries too), the events the apps' signals queue once their writes commit, and the page."""

from __future__ import annotations

import json
import time
from unittest.mock import patch

import pytest

from api import actions, signing
from api.models import EVENTS, WebhookDelivery, WebhookEndpoint
from api.tasks import deliver_webhook
from sessions_app.actions import do_start_session
from takehome.actions import do_decide
from takehome.models import AuditEvent

SECRET = "whsec_test-secret"


# --- the signature -----------------------------------------------------------------------------


def test_a_signature_verifies_over_the_timestamp_and_the_body():
    body = b'{"type":"ping"}'
    header = signing.signature_header(SECRET, body, timestamp=1_700_000_000)
    t, v1 = header.split(",")
    assert t == "t=1700000000" and v1.startswith("v1=") and len(v1) == 3 + 64
    assert signing.verify(header, body, SECRET, now=1_700_000_010)


@pytest.mark.parametrize("change", ["body", "secret", "old", "future", "no_t", "no_v1", "garbage"])
def test_a_signature_is_refused_when_anything_differs(change):
    body, now = b'{"type":"ping"}', 1_700_000_000
    header = signing.signature_header(SECRET, body, timestamp=now)
    secret = SECRET
    if change == "body":
        body = b'{"type":"pong"}'
    elif change == "secret":
        secret = "whsec_other"
    elif change == "old":
        now += signing.TOLERANCE_S + 1
    elif change == "future":
        now -= signing.TOLERANCE_S + 1
    elif change == "no_t":
        header = header.split(",")[1]
    elif change == "no_v1":
        header = header.split(",")[0]
    else:
        header = "nonsense"
    assert not signing.verify(header, body, secret, now=now)


def test_a_second_v1_lets_a_secret_be_rolled():
    body, t = b"{}", int(time.time())
    header = f"t={t},v1={'0' * 64},v1={signing.signature(SECRET, t, body)}"
    assert signing.verify(header, body, SECRET)


# --- the addresses refused (server-side request forgery) ---------------------------------------


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8000/hook", "http://localhost/hook", "http://app.localhost/hook", "http://[::1]/hook",
    "http://10.0.0.5/hook", "http://172.16.3.4/hook", "http://192.168.1.1/hook", "http://169.254.169.254/latest",
    "http://100.64.0.1/hook", "http://0.0.0.0/hook", "http://[::ffff:127.0.0.1]/hook", "http://[fd00::1]/hook",
    "http://224.0.0.1/hook", "ftp://example.com/hook", "http://user:pw@93.184.215.14/hook", "https:///nohost",
    "http://takehome.example.org/hook",  # the site itself, whatever it resolves to
])
def test_an_address_inside_or_of_this_server_is_refused(url):
    with pytest.raises(signing.RefusedAddress):
        signing.check_address(url, allow_private=False, own_hosts=("takehome.example.org",))


def test_a_public_address_is_taken_and_the_setting_lets_private_ones_through():
    signing.check_address("https://93.184.215.14/hook", allow_private=False)
    signing.check_address("http://127.0.0.1:9/hook", allow_private=True)


def test_a_name_resolving_to_loopback_is_refused(monkeypatch):
    monkeypatch.setattr(signing.socket, "getaddrinfo", lambda *a, **k: [(2, 1, 6, "", ("127.0.0.1", 443))])
    with pytest.raises(signing.RefusedAddress, match="127.0.0.1"):
        signing.check_address("https://rebind.example.com/hook", allow_private=False)


@pytest.mark.django_db
def test_registering_refuses_a_private_address_unless_the_setting_allows_it(recruiter, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(signing.RefusedAddress):
        actions.do_register_endpoint("http://127.0.0.1:9/hook", list(EVENTS), "", recruiter)
    settings.SITE_URL = "https://hire.example.com"
    with pytest.raises(signing.RefusedAddress, match="this server"):
        actions.do_register_endpoint("https://hire.example.com/hook", list(EVENTS), "", recruiter)
    assert not WebhookEndpoint.objects.exists()
    settings.WEBHOOK_ALLOW_PRIVATE = True
    new = actions.do_register_endpoint("http://127.0.0.1:9/hook", ["submission.graded"], "ATS", recruiter)
    assert new.secret.startswith("whsec_") and new.endpoint.events == ["submission.graded"]
    assert AuditEvent.objects.filter(action="webhook_added", actor=recruiter).exists()


# --- delivery, with Celery's retries ------------------------------------------------------------


def endpoint_at(url: str, events=EVENTS) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(url=url, events=list(events), secret=SECRET)


def queued(endpoint: WebhookEndpoint, event: str = "submission.graded") -> WebhookDelivery:
    (delivery,) = actions._queue([endpoint], event, {"submission": {"id": 1}})
    return delivery


def test_the_task_uses_celerys_own_retries():
    assert deliver_webhook.autoretry_for and deliver_webhook.retry_jitter is True
    assert deliver_webhook.retry_backoff and deliver_webhook.max_retries >= 1 and deliver_webhook.acks_late


@pytest.mark.django_db
def test_a_delivery_is_signed_and_logged(receiver, private_hooks):
    delivery = queued(endpoint_at(receiver.url))
    assert deliver_webhook.apply(args=[delivery.pk]).get() == "delivered"
    (got,) = receiver.got
    assert got["body"] == delivery.body.encode() and receiver.signed_by(got, SECRET)
    assert got["headers"]["Takehome-Event"] == "submission.graded"
    assert got["json"]["id"] == delivery.event_id == got["headers"]["Takehome-Delivery"]
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and [a["code"] for a in delivery.attempts] == [200]


@pytest.mark.django_db
def test_a_failed_delivery_is_retried_until_it_is_taken(receiver, private_hooks):
    receiver.answers = [500, 503]
    delivery = queued(endpoint_at(receiver.url))
    deliver_webhook.apply(args=[delivery.pk])
    delivery.refresh_from_db()
    assert delivery.status == "delivered"
    assert [a["code"] for a in delivery.attempts] == [500, 503, 200]
    assert len(receiver.got) == 3 and all(receiver.signed_by(r, SECRET) for r in receiver.got)
    assert len({r["body"] for r in receiver.got}) == 1  # the same bytes each time


@pytest.mark.django_db
def test_a_delivery_fails_for_good_once_the_retries_are_used_up(receiver, private_hooks, monkeypatch):
    monkeypatch.setattr(deliver_webhook, "max_retries", 2)
    receiver.answers = [500] * 10
    delivery = queued(endpoint_at(receiver.url))
    assert deliver_webhook.apply(args=[delivery.pk]).get() == "failed"
    delivery.refresh_from_db()
    assert delivery.status == "failed" and [a["code"] for a in delivery.attempts] == [500, 500, 500]


@pytest.mark.django_db
def test_no_answer_within_the_timeout_is_a_failed_attempt(private_hooks, settings, monkeypatch):
    import socket

    settings.WEBHOOK_TIMEOUT_S = 0.5
    monkeypatch.setattr(deliver_webhook, "max_retries", 0)
    with socket.socket() as silent:  # accepts the connection, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        delivery = queued(endpoint_at(f"http://127.0.0.1:{silent.getsockname()[1]}/hook"))
        assert deliver_webhook.apply(args=[delivery.pk]).get() == "failed"
    delivery.refresh_from_db()
    assert delivery.attempts[0]["code"] is None and "Timeout" in delivery.attempts[0]["error"]


@pytest.mark.django_db
def test_an_address_refused_when_sent_to_fails_at_once_without_a_request(receiver, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    delivery = queued(endpoint_at(receiver.url))
    settings.WEBHOOK_ALLOW_PRIVATE = False  # as a name that now resolves inside
    assert deliver_webhook.apply(args=[delivery.pk]).get() == "failed"
    delivery.refresh_from_db()
    assert delivery.attempts[0]["error"].startswith("refused:") and receiver.got == []


# --- the events, queued once the apps' writes commit --------------------------------------------


@pytest.mark.django_db
def test_a_decision_queues_decision_recorded_after_commit(recruiter, invitation,
                                                          django_capture_on_commit_callbacks):
    endpoint_at("https://93.184.215.14/hook", ["decision.recorded"])
    endpoint_at("https://93.184.215.14/other", ["submission.graded"])
    with patch("api.actions.publish.send", return_value=True) as send, django_capture_on_commit_callbacks(execute=True):
        do_decide(invitation, "advance", "", recruiter)
        assert not WebhookDelivery.objects.exists()  # nothing before the commit
    (delivery,) = WebhookDelivery.objects.all()
    send.assert_called_once_with(deliver_webhook, (delivery.pk,))
    body = json.loads(delivery.body)
    assert body["type"] == "decision.recorded" and delivery.endpoint.url.endswith("/hook")
    assert body["data"]["invitation"]["id"] == invitation.pk
    assert body["data"]["invitation"]["decision"]["choice"] == "advance"


@pytest.mark.django_db
def test_a_start_queues_invitation_started_and_a_second_start_nothing(invitation,
                                                                      django_capture_on_commit_callbacks):
    endpoint_at("https://93.184.215.14/hook")
    with patch("api.actions.publish.send", return_value=True), django_capture_on_commit_callbacks(execute=True):
        do_start_session(invitation)
    with patch("api.actions.publish.send", return_value=True), django_capture_on_commit_callbacks(execute=True):
        do_start_session(invitation)
    (delivery,) = WebhookDelivery.objects.all()
    assert json.loads(delivery.body)["data"]["invitation"]["status"] == "started"


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_write_sends_nothing(recruiter, invitation):
    from django.db import transaction

    endpoint_at("https://93.184.215.14/hook")
    with patch("api.actions.publish.send", return_value=True) as send:
        with pytest.raises(RuntimeError), transaction.atomic():
            do_decide(invitation, "advance", "", recruiter)
            raise RuntimeError("rolled back")
    send.assert_not_called()
    assert not WebhookDelivery.objects.exists()


@pytest.mark.django_db
def test_a_delivery_the_broker_did_not_take_is_sent_by_the_sweep(recruiter):
    from datetime import timedelta

    from django.utils import timezone

    from api.tasks import sweep_webhooks

    endpoint = endpoint_at("https://93.184.215.14/hook")
    with patch("api.actions.publish.send", return_value=False):
        delivery = queued(endpoint)
        assert actions.do_send_delivery(delivery.pk) is False
    assert WebhookDelivery.objects.get().sent_at is None
    with patch("api.actions.publish.send", return_value=True) as send:
        assert sweep_webhooks() == 0  # too fresh: its own send may still be on the way
        WebhookDelivery.objects.update(created_at=timezone.now() - timedelta(minutes=2))
        assert sweep_webhooks() == 1
        assert sweep_webhooks() == 0
    send.assert_called_once_with(deliver_webhook, (delivery.pk,))
    assert WebhookDelivery.objects.get().sent_at is not None


# --- the page ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_both_pages_need_a_login_and_the_account_page_a_role(client, django_user_model):
    for path in ("/account/", "/webhooks/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    client.force_login(django_user_model.objects.create_user("nobody"))
    assert client.get("/account/").status_code == 403
    assert client.post("/account/tokens/new", {"name": "x", "scope": "write"}).status_code == 403


@pytest.mark.django_db
def test_a_person_revokes_only_their_own_tokens(client, recruiter, reviewer, make_token):
    make_token(reviewer)
    client.force_login(recruiter)
    token = reviewer.api_tokens.get()
    assert client.post(f"/account/tokens/{token.pk}/revoke").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


@pytest.mark.django_db
def test_the_page_is_for_those_who_manage_the_team(client, recruiter, reviewer, groups):
    for user in (recruiter, reviewer):
        client.force_login(user)
        assert client.get("/webhooks/").status_code == 403
        assert client.post("/webhooks/new", {"url": "https://93.184.215.14/hook", "events": EVENTS}).status_code == 403
    recruiter.groups.add(groups["team admin"])
    client.force_login(recruiter)
    assert client.get("/webhooks/").status_code == 200
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db
def test_the_page_refuses_a_private_address_and_shows_a_new_secret_once(client, recruiter, groups, settings,
                                                                       django_capture_on_commit_callbacks):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    recruiter.groups.add(groups["team admin"])
    client.force_login(recruiter)
    refused = client.post("/webhooks/new", {"url": "http://192.168.0.10/hook", "events": ["submission.graded"]})
    assert refused.status_code == 200 and b"private network" in refused.content
    assert not WebhookEndpoint.objects.exists()
    assert client.post("/webhooks/new", {"url": "https://93.184.215.14/hook", "events": EVENTS}).status_code == 302
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.secret.encode() in client.get("/webhooks/").content
    assert endpoint.secret.encode() not in client.get("/webhooks/").content  # once
    with patch("api.actions.publish.send", return_value=True) as send, django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/webhooks/{endpoint.pk}/test").status_code == 302
    (delivery,) = WebhookDelivery.objects.all()
    send.assert_called_once_with(deliver_webhook, (delivery.pk,))
    assert delivery.event == "ping" and AuditEvent.objects.filter(action="webhook_test").exists()
