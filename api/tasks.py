"""The webhooks' Celery task: a thin wrapper, the logic lives in api.delivery."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from shared.tasks import RETRY_FIRST_S, RETRY_LONGEST_S

from .actions import do_send_delivery, unsent_deliveries
from .delivery import DeliveryFailed, attempt


@shared_task(
    bind=True,
    acks_late=True,
    autoretry_for=(DeliveryFailed,),
    # Celery's own back-off: waits doubling from RETRY_FIRST_S up to RETRY_LONGEST_S, with full jitter, so
    # deliveries that failed together (an endpoint down for all of them) do not come back all at once.
    retry_backoff=RETRY_FIRST_S,
    retry_backoff_max=RETRY_LONGEST_S,
    retry_jitter=True,
    max_retries=settings.WEBHOOK_MAX_RETRIES,
    soft_time_limit=settings.WEBHOOK_TIMEOUT_S * 3 + 30,
    time_limit=settings.WEBHOOK_TIMEOUT_S * 3 + 60,
)
def deliver_webhook(self, delivery_id: int) -> str:
    """Send one webhook delivery; a failed try is retried by Celery until max_retries, then logged as failed."""
    return attempt(delivery_id, last=self.request.retries >= self.max_retries)


@shared_task(ignore_result=True)
def sweep_webhooks() -> int:
    """Send again the deliveries whose message the broker did not take (it was down when the event came)."""
    sent = 0
    for delivery_id in list(unsent_deliveries().values_list("pk", flat=True)):
        if not do_send_delivery(delivery_id):
            break  # why: the broker is down; each further send would wait out its timeout and fail the same
        sent += 1
    return sent
