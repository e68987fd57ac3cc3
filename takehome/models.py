"""The recruiter's side: packets and their immutable versions, candidates, invitations."""

from __future__ import annotations

import base64
import hashlib
import shlex
from datetime import datetime, timedelta
from typing import ClassVar

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import get_random_string, salted_hmac

from grading.engine import rubric
from grading.engine.spec import PacketSpec, split_decoys

# The most reviewers a packet may ask for each submission (each reads the whole evidence).
MAX_REVIEWERS_PER_SUBMISSION = 5


class ImmutableRowError(Exception):
    """Raised on an attempt to change a row that must never change once written."""


class Packet(models.Model):
    """A take-home exercise. Its content lives in versions; the packet is the name."""

    slug = models.SlugField(unique=True)
    title = models.CharField(max_length=200)
    hide_candidate_names = models.BooleanField(
        default=False, help_text="Reviewers see a short code instead of the name."
    )
    # Hours after the link was sent at which a candidate who has not pressed Start is emailed a reminder,
    # ascending (takehome.reminders); empty: none.
    reminder_hours = models.JSONField(default=list, blank=True)
    # How many reviewers each graded submission is assigned (grading.actions.do_assign_reviewers), spread by load.
    reviewers_per_submission = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_REVIEWERS_PER_SUBMISSION)],
        help_text="Reviewers assigned to each graded submission.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("takehome:packet-detail", args=[self.slug])

    def latest_version(self) -> PacketVersion | None:
        return self.versions.order_by("-number").first()

    def invitable_version(self) -> PacketVersion | None:
        """The version candidates are invited to: the newest one that may be (published or unchecked).

        A newer draft, or one still being checked, does not lock invitations out: they go to
        the last good version until it is fixed (the invite page and command say so).
        """
        return next((v for v in self.versions.order_by("-number") if v.refusal_to_invite() is None), None)


