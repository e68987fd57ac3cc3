"""Writes of the API's side: tokens made and revoked, endpoints registered and removed, events queued.

Each person's or server's write is on the audit trail (takehome.audit.record), in the same transaction.
"""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from shared import publish
from takehome.audit import record
from takehome.models import hash_token

from . import signing
from .models import EVENTS, TEST_EVENT, ApiToken, WebhookDelivery, WebhookEndpoint

TOKEN_PREFIX = "thk_"


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    raw: str  # shown once, never stored


@transaction.atomic
def do_create_token(user, name: str, scope: str) -> NewToken:
    """A new personal token for ``user``; the raw token is in the result and nowhere else."""
    if scope not in ApiToken.Scope.values:
        raise ValueError(f"Unknown scope {scope!r}.")
    # why 32 random bytes and a plain sha256 (takehome.models.hash_token): nothing to brute-force, and a
    # database dump holds no working token.
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name.strip()[:100] or "API token", prefix=raw[:12],
                                    token_hash=hash_token(raw), scope=scope)
    record(user, "api_token_created", token, f"{token.get_scope_display().lower()}, named {token.name!r}")
    return NewToken(token, raw)


@transaction.atomic
def do_revoke_token(token: ApiToken, actor) -> bool:
    """Revoke a token for good; False (and nothing written) when it was revoked already."""
    locked = ApiToken.objects.select_for_update().get(pk=token.pk)
    if locked.revoked_at is not None:
        return False
    locked.revoked_at = timezone.now()
    locked.save(update_fields=["revoked_at"])
    record(actor, "api_token_revoked", locked, f"named {locked.name!r}")
    token.revoked_at = locked.revoked_at
    return True


def note_token_use(token: ApiToken, what: str) -> None:
    """One use of a token, on the audit trail, and its last-used time."""
    now = timezone.now()
    with transaction.atomic():
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        record(token.user, "api_call", token, what[:500])
    token.last_used_at = now


# --- webhooks ---------------------------------------------------------------------------------


def own_hosts() -> tuple[str, ...]:
    """The names this site answers to: never a webhook's host, whatever they resolve to."""
    names = {urlsplit(settings.SITE_URL).hostname or ""}
    names.update(h.lstrip(".") for h in settings.ALLOWED_HOSTS if h not in ("*", ""))
    return tuple(sorted(n for n in names if n))


def check_url(url: str) -> None:
    """signing.check_address with this site's settings; raises signing.RefusedAddress."""
    signing.check_address(url, allow_private=settings.WEBHOOK_ALLOW_PRIVATE, own_hosts=own_hosts())


@dataclass(frozen=True)
class NewEndpoint:
    endpoint: WebhookEndpoint
    secret: str  # shown once


@transaction.atomic
def do_register_endpoint(url: str, events: list[str], description: str, actor) -> NewEndpoint:
    """Register an endpoint for the team's events; refuses (signing.RefusedAddress) an address it must not reach."""
    check_url(url)
    unknown = set(events) - set(EVENTS)
    if unknown or not events:
        raise ValueError(f"Choose among {', '.join(EVENTS)}.")
    endpoint = WebhookEndpoint.objects.create(url=url, events=[e for e in EVENTS if e in events],
                                              description=description.strip()[:200], secret=signing.new_secret(),
                                              created_by=actor)
    record(actor, "webhook_added", endpoint, f"{url}: {', '.join(endpoint.events)}")
    return NewEndpoint(endpoint, endpoint.secret)


@transaction.atomic
def do_remove_endpoint(endpoint: WebhookEndpoint, actor) -> None:
    """Remove an endpoint and its delivery log; deliveries still waiting are not sent."""
    record(actor, "webhook_removed", endpoint, endpoint.url)
    endpoint.delete()


def _body(event: str, data: dict) -> tuple[str, str]:
    event_id = "evt_" + uuid.uuid4().hex
    body = {"id": event_id, "type": event, "created": timezone.now().isoformat(), "data": data}
    return event_id, json.dumps(body, separators=(",", ":"), sort_keys=True)


def do_send_delivery(delivery_id: int) -> bool:
    """Hand one delivery to the broker without waiting on one that is down; False: the sweep sends it later."""
    from .tasks import deliver_webhook

    if not publish.send(deliver_webhook, (delivery_id,)):
        return False
    WebhookDelivery.objects.filter(pk=delivery_id, sent_at__isnull=True).update(sent_at=timezone.now())
    return True


def _queue(endpoints, event: str, data: dict) -> list[WebhookDelivery]:
    deliveries = []
    for endpoint in endpoints:
        event_id, body = _body(event, data)
        deliveries.append(WebhookDelivery.objects.create(endpoint=endpoint, event_id=event_id, event=event,
                                                         body=body))
    ids = [d.pk for d in deliveries]
    # why after commit: the worker must find the delivery's row.
    transaction.on_commit(lambda: [do_send_delivery(pk) for pk in ids])
    return deliveries


def unsent_deliveries(older_than_s: int = 60):
    """Deliveries whose message the broker never took: the sweep's to send again."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    return WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, sent_at__isnull=True,
                                          created_at__lt=cutoff)


def endpoints_for(event: str) -> list[WebhookEndpoint]:
    """The endpoints that asked for ``event``."""
    if event not in EVENTS:
        raise ValueError(f"Unknown event {event!r}.")
    # why in Python: a JSON list's membership is not one lookup on every database (SQLite's JSON has none).
    return [e for e in WebhookEndpoint.objects.all() if event in e.events]


@transaction.atomic
def do_queue_event(event: str, data: dict, endpoints: list[WebhookEndpoint] | None = None) -> list[WebhookDelivery]:
    """One delivery per endpoint that asked for ``event`` (or of ``endpoints``), each sent once this commits."""
    return _queue(endpoints_for(event) if endpoints is None else endpoints, event, data)


@transaction.atomic
def do_send_test_event(endpoint: WebhookEndpoint, actor) -> WebhookDelivery:
    """The page's "send test event": a ``ping`` to one endpoint, signed, delivered and logged as any other."""
    record(actor, "webhook_test", endpoint, endpoint.url)
    (delivery,) = _queue([endpoint], TEST_EVENT, {"message": "A test event from takehome.",
                                                  "endpoint": endpoint.pk})
    return delivery
