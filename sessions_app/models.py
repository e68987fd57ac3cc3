"""The candidate's side: what the server witnessed (gate receipts) and what was uploaded."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from takehome.models import ImmutableRowError, Invitation


class InvalidTransition(Exception):
    def __init__(self, current: str, wanted: str):
        super().__init__(f"cannot move a submission from {current} to {wanted}")
        self.current, self.wanted = current, wanted


class GateReceipt(models.Model):
    """One step the server saw happen: red, model, green (from gate.py) or an upload.

    Append-only: written once by sessions_app.actions, never changed. Refused
    steps are kept too (accepted=False, with the reason), because a gate that
    says "no" is part of the story a reviewer reads.
    """

    class Step(models.TextChoices):
        RED = "red"
        MODEL = "model"
        GREEN = "green"
        UPLOAD = "upload"

    invitation = models.ForeignKey(Invitation, on_delete=models.CASCADE, related_name="receipts")
    step = models.CharField(max_length=10, choices=Step.choices)
    received_at = models.DateTimeField(default=timezone.now, db_index=True)
    accepted = models.BooleanField(default=True)
    refusal = models.CharField(max_length=300, blank=True)
    local_time = models.CharField(max_length=64, blank=True, help_text="The candidate's clock, as sent.")
    log_text = models.TextField(blank=True)
    tree_hashes = models.JSONField(default=dict, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["received_at", "pk"]
        indexes = [models.Index(fields=["invitation", "step"])]

    def __str__(self) -> str:
        return f"{self.step} at {self.received_at:%H:%M:%S} ({'accepted' if self.accepted else 'refused'})"

    def save(self, *args, **kwargs) -> None:
        # why: receipts are the evidence that weighs most; nothing may rewrite one.
        if self.pk is not None:
            raise ImmutableRowError("Gate receipts are append-only.")
        super().save(*args, **kwargs)


class SubmissionQuerySet(models.QuerySet):
    def latest_per_invitation(self):
        return self.filter(is_latest=True)


class Submission(models.Model):
    """One uploaded zip. Every upload is kept; the latest one is reviewed.

    received -> queued -> grading -> graded      (evidence saved, whatever the code did)
                                  -> rejected    (the archive was refused, with the reason)
                                  -> error       (our side failed for good; traceback kept)
    grading -> queued                            (retry after an infrastructure error or a lost worker)
    """

    class Status(models.TextChoices):
        RECEIVED = "received"
        QUEUED = "queued"
        GRADING = "grading"
        GRADED = "graded"
        REJECTED = "rejected"
        ERROR = "error"

    FINISHED = (Status.GRADED, Status.REJECTED, Status.ERROR)

    invitation = models.ForeignKey(Invitation, on_delete=models.CASCADE, related_name="submissions")
    archive = models.FileField(upload_to="uploads/", max_length=300)
    sha256 = models.CharField(max_length=64, db_index=True)
    size = models.PositiveBigIntegerField()
    original_name = models.CharField(max_length=255, blank=True)
    via = models.CharField(max_length=10, default="browser")  # browser | gate
    uploaded_at = models.DateTimeField(default=timezone.now, db_index=True)
    is_latest = models.BooleanField(default=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RECEIVED, db_index=True)
    status_changed_at = models.DateTimeField(default=timezone.now, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    reject_reason = models.TextField(blank=True)
    error = models.TextField(blank=True, help_text="For operators only; never shown to candidates.")

    objects = SubmissionQuerySet.as_manager()

    class Meta:
        ordering = ["-uploaded_at", "-pk"]
        indexes = [models.Index(fields=["is_latest", "status"])]

    def __str__(self) -> str:
        return f"submission {self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    def _move(self, wanted: str, allowed_from: tuple[str, ...], **fields) -> None:
        """Change status with a conditional UPDATE, so two workers cannot both win."""
        if self.status not in allowed_from:
            raise InvalidTransition(self.status, wanted)
        now = timezone.now()
        changed = Submission.objects.filter(pk=self.pk, status__in=allowed_from).update(
            status=wanted, status_changed_at=now, **fields
        )
        if not changed:
            self.refresh_from_db(fields=["status"])
            raise InvalidTransition(self.status, wanted)
        self.status, self.status_changed_at = wanted, now
        for name, value in fields.items():
            setattr(self, name, value)

    def mark_queued(self) -> None:
        self._move(self.Status.QUEUED, (self.Status.RECEIVED, self.Status.QUEUED, self.Status.GRADING))

    def mark_grading(self) -> None:
        self._move(
            self.Status.GRADING,
            (self.Status.RECEIVED, self.Status.QUEUED, self.Status.GRADING),
            attempts=self.attempts + 1,
        )

    def mark_graded(self) -> None:
        self._move(self.Status.GRADED, (self.Status.GRADING,), reject_reason="", error="")

    def mark_rejected(self, reason: str) -> None:
        self._move(self.Status.REJECTED, (self.Status.GRADING,), reject_reason=reason, error="")

    def mark_error(self, error: str) -> None:
        self._move(
            self.Status.ERROR, (self.Status.RECEIVED, self.Status.QUEUED, self.Status.GRADING), error=error
        )
