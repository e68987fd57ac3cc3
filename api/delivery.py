"""Sending one webhook delivery: the one writer of WebhookDelivery's status and attempts.

The Celery task (api.tasks.deliver_webhook) calls ``attempt`` once per try; Celery's own retries space the
tries out. The same bytes go every time, signed afresh (a new timestamp), so a receiver's replay window holds.
"""

from __future__ import annotations

import logging

import httpx2
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from . import signing
from .actions import check_url
from .models import WebhookDelivery

log = logging.getLogger(__name__)
ERROR_CHARS = 300  # of an error kept per attempt


class DeliveryFailed(Exception):
    """The endpoint did not take the event (no answer, or not 2xx): try again later."""


def _post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    """Post the delivery once: the answer's status code (None without one) and an error in words."""
    try:
        # why again at each try: a name that resolved to a public address when registered may not now.
        check_url(delivery.endpoint.url)
    except signing.RefusedAddress as exc:
        return None, f"refused: {exc}"
    body = delivery.body.encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "takehome-webhooks",
        "Takehome-Event": delivery.event,
        "Takehome-Delivery": delivery.event_id,
        signing.HEADER: signing.signature_header(delivery.endpoint.secret, body),
    }
    try:
        # why no redirects: a redirect could lead to an address check_url refuses.
        with httpx2.Client(timeout=settings.WEBHOOK_TIMEOUT_S, follow_redirects=False, trust_env=False) as client:
            response = client.post(delivery.endpoint.url, content=body, headers=headers)
    except httpx2.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
    if 200 <= response.status_code < 300:
        return response.status_code, ""
    return response.status_code, f"answered {response.status_code}"


def attempt(delivery_id: int, last: bool) -> str:
    """Try the delivery once and log the answer; raise DeliveryFailed to be tried again, unless ``last``.

    Returns the delivery's status. A delivery already finished (a duplicate message) is left as it is; an
    address refused is failed at once, as no later try would be allowed either.
    """
    delivery = WebhookDelivery.objects.select_related("endpoint").filter(pk=delivery_id).first()
    if delivery is None or delivery.status != WebhookDelivery.Status.PENDING:
        return delivery.status if delivery else "gone"
    code, error = _post(delivery)
    refused = error.startswith("refused:")
    with transaction.atomic():
        locked = WebhookDelivery.objects.select_for_update().filter(pk=delivery_id).first()
        if locked is None:  # the endpoint was removed meanwhile
            return "gone"
        locked.attempts = [*locked.attempts, {"at": timezone.now().isoformat(), "code": code, "error": error}]
        fields = ["attempts"]
        if not error:
            locked.status, locked.finished_at = WebhookDelivery.Status.DELIVERED, timezone.now()
            fields += ["status", "finished_at"]
        elif last or refused:
            locked.status, locked.finished_at = WebhookDelivery.Status.FAILED, timezone.now()
            fields += ["status", "finished_at"]
        locked.save(update_fields=fields)
    if locked.status == WebhookDelivery.Status.PENDING:
        log.info("webhook %s to %s: %s; tried again later", delivery.event_id, delivery.endpoint.url, error)
        raise DeliveryFailed(error)
    return locked.status