class PacketVersion(models.Model):
    """One frozen state of a packet. Editing a packet writes a new version.

    An invitation points at one version forever, so what a candidate was given
    and what their work is graded against never change under them.
    """

    packet = models.ForeignKey(Packet, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    prompt = models.TextField(help_text="Markdown, shown to the candidate.")
    test_command = models.CharField(max_length=200, default="python -m pytest -q")
    protected_paths = models.JSONField(default=list, blank=True)
    forbidden_patterns = models.JSONField(default=dict, blank=True)
    refusal_hints = models.JSONField(default=dict, blank=True)
    time_limit_minutes = models.PositiveIntegerField(default=90)
    # The environment the tests run in (grading/engine/runner.py): a pip requirements
    # file, pinned, from the package index only ("" = pytest alone), and a
    # Python version such as "3.11" ("" = the server's default interpreter).
    requirements = models.TextField(blank=True, default="")
    python_version = models.CharField(max_length=20, blank=True, default="")
    # Who provides the model (sessions_app/model_window/window.py): "" = provided when
    # TAKEHOME_MODEL_URL is set, else own; "provided" = this server's model
    # window; "own" = the candidate's own model; "none" = no model at all.
    # model_name overrides TAKEHOME_MODEL_NAME for this version ("" = the setting).
    class ModelPolicy(models.TextChoices):
        DEFAULT = "", "Provided when this server has a model, else the candidate's own"
        PROVIDED = "provided", "Provided by this server (the model window)"
        OWN = "own", "The candidate's own model"
        NONE = "none", "No model"

    model_policy = models.CharField(max_length=10, blank=True, default="", choices=ModelPolicy.choices)
    model_name = models.CharField(max_length=200, blank=True, default="")
    # How candidates work (step 10): "zip" = download, work on their machine with
    # gate.py, upload; "hosted" = a workspace on this server with a terminal in the
    # browser, the server running and recording the tests; "both" = the candidate picks.
    class WorkMode(models.TextChoices):
        ZIP = "zip", "Download and upload a zip (the candidate's own machine)"
        HOSTED = "hosted", "A hosted workspace (a terminal in the browser)"
        BOTH = "both", "Both: the candidate picks"

    work_mode = models.CharField(max_length=10, default=WorkMode.ZIP, choices=WorkMode.choices)
    # The rubric in this version's words: cell key -> label, and cell key -> what passes and fails it.
    rubric = models.JSONField(default=dict, blank=True)
    rubric_definitions = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["packet", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["packet", "number"], name="packet_version_number_unique")
        ]

    def __str__(self) -> str:
        return f"{self.packet.slug} v{self.number}"

    # A version's state, from its self-checks (PacketCheck): published when the
    # last finished check passed; a draft when it failed; checking before any
    # finished; unchecked when it has none (versions made before self-checks
    # existed: still invitable, so an upgrade locks no one out).
    PUBLISHED, DRAFT, CHECKING, UNCHECKED = "published", "draft", "checking", "unchecked"

    def save(self, *args, **kwargs) -> None:
        # why: an invitation's meaning depends on its version never changing.
        if self.pk is not None:
            raise ImmutableRowError("A packet version never changes; create a new version instead.")
        super().save(*args, **kwargs)

    @property
    def time_limit(self) -> timedelta:
        return timedelta(minutes=self.time_limit_minutes)

    @property
    def model_in_use(self) -> str:
        """The model name the window asks for: this version's, else TAKEHOME_MODEL_NAME."""
        return self.model_name or settings.MODEL_NAME

    def rubric_cells(self) -> tuple[rubric.RubricCell, ...]:
        """The four cells in the one order, in this version's words (defaults where a word is missing)."""
        return rubric.cells(self.rubric, self.rubric_definitions)

    def rubric_labels(self) -> dict[str, str]:
        return {c.key: c.label for c in self.rubric_cells()}

    def last_check(self) -> PacketCheck | None:
        """The newest self-check of this version, finished or not."""
        return self.checks.order_by("-pk").first()

    def last_finished_check(self) -> PacketCheck | None:
        return self.checks.exclude(status__in=PacketCheck.OPEN).order_by("-pk").first()

    @property
    def state(self) -> str:
        """published, draft, checking or unchecked (see PacketCheck)."""
        return self._state_after(self.last_finished_check(), self.checks.exists())

    def last_check_and_state(self) -> tuple[PacketCheck | None, str]:
        """The newest self-check and the state, both from one read of the checks.

        why one read: read one after the other, a check that finished between them
        put "Published" above "A worker is running the packet" on the packet's page.
        """
        checks = list(self.checks.order_by("-pk"))
        finished = next((c for c in checks if c.status not in PacketCheck.OPEN), None)
        return (checks[0] if checks else None), self._state_after(finished, bool(checks))

    def _state_after(self, finished: PacketCheck | None, any_check: bool) -> str:
        if finished is not None:
            return self.PUBLISHED if finished.status == PacketCheck.Status.PASSED else self.DRAFT
        return self.CHECKING if any_check else self.UNCHECKED

    def refusal_to_invite(self) -> str | None:
        """Why candidates cannot be invited to this version, or None when they can."""
        state = self.state
        if state == self.DRAFT and self.last_finished_check().status == PacketCheck.Status.ERROR:
            return (f"Version {self.number} of {self.packet.title} is a draft: its self-check could not run. "
                    "Run the self-check again on the packet's page once a worker is running.")
        if state == self.DRAFT:
            return (f"Version {self.number} of {self.packet.title} is a draft: its self-check failed. "
                    "Fix the failing check with a new version (Edit), then invite.")
        if state == self.CHECKING:
            return (f"Version {self.number} of {self.packet.title} is still being checked; it can be "
                    "invited to once every check passes (a worker must be running).")
        return None

    def files_of(self, kind: str) -> dict[str, bytes]:
        return {f.path: bytes(f.content) for f in self.files.all() if f.kind == kind}

    def to_spec(self) -> PacketSpec:
        """The plain-data view the grading core works on."""
        return PacketSpec(
            slug=self.packet.slug,
            version=self.number,
            fixture=self.files_of(PacketFile.Kind.FIXTURE),
            solution=self.files_of(PacketFile.Kind.SOLUTION),
            reference_tests=self.files_of(PacketFile.Kind.REFERENCE_TEST),
            decoys=split_decoys(self.files_of(PacketFile.Kind.DECOY)),
            protected_paths=tuple(self.protected_paths),
            forbidden_patterns=dict(self.forbidden_patterns),
            refusal_hints=dict(self.refusal_hints),
            test_command=tuple(shlex.split(self.test_command)),
            time_limit_minutes=self.time_limit_minutes,
            requirements=self.requirements,
            python=self.python_version,
        )


