"""The candidate's side: what the server witnessed (gate receipts, model exchanges) and what was uploaded."""

from __future__ import annotations

import math

from django.db import models
from django.utils import timezone

from takehome.models import ImmutableRowError, Invitation

# How the receipt of an upload refused as too soon begins (sessions_app.actions writes it; the candidate's
# words began so too, before it was worded for reviewers): a throttled retry, listed for the reviewers
# but not counted among refused uploads on the recruiter's board, as nothing was lost by it.
UPLOAD_TOO_SOON = "Too soon:"


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

    class CapturedBy(models.TextChoices):
        CANDIDATE = "candidate"  # gate.py on the candidate's machine sent the log
        SERVER = "server"  # a hosted session: the server ran the tests itself (sessions_app.hosted.workspaces)

    invitation = models.ForeignKey(Invitation, on_delete=models.CASCADE, related_name="receipts")
    step = models.CharField(max_length=10, choices=Step.choices)
    received_at = models.DateTimeField(default=timezone.now, db_index=True)
    accepted = models.BooleanField(default=True)
    refusal = models.CharField(max_length=300, blank=True)
    # why a code beside the words: the words change and carry numbers; the metrics count refusals by reason.
    refusal_code = models.CharField(max_length=30, blank=True,
                                    help_text="A refused upload's reason as a code (deadline, too_soon, not_zip...); "
                                              "'' for other receipts, and for uploads refused before it was kept.")
    local_time = models.CharField(max_length=64, blank=True, help_text="The candidate's clock, as sent.")
    log_text = models.TextField(blank=True)
    tree_hashes = models.JSONField(default=dict, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    captured_by = models.CharField(max_length=10, choices=CapturedBy.choices, default=CapturedBy.CANDIDATE)
    # why: a capture is judged as any rerun (grading.engine.integrity.run_capture); the record says the
    # server's run held up, and grading vouches for a captured red log only when it did.
    integrity = models.JSONField(default=dict, blank=True,
                                 help_text="A server capture's integrity record: canaries, tampered, unconfirmed.")
    # why a key: an upload's receipt and its Submission were matched by hash and time, which two uploads of
    # the same zip in the same instant share; the key says which upload this receipt received.
    submission = models.OneToOneField("Submission", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="receipt",
                                      help_text="The upload this receipt received (upload receipts that were accepted).")

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
                                  -> error       (our side failed for good; the reason is on its last run)
    grading -> queued                            (retry after an infrastructure error or a lost worker)
    received/queued -> superseded                (a newer upload arrived before grading started: not graded)
    superseded -> received                       (the newer upload was rejected or failed: this one is
                                                  the latest accepted work again, and is graded after all)
    graded/rejected/error -> queued              (an operator asks for grading again: `manage.py regrade`)

    ``status`` and ``status_changed_at`` are a summary for the pages to filter
    on; the attempts themselves are grading.models.GradingRun rows (worker,
    heartbeat, outcome, error). Both are written only by grading.lifecycle
    (every status change sets ``status_changed_at``, with a conditional UPDATE
    so two workers cannot both win). ``grading_sent_at`` says when the pending
    grading message was sent, ``grading_sent_by`` who sent it and
    ``grading_task_id`` which one it is (also set when the send failed, with no
    time: the sweep sends it again at its next pass). The sweep judges from
    these alone whether a message was lost (grading.lifecycle.due_for_sending).

    ``is_latest`` marks the upload under review: the invitation's newest upload
    that is not rejected or error (the newest of all when every one was), kept
    on exactly one row per invitation, in the same transaction as the upload or
    the status change that moves it, under the invitation's row lock. A
    superseded upload never keeps the flag: when it falls back to one, that
    one goes back to grading.
    """

    class Status(models.TextChoices):
        RECEIVED = "received"
        QUEUED = "queued"
        GRADING = "grading"
        GRADED = "graded"
        REJECTED = "rejected"
        ERROR = "error"
        SUPERSEDED = "superseded"

    class Sender(models.TextChoices):
        """Who sent the pending grading message. A retry waits out its countdown on a worker, out of the queue."""

        UPLOAD = "upload", "the upload, once stored"
        RETRY = "retry", "the worker, to retry after a failure on our side"
        SWEEP = "sweep", "the sweep (the last message was lost, or the broker did not take it)"
        WORKER_DIED = "worker died", "the sweep or a restarted worker (the worker grading it died)"
        REINSTATED = "reinstated", "grading of a newer upload (refused or failed: this one is the latest again)"
        REGRADE = "regrade", "an operator (manage.py regrade, or the admin)"

    FINISHED = (Status.GRADED, Status.REJECTED, Status.ERROR, Status.SUPERSEDED)
    # Known not to be accepted work: never under review while an accepted upload exists.
    REFUSED = (Status.REJECTED, Status.ERROR)

    invitation = models.ForeignKey(Invitation, on_delete=models.CASCADE, related_name="submissions")
    archive = models.FileField(upload_to="uploads/", max_length=300)
    sha256 = models.CharField(max_length=64, db_index=True)
    size = models.PositiveBigIntegerField()
    original_name = models.CharField(max_length=255, blank=True)
    via = models.CharField(max_length=10, default="browser")  # browser | gate | hosted (a hosted session's Submit)
    uploaded_at = models.DateTimeField(default=timezone.now, db_index=True)
    is_latest = models.BooleanField(default=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RECEIVED, db_index=True)
    status_changed_at = models.DateTimeField(default=timezone.now, db_index=True)
    grading_sent_at = models.DateTimeField(null=True, blank=True,
                                           help_text="When the pending grading message was sent.")
    grading_task_id = models.CharField(max_length=64, blank=True,
                                       help_text="The id of the last grading message sent (or tried) while it waits.")
    grading_sent_by = models.CharField(max_length=12, choices=Sender.choices, blank=True,
                                       help_text="Who sent (or tried to send) the pending grading message.")
    reject_reason = models.TextField(blank=True)
    # why a field of its own: the candidate is told only what is known when the upload arrives (see
    # docs/evidence.md, "What the candidate sees of grading"); the worker's own verdict is reject_reason.
    unpack_refusal = models.TextField(
        blank=True, help_text="Why the zip cannot be unpacked, found as it arrived; '' when it can.")
    # why a digest of the files and not the zip's sha256: every zip of the same files differs (its entries'
    # time), and the deadline's submit must tell a workspace changed since its last submission from one not.
    files_digest = models.CharField(max_length=64, blank=True,
                                    help_text="A hosted submission: sha256 over the names and contents of its "
                                              "files (actions.files_digest); '' for an uploaded zip.")
    at_deadline = models.BooleanField(default=False,
                                      help_text="Submitted by the server itself when the deadline plus grace "
                                                "passed: the hosted workspace as it was then.")
    earlier_submit_at = models.DateTimeField(null=True, blank=True,
                                             help_text="A submission at the deadline: when the candidate's own "
                                                       "last submission was, if they made one.")
    for_deadline = models.DateTimeField(null=True, blank=True,
                                        help_text="A submission at the deadline: the deadline it was made for "
                                                  "(an extension gives the workspace another); empty for one "
                                                  "made before this was kept whose deadline moved since.")

    objects = SubmissionQuerySet.as_manager()

    class Meta:
        ordering = ["-uploaded_at", "-pk"]
        indexes = [models.Index(fields=["is_latest", "status"])]
        constraints = [
            # why: two sweeps at once (the serving host and a `serve_workspaces --once`) must not both
            # submit a deadline's state; the workspace is frozen then, so there is only one. A deadline
            # extended after it passed reopens the workspace, and the new deadline gets its own.
            models.UniqueConstraint(fields=["invitation", "for_deadline"], condition=models.Q(at_deadline=True),
                                    name="one_submission_at_each_deadline_per_invitation"),
        ]

    def __str__(self) -> str:
        return f"submission {self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def candidate_status(self) -> str:
        """What the candidate's pages say of this upload: "rejected" (cannot be unpacked) or "received".

        Decided once, when the upload arrives, from its bytes alone: nothing the
        worker does later (grading, graded, superseded, error) reaches the
        candidate, so no candidate code run in grading can signal through the
        time at which their page changes.
        """
        return self.Status.REJECTED if self.unpack_refusal else self.Status.RECEIVED

    @property
    def late_minutes(self) -> int | None:
        """Minutes after the candidate's deadline this upload came, rounded up; None when on time.

        Uploads are accepted until the deadline plus the grace period, so a
        late one is always within grace; reviewers are told it was late. A
        submission at the deadline is not late: the server made it (``at_deadline``).
        """
        deadline = self.invitation.deadline
        if deadline is None or self.uploaded_at <= deadline or self.at_deadline:
            return None
        return math.ceil((self.uploaded_at - deadline).total_seconds() / 60)


class ModelExchangeQuerySet(models.QuerySet):
    def answered(self) -> ModelExchangeQuerySet:
        """Exchanges whose reply reached the candidate whole: the turns a conversation goes on from, in order."""
        return (self.filter(finished=True, error="", client_gone=False).exclude(reply="")
                .order_by("at", "pk"))


class ModelExchange(models.Model):
    """One request through the model window (sessions_app/model_window/window.py) and what came back.

    Written in two steps by sessions_app.actions: reserved (``finished`` False)
    before the upstream is called, so the caps count it from then on, and
    finished once when the reply ended or failed. ``messages`` is the exact
    list sent upstream and ``options`` the request's other keys as sent (model,
    max_tokens, temperature...); ``reply`` the text the candidate's client was
    sent (a stream's text up to where the client left), ``client_gone`` whether
    the client closed the connection before the reply ended, ``error`` what
    went wrong upstream in words ("" when nothing did). Token counts come from
    the upstream's usage when it gives them, else they are estimated (see
    upstream.rough_tokens); while reserved they hold the estimate of the
    prompt and the max_tokens granted. The upstream key is never stored.

    ``conversation`` numbers the invitation's conversations from 1: an exchange
    that continues one sent its earlier turns in ``messages`` (window.history),
    one that starts one (a "New conversation", ``gate ask --new``) did not.
    ``artifact`` is where the server wrote the reply in a hosted workspace
    (artifacts/model.md, model-2.md...), "" when it wrote none.
    """

    invitation = models.ForeignKey(Invitation, on_delete=models.CASCADE, related_name="model_exchanges")
    at = models.DateTimeField(default=timezone.now, db_index=True)
    messages = models.JSONField(default=list)
    reply = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True)
    streamed = models.BooleanField(default=False)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    tokens_estimated = models.BooleanField(default=False, help_text="The upstream gave no usage; counted roughly.")
    latency_s = models.FloatField(default=0.0)
    error = models.CharField(max_length=500, blank=True)
    options = models.JSONField(default=dict, blank=True, help_text="The request's keys sent besides the messages.")
    client_gone = models.BooleanField(default=False, help_text="The client left before the reply ended.")
    finished = models.BooleanField(default=True, help_text="False while the upstream call is under way.")
    conversation = models.PositiveIntegerField(default=1, help_text="The invitation's conversation, from 1.")
    artifact = models.CharField(max_length=100, blank=True,
                                help_text="Where the server wrote the reply in a hosted workspace.")

    objects = ModelExchangeQuerySet.as_manager()

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"model exchange at {self.at:%H:%M:%S}" + (f" ({self.error})" if self.error else "")

    @property
    def prompt(self) -> str:
        """The text of the last user message: what the candidate asked in this exchange."""
        for message in reversed(self.messages or []):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, list):
                    return "".join(p.get("text", "") for p in content if isinstance(p, dict))
                return content if isinstance(content, str) else ""
        return ""

    @property
    def earlier_messages(self) -> int:
        """How many messages were sent before the prompt (a conversation's earlier turns)."""
        return max(len(self.messages or []) - 1, 0)


class Workspace(models.Model):
    """The hosted session of one invitation: its sandbox uid and what happened to its shell.

    The files live under TAKEHOME_WORKSPACES_DIR (see sessions_app.hosted.workspaces);
    this row says which uid owns them. A uid is unique among open workspaces
    of one host (``closed`` False), so two shells never share one; a closed workspace (its
    deadline passed, frozen) gives its uid back. ``last_seen_at`` moves with
    the candidate's activity (throttled, see workspaces.touch); the sweep of
    ``manage.py serve_workspaces`` stops shells idle too long
    (``shell_stopped_at``) and freezes workspaces past the deadline plus grace,
    then submits the frozen files when they changed since the last submission
    (``deadline_settled_at``: done, once per deadline). A deadline extended after
    it passed reopens a frozen workspace on its host (open again, under a free uid).
    Each of these steps is a function of sessions_app.hosted.workspaces, the
    only writer of this row.
    """

    invitation = models.OneToOneField(Invitation, on_delete=models.CASCADE, related_name="workspace")
    host = models.CharField(max_length=255, default="", db_index=True,
                            help_text="The server whose disk and shells hold this workspace (TAKEHOME_WORKSPACE_HOST).")
    uid = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now, db_index=True)
    shell_stopped_at = models.DateTimeField(null=True, blank=True)
    frozen_at = models.DateTimeField(null=True, blank=True)
    closed = models.BooleanField(default=False)
    deadline_settled_at = models.DateTimeField(
        null=True, blank=True, help_text="When the sweep settled the deadline's submit: the frozen files "
                                         "submitted, or found unchanged since the last submission.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["host", "uid"], condition=models.Q(closed=False),
                                    name="workspace_uid_unique_while_open_on_its_host"),
        ]

    def __str__(self) -> str:
        return f"workspace of invitation {self.invitation_id} (uid {self.uid})"
