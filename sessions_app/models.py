"""The candidate's side: what the server witnessed (gate receipts) and what was uploaded."""

from __future__ import annotations

from django.db import models, transaction
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
        """The upload under review of each invitation: its latest accepted one (see Submission.is_latest)."""
        return self.filter(is_latest=True)

    def settle_latest(self, invitation_id: int) -> Submission | None:
        """Put ``is_latest`` on the invitation's latest accepted upload; returns that upload.

        Accepted means not refused: neither rejected nor error. Received, queued
        and grading uploads count, since nothing is known against them yet, and
        so does a superseded one (the caller grades it again). When every upload
        was refused, the newest of all carries the flag, so a candidate never
        vanishes from the queue. Call it inside a transaction that holds the
        invitation's row lock, as every change of status that can move the flag does.
        """
        rows = list(
            self.filter(invitation_id=invitation_id).order_by("-uploaded_at", "-pk").only("pk", "status", "is_latest")
        )
        if not rows:
            return None
        chosen = next((s for s in rows if s.status not in Submission.REFUSED), rows[0])
        self.filter(invitation_id=invitation_id, is_latest=True).exclude(pk=chosen.pk).update(is_latest=False)
        if not chosen.is_latest:
            self.filter(pk=chosen.pk).update(is_latest=True)
            chosen.is_latest = True
        return chosen


class Submission(models.Model):
    """One uploaded zip. Every upload is kept; the latest accepted one is reviewed.

    received -> queued -> grading -> graded      (evidence saved, whatever the code did)
                                  -> rejected    (the archive was refused, with the reason)
                                  -> error       (our side failed for good; traceback kept)
    grading -> queued                            (retry after an infrastructure error or a lost worker)
    received/queued -> superseded                (a newer upload arrived before grading started: not graded)
    superseded -> received                       (the newer upload was rejected or failed: this one is
                                                  the latest accepted work again, and is graded after all)

    ``is_latest`` marks the upload under review: the invitation's newest upload
    that is not rejected or error (the newest of all when every one was), kept
    on exactly one row per invitation, in the same transaction as the upload or
    the status change that moves it. A superseded upload never keeps the flag:
    when it falls back to one, that one goes back to grading.
    """

    class Status(models.TextChoices):
        RECEIVED = "received"
        QUEUED = "queued"
        GRADING = "grading"
        GRADED = "graded"
        REJECTED = "rejected"
        ERROR = "error"
        SUPERSEDED = "superseded"

    FINISHED = (Status.GRADED, Status.REJECTED, Status.ERROR, Status.SUPERSEDED)
    # Known not to be accepted work: never under review while an accepted upload exists.
    REFUSED = (Status.REJECTED, Status.ERROR)

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

    def mark_rejected(self, reason: str) -> Submission | None:
        """Refused on unpacking. Returns an older upload sent back to grading, if the flag fell to one."""
        with transaction.atomic():
            self._lock_invitation()
            self._move(self.Status.REJECTED, (self.Status.GRADING,), reject_reason=reason, error="")
            return self._hand_over_latest()

    def mark_error(self, error: str) -> Submission | None:
        """Our side failed for good. Returns an older upload sent back to grading, if the flag fell to one."""
        with transaction.atomic():
            self._lock_invitation()
            self._move(
                self.Status.ERROR, (self.Status.RECEIVED, self.Status.QUEUED, self.Status.GRADING), error=error
            )
            return self._hand_over_latest()

    def mark_superseded(self) -> None:
        """A newer upload arrived before this one's grading started: it is not graded."""
        self._move(self.Status.SUPERSEDED, (self.Status.RECEIVED, self.Status.QUEUED))

    def mark_reinstated(self) -> None:
        """Superseded, but the uploads that replaced it were refused: grade it after all.

        The caller sends it for grading after the commit; if that send is lost,
        the sweep finds it as a received upload.
        """
        self._move(self.Status.RECEIVED, (self.Status.SUPERSEDED,))

    def _lock_invitation(self) -> None:
        # why: the flag must move under the same lock an upload takes, or a refusal
        # and an upload at the same moment could leave two rows (or none) under review.
        Invitation.objects.select_for_update().filter(pk=self.invitation_id).only("pk").first()

    def _hand_over_latest(self) -> Submission | None:
        """After a refusal: move the flag to the latest accepted upload; grade it if it was superseded."""
        chosen = Submission.objects.settle_latest(self.invitation_id)
        self.is_latest = chosen is not None and chosen.pk == self.pk
        if chosen is None or chosen.status != self.Status.SUPERSEDED:
            return None
        # why: accepted work must never sit ungraded under review; grading it is
        # the rule that keeps the candidate's last good upload reachable.
        reinstated = Submission.objects.get(pk=chosen.pk)
        reinstated.mark_reinstated()
        return reinstated