class PacketCheck(models.Model):
    """One run of a packet version's self-check (takehome/selfcheck.py), with each check's outcome and log.

    QUEUED -> RUNNING -> PASSED | FAILED   (the packet's code decided)
    QUEUED/RUNNING -> ERROR                 (our side failed: no sandbox; run it again)
    A version may be checked again; its state follows its last finished check.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        PASSED = "passed"
        FAILED = "failed"
        ERROR = "error"

    OPEN = (Status.QUEUED, Status.RUNNING)

    version = models.ForeignKey(PacketVersion, on_delete=models.CASCADE, related_name="checks")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # [{"check_id", "title", "passed", "summary", "log"}, ...] in takehome.selfcheck.CHECKS order
    results = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-pk"]

    def __str__(self) -> str:
        return f"check of {self.version}: {self.status}"

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN

    def failed_checks(self) -> list[dict]:
        return [r for r in self.results if not r.get("passed")]


class PacketFile(models.Model):
    """One file of a packet version: part of the fixture, the solution or the hidden tests."""

    class Kind(models.TextChoices):
        FIXTURE = "fixture", "Fixture (handed to the candidate)"
        SOLUTION = "solution", "Reference solution (fixed production file)"
        REFERENCE_TEST = "reference_test", "Hidden reference test"
        DECOY = "decoy", "Decoy (a plausible wrong fix the candidate's test must reject)"

    version = models.ForeignKey(PacketVersion, on_delete=models.CASCADE, related_name="files")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    path = models.CharField(max_length=500)
    content = models.BinaryField()

    class Meta:
        ordering = ["kind", "path"]
        constraints = [
            models.UniqueConstraint(fields=["version", "kind", "path"], name="packet_file_unique")
        ]

    def __str__(self) -> str:
        return f"{self.version} {self.kind}:{self.path}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ImmutableRowError("Packet files belong to an immutable version.")
        super().save(*args, **kwargs)

    def text(self) -> str | None:
        """The content as text, or None when it is not UTF-8 (shown as binary)."""
        try:
            return bytes(self.content).decode("utf-8")
        except UnicodeDecodeError:
            return None


class KeptUpload(models.Model):
    """A zip chosen on a packet form that was refused, kept for the person who chose it (takehome.kept_uploads).

    Browsers never fill a file input again, so without it every refused
    submit would mean choosing every zip again. One row per person and
    content; the form carries a signed reference that only that person can
    use. A save that uses it deletes it; any left over goes after
    ``kept_uploads.KEPT_FOR`` (takehome.tasks.forget_kept_uploads).
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    sha256 = models.CharField(max_length=64)
    name = models.CharField(max_length=255)  # as the browser sent it, shown as "kept: name (size)"
    size = models.PositiveIntegerField()
    content = models.BinaryField()
    kept_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "sha256"], name="kept_upload_owner_content")]

    def __str__(self) -> str:
        return f"{self.name} kept for user {self.owner_id}"


