"""What grading stored: each attempt to grade a submission, its evidence, and the reviewers' marks."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import models
from django.utils import timezone

from sessions_app.models import Submission

from .engine import rubric, similarity


class InvalidTransition(Exception):
    def __init__(self, current: str, wanted: str, what: str = "submission"):
        super().__init__(f"cannot move a {what} from {current} to {wanted}")
        self.current, self.wanted = current, wanted


class GradingRun(models.Model):
    """One attempt to grade a submission: which worker process took it, whether it is alive, how it ended.

    running -> graded | rejected | error    (the submission ends the same way)
            -> retried                      (our side failed; the task sends itself again)
            -> lost                         (its worker died: no heartbeat; the submission is sent again)

    A row is created when a worker starts grading (grading.lifecycle.start_run),
    so the rows are the attempts: the submission's attempt count is its number
    of runs. While running, the worker's process writes ``heartbeat_at`` every
    TAKEHOME_GRADING_HEARTBEAT_S; a run whose heartbeat is older than
    TAKEHOME_GRADING_LOST_AFTER_S is lost. ``error`` is for operators only,
    never shown to candidates. Written only by grading.lifecycle and these methods.
    """

    class Outcome(models.TextChoices):
        RUNNING = "running"
        GRADED = "graded"
        REJECTED = "rejected"
        ERROR = "error"
        RETRIED = "retried"
        LOST = "lost"

    # The ends that give the submission a result of its own (evidence or an error):
    # the runs after the last of them count toward grading.lifecycle.MAX_ATTEMPTS.
    FINAL = (Outcome.GRADED, Outcome.REJECTED, Outcome.ERROR)

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="runs")
    attempt = models.PositiveIntegerField()
    task_id = models.CharField(max_length=64, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="The Celery worker's hostname.")
    pid = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    heartbeat_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # why: the sweep reads from it how far the broker's queue has moved (grading.lifecycle.queue_passed)
    message_sent_at = models.DateTimeField(null=True, blank=True, db_index=True,
                                           help_text="When the message this run started from was sent through "
                                                     "the queue; blank for a retry or a copy sent before the last one.")
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.RUNNING)
    error = models.TextField(blank=True, help_text="For operators only; never shown to candidates.")

    class Meta:
        ordering = ["submission", "attempt"]
        constraints = [
            models.UniqueConstraint(fields=["submission", "attempt"], name="gradingrun_one_per_attempt"),
        ]
        indexes = [models.Index(fields=["outcome", "heartbeat_at"], name="gradingrun_outcome_heartbeat")]

    def __str__(self) -> str:
        return f"attempt {self.attempt} of submission {self.submission_id} ({self.outcome})"

    def beat(self) -> bool:
        """Note that the run's process is alive; False when the run is no longer running (it was taken back)."""
        # why one tiny UPDATE in autocommit: it runs every few seconds beside the
        # grading, and on SQLite must hold the write lock for as short as can be.
        return bool(GradingRun.objects.filter(pk=self.pk, outcome=self.Outcome.RUNNING)
                    .update(heartbeat_at=timezone.now()))

    def end(self, outcome: str, error: str = "") -> None:
        """Close a running run with its outcome; raises InvalidTransition if it was closed already."""
        now = timezone.now()
        fields = {"outcome": outcome, "finished_at": now, "error": error[-20000:]}
        if not GradingRun.objects.filter(pk=self.pk, outcome=self.Outcome.RUNNING).update(**fields):
            self.refresh_from_db(fields=["outcome"])
            raise InvalidTransition(self.outcome, outcome, "grading run")
        for name, value in fields.items():
            setattr(self, name, value)


class Evidence(models.Model):
    """The grader's findings for one submission, in the `grade_zip` JSON shape.

    Written by grading.pipeline only, replaced whole when a submission is
    graded again (grading is idempotent: the same zip gives the same evidence).
    Evidence helps reviewers; it never fills a rubric cell by itself.
    """

    submission = models.OneToOneField(Submission, on_delete=models.CASCADE, related_name="evidence")
    data = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)
    grader_version = models.CharField(max_length=20)
    duration_s = models.FloatField(default=0)
    # Copied out of ``data`` when it is saved, so the queue can say it without reading the evidence.
    tampered = models.BooleanField(default=False, help_text="A rerun's verdicts were changed from inside.")

    def __str__(self) -> str:
        return f"evidence for {self.submission_id}"


class Cell(models.TextChoices):
    """The four rubric cells as database choices, in grading.engine.rubric's one order.

    The ids and default labels come from grading.engine.rubric; a packet version
    words each cell its own way (PacketVersion.rubric_cells()).
    """

    RED_LOG = rubric.RED_LOG.key, rubric.RED_LOG.label
    MODEL_WAITED = rubric.MODEL_WAITED.key, rubric.MODEL_WAITED.label
    REFUSAL_SPECIFIC = rubric.REFUSAL_SPECIFIC.key, rubric.REFUSAL_SPECIFIC.label
    TEST_NAMES_BUG = rubric.TEST_NAMES_BUG.key, rubric.TEST_NAMES_BUG.label


