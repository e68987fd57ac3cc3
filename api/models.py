"""The API's personal tokens, and the webhooks' endpoints and deliveries."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

# The events a webhook endpoint may receive, in the order a candidate's path meets them.
EVENTS = ("invitation.started", "submission.received", "submission.graded", "review.submitted",
          "decision.recorded")
TEST_EVENT = "ping"  # the page's "send test event": delivered and logged like any other


class ApiTokenQuerySet(models.QuerySet):
    def live(self):
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """A personal API token: acts as its user, within its scope, until revoked.

    The database keeps only the sha256 of the token (as for invitation links:
    takehome.models.hash_token) and its first characters, shown in lists so a
    person can tell their tokens apart. The token itself is shown once, when made.

    live -> revoked (final: a revoked token is refused, and stays listed)
    """

    class Scope(models.TextChoices):
        READ = "read", "Read"
        WRITE = "write", "Read and write"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    scope = models.CharField(max_length=5, choices=Scope.choices, default=Scope.READ)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"API token {self.prefix}… ({self.name})"

    @property
    def writes(self) -> bool:
        return self.scope == self.Scope.WRITE


class WebhookEndpoint(models.Model):
    """An address the team's events are posted to, signed with its secret.

    The secret is kept as it is (signing needs it) and shown once, when the
    endpoint is registered; the page shows its first characters only.
    """

    url = models.URLField(max_length=500)
    description = models.CharField(max_length=200, blank=True)
    secret = models.CharField(max_length=80, editable=False)
    events = models.JSONField(default=list)  # names from EVENTS; the test event goes to every endpoint
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"webhook {self.url}"

    @property
    def secret_hint(self) -> str:
        return self.secret[:10] + "…"


class WebhookDelivery(models.Model):
    """One event sent to one endpoint, with every attempt's answer.

    pending -> delivered         (the endpoint answered 2xx)
    pending -> failed            (Celery's retries used up, or the address was refused)
    Written only by api.delivery.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.CharField(max_length=40, unique=True)
    event = models.CharField(max_length=40)
    body = models.TextField()  # the JSON sent, exactly: every attempt sends the same bytes
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # When the broker took its message; None while it has not (the sweep sends it again: api.tasks).
    sent_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    # One {"at", "code", "error"} per attempt, oldest first; code None when no answer came.
    attempts = models.JSONField(default=list)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["endpoint", "created_at"], name="delivery_endpoint_created")]

    def __str__(self) -> str:
        return f"{self.event} to {self.endpoint.url}"

    @property
    def last_code(self) -> int | None:
        return self.attempts[-1]["code"] if self.attempts else None