class Candidate(models.Model):
    name = models.CharField(max_length=200)
    email = models.EmailField(unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        # why: the debrief pages through candidates by name (shared.paging), at any depth.
        indexes = [models.Index(fields=["name", "id"], name="candidate_name")]

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


def hash_token(token: str) -> str:
    """sha256 of a raw link token.

    why a plain hash and no slow KDF: tokens are 192 random bits, so there is
    nothing to brute-force; the hash only keeps a database dump from holding
    working links.
    """
    return hashlib.sha256(token.encode()).hexdigest()


class InvitationQuerySet(models.QuerySet):
    def by_token(self, token: str) -> Invitation | None:
        """The live invitation behind a raw token, or None (unknown or revoked)."""
        if not token or len(token) > 100:
            return None
        return self.filter(token_hash=hash_token(token), revoked_at__isnull=True).first()

    def for_board(self):
        # why deferred: the board shows a version's number; its prompt, rubric and rules are read and
        # decoded for every row otherwise.
        return self.select_related("candidate", "packet_version__packet").defer(
            *(f"packet_version__{name}" for name in ("prompt", "protected_paths", "forbidden_patterns",
                                                     "refusal_hints", "requirements", "rubric",
                                                     "rubric_definitions"))).order_by("-created_at")


class Invitation(models.Model):
    """A candidate's access to one packet version, through a link.

    The database keeps only a hash of the link's token. The token itself is an
    HMAC of a random nonce under SECRET_KEY, so the server can show the link
    again (copy, resend) while a database dump alone reveals no working link.
    If SECRET_KEY changes, links already sent keep working (the stored hash is
    unchanged) but the server can no longer rebuild them: resending then issues
    a new link. See `link_token()`.

    Status moves forward only: created -> sent -> opened -> started -> submitted.

    Its life (``LIFECYCLE_FIELDS``) is written only by the methods below (a test
    keeps it so); the actions call them and add what goes with each step (the
    audit trail, the funnel, the candidate's terminals). Its clock is read here
    too, one way for every page: ``phase``, ``seconds_left``, ``upload_closes_at``.
    """

    # The clock's phases (``phase``): before Start; running until the deadline; the grace
    # after it, while uploads and gate steps are still taken; closed, the work final.
    NOT_STARTED, RUNNING, GRACE, CLOSED = "not_started", "running", "grace", "closed"
    LIFECYCLE_FIELDS = ("sent_at", "opened_at", "started_at", "deadline", "submitted_at", "revoked_at")

    class Status(models.TextChoices):
        CREATED = "created"
        SENT = "sent"
        OPENED = "opened"
        STARTED = "started"
        SUBMITTED = "submitted"
        REVOKED = "revoked"

    candidate = models.ForeignKey(Candidate, on_delete=models.PROTECT, related_name="invitations")
    packet_version = models.ForeignKey(
        PacketVersion, on_delete=models.PROTECT, related_name="invitations"
    )
    # The packet whose invitations board lists this invitation: its version's, set on creation, never changed.
    # why a column of its own: the board pages a packet's invitations of every version by one index,
    # (board_packet, created_at, id); through the version, the database sorted all of them for each page.
    board_packet = models.ForeignKey(Packet, on_delete=models.PROTECT, related_name="+", editable=False)
    token_nonce = models.CharField(max_length=64, editable=False)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        # why: the invitations board pages a packet's invitations by keyset on (created_at, id), newest first.
        indexes = [models.Index(fields=["board_packet", "created_at", "id"], name="invitation_packet_created")]

    def __str__(self) -> str:
        return f"{self.candidate.name} for {self.packet_version}"

    def save(self, *args, **kwargs) -> None:
        if self._state.adding and self.packet_version_id is not None:
            self.board_packet_id = self.packet_version.packet_id
        super().save(*args, **kwargs)

    @staticmethod
    def _token_for(nonce: str) -> str:
        return salted_hmac("takehome.invitation-link", nonce, algorithm="sha256").hexdigest()[:48]

    def issue_token(self) -> str:
        """Give this (unsaved) invitation a fresh token; returns the raw token."""
        self.token_nonce = get_random_string(32)
        token = self._token_for(self.token_nonce)
        self.token_hash = hash_token(token)
        return token

    def link_token(self) -> str | None:
        """The raw token, rebuilt from the nonce; None if SECRET_KEY has changed since."""
        token = self._token_for(self.token_nonce)
        return token if hash_token(token) == self.token_hash else None

    def link(self) -> str | None:
        token = self.link_token()
        if token is None:
            return None
        return settings.SITE_URL + reverse("sessions_app:landing", args=[token])

    @property
    def status(self) -> str:
        if self.revoked_at:
            return self.Status.REVOKED
        for status, at in (
            (self.Status.SUBMITTED, self.submitted_at),
            (self.Status.STARTED, self.started_at),
            (self.Status.OPENED, self.opened_at),
            (self.Status.SENT, self.sent_at),
        ):
            if at:
                return status
        return self.Status.CREATED

    def get_status_display(self) -> str:
        return self.Status(self.status).label

    # --- the clock ---------------------------------------------------------------------------

    def deadline_if_started(self, now: datetime) -> datetime:
        """The deadline a Start at ``now`` sets: the version's time limit later."""
        return now + self.packet_version.time_limit

    @property
    def upload_closes_at(self) -> datetime | None:
        """The deadline plus the grace period: the last moment an upload (or a gate step) is accepted."""
        if self.deadline is None:
            return None
        return self.deadline + timedelta(seconds=settings.UPLOAD_GRACE_S)

    def phase_at(self, now: datetime) -> str:
        """NOT_STARTED, RUNNING, GRACE (deadline passed, uploads still open) or CLOSED (final), at ``now``."""
        if self.started_at is None or self.deadline is None:
            return self.NOT_STARTED
        if now <= self.deadline:
            return self.RUNNING
        return self.GRACE if now <= self.upload_closes_at else self.CLOSED

    @property
    def phase(self) -> str:
        """The phase now (``phase_at``); pages that judge many invitations at one instant call phase_at."""
        return self.phase_at(timezone.now())

    def seconds_left_at(self, now: datetime) -> int | None:
        """Whole seconds from ``now`` until the deadline, never below 0; None before Start."""
        if self.deadline is None:
            return None
        return max(0, int((self.deadline - now).total_seconds()))

    @property
    def seconds_left(self) -> int | None:
        return self.seconds_left_at(timezone.now())

    def seconds_until_closed_at(self, now: datetime) -> float | None:
        """Seconds from ``now`` until uploads close (below 0 once they have); None before Start."""
        closes = self.upload_closes_at
        return None if closes is None else (closes - now).total_seconds()

    # --- its life: the only writers of LIFECYCLE_FIELDS ----------------------------------------

    def lock(self) -> None:
        """Lock this invitation's row until the transaction ends, and read its life again from it.

        why: two Starts, two uploads or two extensions at once must each see
        what the other wrote. Call it inside a transaction.
        """
        fresh = type(self).objects.select_for_update().only(*self.LIFECYCLE_FIELDS).get(pk=self.pk)
        for name in self.LIFECYCLE_FIELDS:
            setattr(self, name, getattr(fresh, name))

    def mark_sent(self) -> None:
        """The link was emailed (again): sent_at is now."""
        self.sent_at = timezone.now()
        self.save(update_fields=["sent_at"])

    def mark_opened(self) -> bool:
        """The candidate opened the link: remember the first time. Whether this call was the first."""
        if self.opened_at is not None:
            return False
        now = timezone.now()
        # why a conditional update: two first views at once must count as one opening.
        first = bool(type(self).objects.filter(pk=self.pk, opened_at__isnull=True).update(opened_at=now))
        self.opened_at = now
        return first

    def start_clock(self) -> bool:
        """Start the clock: started_at now, the deadline after the version's time limit (opened now, if not yet).

        Call it on a row taken with lock(). Returns False, changing nothing, when the clock already runs.
        """
        if self.started_at is not None:
            return False
        now = timezone.now()
        self.started_at, self.deadline = now, self.deadline_if_started(now)
        self.opened_at = self.opened_at or now
        self.save(update_fields=["started_at", "deadline", "opened_at"])
        return True

    def mark_submitted(self, at: datetime) -> None:
        """An upload was stored at ``at``: submitted_at is the latest upload's time. Call it on a locked row."""
        self.submitted_at = at
        self.save(update_fields=["submitted_at"])

    def extend_deadline(self, minutes: int) -> None:
        """Move the deadline ``minutes`` later; a passed deadline reopens from now. Call it on a locked, started row."""
        if self.deadline is None:
            raise ValueError("an invitation that has not started has no deadline to extend")
        self.deadline = max(self.deadline, timezone.now()) + timedelta(minutes=minutes)
        self.save(update_fields=["deadline"])

    def revoke(self) -> bool:
        """Make the link stop working. Whether this call revoked it (False: it already was)."""
        if self.revoked_at is not None:
            return False
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
        return True

    @property
    def packet(self) -> Packet:
        return self.packet_version.packet

    def hidden_label(self) -> str:
        """The candidate as reviewers see them when the packet hides names: "Candidate K7QX2M".

        why a keyed hash and not the id: ids are a sequence, so their gaps would
        tell a reviewer how many others were invited and in which order; an
        HMAC under SECRET_KEY is stable, reveals nothing, and cannot be worked
        back to the id. 30 bits: two candidates of one packet share a code
        about once in a million pairs.
        """
        digest = salted_hmac("takehome.hidden-candidate", str(self.pk), algorithm="sha256").digest()
        return "Candidate " + base64.b32encode(digest).decode()[:6]


# --- the recruiter's desk: hiring decisions and the audit trail ----------------------------


class Decision(models.Model):
    """A person's hiring decision on one candidate's invitation: advance, decline or undecided.

    Set by a recruiter (takehome.actions.do_decide); never computed from the
    rubric's four cells and never shown as a score. One row per invitation,
    overwritten by the next decision; every decision is also an AuditEvent.
    """

    class Choice(models.TextChoices):
        UNDECIDED = "undecided", "Undecided"
        ADVANCE = "advance", "Advance"
        DECLINE = "decline", "Decline"

    invitation = models.OneToOneField(Invitation, on_delete=models.CASCADE, related_name="decision")
    choice = models.CharField(max_length=10, choices=Choice.choices, default=Choice.UNDECIDED)
    note = models.TextField(blank=True, max_length=2000)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.get_choice_display()} for invitation {self.invitation_id}"


