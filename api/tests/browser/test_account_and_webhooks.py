"""In headless Chromium: a recruiter who manages the team makes an API token on the account page and uses it,
revokes it, then registers a webhook endpoint and presses "Send test event"; a real worker delivers it to the
test's receiver, signed, and the page's log shows the answer."""

from __future__ import annotations

import pytest
import requests

from api.models import WebhookDelivery
from conftest import _wait_for, log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_env(worker_env):
    return {**worker_env, "TAKEHOME_WEBHOOK_ALLOW_PRIVATE": "true"}


def test_make_use_and_revoke_a_token_then_register_a_webhook_and_test_it(live_server, page, recruiter, groups,
                                                                         sample_packet, receiver, private_hooks,
                                                                         celery_worker_proc):
    recruiter.groups.add(groups["team admin"])
    log_in(page, live_server.url, "rita")
    page.get_by_role("link", name="Account").click()
    page.get_by_role("heading", name="Account").wait_for()
    page.fill("#id_name", "Greenhouse sync")
    page.get_by_label("Read and write").check()
    page.click("button:has-text('Make the token')")
    raw = page.locator("#shown-once-value").input_value()
    assert raw.startswith("thk_")
    screenshot(page, "account-token-made")

    api = f"{live_server.url}/api/v1/packets"
    used = requests.get(api, headers={"Authorization": f"Bearer {raw}"}, timeout=30)
    assert used.status_code == 200 and used.json()[0]["slug"] == sample_packet.slug
    page.reload()
    assert page.locator("#shown-once").count() == 0  # shown once
    row = page.locator("tr", has_text="Greenhouse sync")
    assert raw[:12] in row.inner_text() and raw not in page.content()
    assert "never" not in row.locator(".last-used").inner_text()
    row.get_by_role("button", name="Revoke").click()
    page.locator(".message.success").wait_for()
    assert "revoked" in page.locator("tr", has_text="Greenhouse sync").inner_text()
    refused = requests.get(api, headers={"Authorization": f"Bearer {raw}"}, timeout=30)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "token_revoked"

    page.get_by_role("link", name="Webhooks").click()
    page.get_by_role("heading", name="Webhooks").wait_for()
    page.fill("#id_url", receiver.url)
    page.fill("#id_description", "Our ATS")
    page.get_by_label("decision.recorded").uncheck()
    page.click("button:has-text('Register')")
    secret = page.locator("#shown-once-value").input_value()
    assert secret.startswith("whsec_")
    section = page.locator("section.webhook", has_text=receiver.url)
    assert "decision.recorded" not in section.inner_text() and "Nothing sent yet" in section.inner_text()

    section.get_by_role("button", name="Send test event").click()
    page.locator(".message.success").wait_for()
    ping = receiver.wait_for("ping", 60)
    assert receiver.signed_by(ping, secret)
    _wait_for(lambda: WebhookDelivery.objects.filter(status="delivered").exists(), 30, "the delivery logged")
    page.reload()
    log_row = page.locator("section.webhook tr[data-status=delivered]")
    assert "ping" in log_row.inner_text() and "200" in log_row.locator(".answers").inner_text()
    screenshot(page, "webhooks-test-event")


def test_the_api_reference_renders_under_the_site_s_content_policy(live_server, page, recruiter):
    refused = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    log_in(page, live_server.url, "rita")
    page.get_by_role("link", name="Account").click()
    page.get_by_role("link", name="REST API").click()
    page.locator(".swagger-ui .info .title").wait_for()
    assert "takehome API" in page.locator(".swagger-ui .info .title").inner_text()
    page.locator(".opblock-summary-path", has_text="/api/v1/invitations/{invitation_id}/decision").first.wait_for()
    assert refused == []