# The cells that must be scored before the diff unfolds (the article's reading order).
CELLS_BEFORE_DIFF = rubric.BEFORE_DIFF


class ReviewQuerySet(models.QuerySet):
    def submitted(self):
        return self.filter(submitted_at__isnull=False)


class Review(models.Model):
    """One reviewer's reading of one submission.

    draft (submitted_at is None) -> submitted (final: marks no longer change)

    A reviewer sees other reviewers' marks only once their own review is
    submitted, so every review is blind; and because a submitted review is
    final, what they see afterwards cannot change what they said.
    """

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reviews")
    started_at = models.DateTimeField(default=timezone.now)
    submitted_at = models.DateTimeField(null=True, blank=True)
    # Notes typed on a cell before pass or fail was chosen (cell key -> note); moved onto the mark with the choice.
    draft_notes = models.JSONField(default=dict, blank=True)
    # When the note kept for each cell (a draft or the mark's) was typed: cell key -> stamp (see take_note_stamp).
    note_stamps = models.JSONField(default=dict, blank=True)

    objects = ReviewQuerySet.as_manager()

    class Meta:
        ordering = ["submission", "submitted_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["submission", "reviewer"], name="review_one_per_reviewer"),
        ]
        indexes = [
            models.Index(fields=["reviewer", "submitted_at"], name="review_reviewer_submitted"),
            models.Index(fields=["submission", "submitted_at"], name="review_submission_submitted"),
        ]

    def __str__(self) -> str:
        return f"review of {self.submission_id} by {self.reviewer_id}"

    @property
    def is_submitted(self) -> bool:
        return self.submitted_at is not None

    def take_note_stamp(self, cell: str, stamp: int | None) -> bool:
        """Whether a save of ``cell``'s note typed at ``stamp`` may replace the note kept; if so it is noted.

        A stamp is milliseconds since 1970 on the server's clock, as the page
        reckons it when the note is typed (static/grading/review.js). A save
        typed before the note kept is refused, in whatever order the saves
        arrive. A save without a stamp (a page without the script, or one
        older than the stamps) replaces the note as it always did, and is
        stamped with the time it arrived. The caller saves the review, in the
        transaction that holds its row.
        """
        kept = self.note_stamps.get(cell)
        if stamp is None:
            stamp = max(clock_ms(), kept or 0)
        elif kept is not None and stamp < kept:
            return False
        self.note_stamps[cell] = stamp
        return True


def clock_ms() -> int:
    """The server's time in milliseconds since 1970: the clock the note stamps are counted on."""
    return time.time_ns() // 1_000_000


class Mark(models.Model):
    """One rubric cell of one review: pass or fail, with an optional note.

    Never summed, averaged or blended with the other cells: the four cells
    measure different things and are always shown side by side.
    """

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="marks")
    cell = models.CharField(max_length=20, choices=Cell.choices)
    passed = models.BooleanField()
    note = models.TextField(blank=True, max_length=2000)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["review", "cell"]
        constraints = [
            models.UniqueConstraint(fields=["review", "cell"], name="mark_one_per_cell"),
            models.CheckConstraint(condition=models.Q(cell__in=Cell.values), name="mark_cell_known"),
        ]

    def __str__(self) -> str:
        return f"{self.cell}: {'pass' if self.passed else 'fail'}"


class AgreementTally(models.Model):
    """Per packet, reviewer pair and rubric cell: the 2x2 table of their marks over the uploads both scored.

    Kept by grading.actions in the transaction that submits a review, so the
    debrief reads a few rows instead of joining every mark. Each pair has one
    row per cell: reviewer_a is the pair's lower user id, and a_pass_b_fail
    counts the uploads reviewer_a passed and reviewer_b failed.
    `manage.py rebuild_agreement` rebuilds every row from the submitted marks.
    """

    packet = models.ForeignKey("takehome.Packet", on_delete=models.CASCADE, related_name="+")
    reviewer_a = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    reviewer_b = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    cell = models.CharField(max_length=20, choices=Cell.choices)
    both_pass = models.IntegerField(default=0)
    a_pass_b_fail = models.IntegerField(default=0)
    a_fail_b_pass = models.IntegerField(default=0)
    both_fail = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["packet", "reviewer_a", "reviewer_b", "cell"], name="agreement_one_per_pair_cell"),
            models.CheckConstraint(condition=models.Q(reviewer_a__lt=models.F("reviewer_b")), name="agreement_pair_ordered"),
        ]

    def __str__(self) -> str:
        return f"{self.cell}: {self.reviewer_a_id}/{self.reviewer_b_id} on packet {self.packet_id}"