class AuditEvent(models.Model):
    """One intervention by a person (or a command): who, when, what, on what. Append-only.

    Written through takehome.audit.record() from the actions that change
    something a candidate or a colleague lives with: invite, resend, revoke,
    extend, decision, role change, regrade; and the few the server does itself (actor None): a
    workspace closed with files it could not save, a workspace submitted at the deadline.
    """

    class Action(models.TextChoices):
        INVITE = "invite", "Invited"
        RESEND = "resend", "Link sent again"
        REVOKE = "revoke", "Revoked"
        EXTEND = "extend", "Deadline extended"
        DECISION = "decision", "Decision"
        ROLE_CHANGE = "role_change", "Role changed"
        REGRADE = "regrade", "Sent for grading again"
        # written by the server, not a person: a hosted workspace closed with files it could not save
        WORKSPACE_UNSAVED = "workspace_unsaved", "Workspace files not saved"
        # the server's too: a hosted workspace submitted by the server once uploads closed
        DEADLINE_SUBMIT = "deadline_submit", "Submitted at the deadline by the server"
        # the server's too: a candidate who had not started was emailed a reminder (takehome.reminders)
        REMINDER = "reminder", "Reminder sent"
        # a recruiter set a packet's reminder times
        REMINDERS_SET = "reminders_set", "Reminders set"
        # a recruiter set how many reviewers each of a packet's submissions gets
        REVIEWERS_SET = "reviewers_set", "Reviewers per submission set"
        # a recruiter gave a submission's review to another reviewer (or added one)
        REASSIGN = "reassign", "Review reassigned"

    # The actions apps above this one write (takehome.audit.register_actions), by value: their labels.
    LATER_ACTIONS: ClassVar[dict[str, str]] = {}

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # why a copy of the name: the trail must still say who once the account is gone.
    actor_name = models.CharField(max_length=150)
    action = models.CharField(max_length=20, choices=Action.choices)
    target_type = models.CharField(max_length=100)  # "app_label.model"
    target_id = models.CharField(max_length=64, blank=True)
    target_repr = models.CharField(max_length=300)
    # Set when the target is (or belongs to) an invitation, so the candidate's row can list its history.
    invitation = models.ForeignKey(
        Invitation, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["invitation", "at"], name="audit_invitation_at")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_name}: {self.get_action_display()} {self.target_repr}"

    def save(self, *args, **kwargs) -> None:
        # why: a trail that can be edited is no trail.
        if self.pk is not None:
            raise ImmutableRowError("Audit events are append-only.")
        super().save(*args, **kwargs)

    def get_action_display(self) -> str:
        if self.action in self.LATER_ACTIONS:
            return self.LATER_ACTIONS[self.action]
        return dict(self.Action.choices).get(self.action, self.action)


class FunnelTally(models.Model):
    """One counter of a packet's funnel (invited, opened, red_le_5, ...), kept by takehome.funnel."""

    packet = models.ForeignKey(Packet, on_delete=models.CASCADE, related_name="funnel_tally")
    counter = models.CharField(max_length=40)
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["packet", "counter"], name="funnel_tally_counter")]

    def __str__(self) -> str:
        return f"{self.packet_id} {self.counter}={self.n}"


class FunnelEntry(models.Model):
    """What one invitation adds to its packet's funnel now, so a change adds only the difference."""

    invitation = models.OneToOneField(Invitation, on_delete=models.CASCADE, primary_key=True,
                                      related_name="funnel_entry")
    packet = models.ForeignKey(Packet, on_delete=models.CASCADE, related_name="+")
    counts = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"invitation {self.invitation_id}: {self.counts}"


def effective_policy(version: PacketVersion) -> str:
    """provided, own or none: the version's model policy, with the default worked out from settings."""
    if version.model_policy:
        return version.model_policy
    return PacketVersion.ModelPolicy.PROVIDED if settings.MODEL_URL else PacketVersion.ModelPolicy.OWN


class Reminder(models.Model):
    """One reminder, sent or skipped, to a candidate who had not pressed Start (takehome.reminders).

    The row is the claim: its unique key means a reminder is emailed at most once per invitation and
    time, however many sweeps or workers see it due.
    """

    invitation = models.ForeignKey(Invitation, on_delete=models.CASCADE, related_name="reminders")
    after_hours = models.PositiveIntegerField()
    at = models.DateTimeField(default=timezone.now)
    # why skipped ones too: reminder times set after the link went out can be due together; only the
    # latest is sent, and the earlier are kept as passed over, never sent later.
    sent = models.BooleanField(default=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["invitation", "after_hours"], name="one_reminder_per_time")]

    def __str__(self) -> str:
        return f"reminder {self.after_hours} h for invitation {self.invitation_id}"