class Assignment(models.Model):
    """A reviewer asked to review one submission: its packet says how many reviewers each graded one gets.

    Written by grading.actions only: ``do_assign_reviewers`` when grading ends
    (and the sweep, for graded submissions still short of reviewers), spread
    by load; ``do_reassign_reviewer`` when a recruiter gives the review to
    someone else. An assignment is open while its submission is the upload
    under review and the reviewer has not submitted a review of it; the open
    ones are a reviewer's load and their "my queue".
    """

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="assignments")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments")
    assigned_at = models.DateTimeField(default=timezone.now)
    # None: the server assigned it (by load); else the recruiter who reassigned it.
    assigned_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")

    class Meta:
        ordering = ["submission", "assigned_at", "pk"]
        constraints = [
            # why: two reviews by one person are one opinion counted twice
            models.UniqueConstraint(fields=["submission", "reviewer"], name="assignment_one_per_reviewer"),
        ]
        indexes = [models.Index(fields=["reviewer", "submission"], name="assignment_reviewer_submission")]

    def __str__(self) -> str:
        return f"submission {self.submission_id} assigned to {self.reviewer_id}"



class LineComment(models.Model):
    """A reviewer's comment on one line of a submission's diff, kept with their review.

    Blind like the marks: another reviewer sees it only once their own review
    is submitted; final once this review is submitted. ``side`` and ``line``
    name the line (``old`` for a removed line, by its number before the
    change; ``new`` for any other, by its number after); ``snippet`` is that
    line's text as the grader stored it, so the debrief and the CSV can quote
    it. Written by grading.actions.do_save_line_comment only.
    """

    class Side(models.TextChoices):
        OLD = "old", "before the change"
        NEW = "new", "after the change"

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="comments")
    path = models.CharField(max_length=500)
    side = models.CharField(max_length=3, choices=Side.choices)
    line = models.PositiveIntegerField()
    snippet = models.CharField(max_length=500, blank=True)
    body = models.TextField(max_length=2000)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["review", "path", "side", "line"]
        constraints = [
            models.UniqueConstraint(fields=["review", "path", "side", "line"], name="linecomment_one_per_line"),
        ]

    def __str__(self) -> str:
        return f"{self.path}:{self.side}:{self.line}"

    @property
    def anchor(self) -> str:
        return f"{self.side}:{self.line}"


class SimilarityProfile(models.Model):
    """One graded submission's fingerprints, counted per channel (grading.engine.similarity).

    Written by grading.similarity only, when the submission is graded (and by
    `manage.py rebuild_similarity`); its Fingerprint rows are the index that
    finds the packet's other submissions sharing them.
    """

    submission = models.OneToOneField(Submission, on_delete=models.CASCADE, related_name="similarity_profile")
    packet = models.ForeignKey("takehome.Packet", on_delete=models.CASCADE, related_name="+")
    sizes = models.JSONField(default=dict, help_text="Channel -> how many fingerprints it kept.")
    measure_version = models.CharField(max_length=10)
    computed_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"fingerprints of {self.submission_id}"


class Fingerprint(models.Model):
    """One winnowed k-gram hash of one channel of a submission: the index fingerprint -> submissions.

    ``packet`` is copied from the submission so that the lookup of a packet's
    submissions sharing a hash is one walk of one index.
    """

    class Channel(models.TextChoices):
        PRODUCTION = similarity.PRODUCTION, similarity.CHANNEL_LABELS[similarity.PRODUCTION]
        TESTS = similarity.TESTS, similarity.CHANNEL_LABELS[similarity.TESTS]
        REFUSAL = similarity.REFUSAL, similarity.CHANNEL_LABELS[similarity.REFUSAL]
        PROMPT = similarity.PROMPT, similarity.CHANNEL_LABELS[similarity.PROMPT]

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="+")
    packet = models.ForeignKey("takehome.Packet", on_delete=models.CASCADE, related_name="+", db_index=False)
    channel = models.CharField(max_length=10, choices=Channel.choices)
    value = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["packet", "channel", "value", "submission"], name="fingerprint_lookup")]

    def __str__(self) -> str:
        return f"{self.channel} {self.value:x} of {self.submission_id}"


class SimilarMatch(models.Model):
    """Two submissions of one packet near-identical in one channel, with the score (stored both ways round).

    Written by grading.similarity only; listed on the review page once the
    viewer's four cells are marked, on the debrief and in its CSV.
    """

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="similar_matches")
    other = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=10, choices=Fingerprint.Channel.choices)
    score = models.FloatField(help_text="The Jaccard index of the two fingerprint sets, 0 to 1.")

    class Meta:
        ordering = ["submission", "-score", "other", "channel"]
        constraints = [
            models.UniqueConstraint(fields=["submission", "other", "channel"], name="similarmatch_one_per_channel"),
        ]

    def __str__(self) -> str:
        return f"{self.submission_id} ~ {self.other_id} ({self.channel} {self.score:.2f})"
