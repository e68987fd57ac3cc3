"""Writes on the candidate's side: opening, starting, gate receipts, uploads.

Every write that touches more than one row, or must not race, is here, in a
transaction. Gate receipts are append-only and written nowhere else.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import logging
import math
import os
import re
import tempfile
import zipfile
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Max
from django.utils import timezone

from grading import lifecycle
from grading.checks.redlog import CLOSING_RE, analyse_red_log, clean_log
from shared.words import counted, listed
from takehome import funnel
from takehome.models import Invitation, PacketVersion, effective_policy

from .artifacts import Missing, missing_artifacts
from .models import GateReceipt, ModelExchange, Submission, Workspace
from .uploads import IncomingArchive, human_size

log = logging.getLogger(__name__)

Step = GateReceipt.Step
PROMPT_FILE = "artifacts/prompt.txt"
LOG_LIMIT = 200_000  # characters of a log kept on a receipt


class SessionRefused(Exception):
    """A candidate's request that the rules refuse; ``message`` says why, in plain words.

    ``retry_after``: seconds after which the same request would be accepted,
    when waiting helps. ``receipt``: the refused gate step, kept as a receipt.
    """

    def __init__(self, message: str, code: str = "refused", retry_after: int | None = None):
        super().__init__(message)
        self.message, self.code, self.retry_after = message, code, retry_after
        self.receipt: GateReceipt | None = None


def upload_closes_at(invitation: Invitation) -> datetime | None:
    """The deadline plus the grace period: the last moment an upload (or a gate step) is accepted."""
    if invitation.deadline is None:
        return None
    return invitation.deadline + timedelta(seconds=settings.UPLOAD_GRACE_S)


def session_phase(invitation: Invitation, now: datetime | None = None) -> str:
    """not_started, running, grace (deadline passed, uploads still open) or closed (final)."""
    if invitation.started_at is None or invitation.deadline is None:
        return "not_started"
    now = now or timezone.now()
    if now <= invitation.deadline:
        return "running"
    return "grace" if now <= upload_closes_at(invitation) else "closed"


def grace_words() -> str:
    """The grace period as a person says it: '5 minutes', '1 minute', '30 seconds'."""
    seconds = settings.UPLOAD_GRACE_S
    if seconds % 60:
        return counted(seconds, "second")
    return f"{seconds // 60} minute{'s' if seconds != 60 else ''}"


def upload_limits_words() -> str:
    """The upload limits as a person says them: 'at most once every 10 seconds and 30 times in all'."""
    interval, most = settings.UPLOAD_INTERVAL_S, settings.UPLOAD_MAX_COUNT
    parts = []
    if interval > 0:
        parts.append(f"once every {counted(interval, 'second')}")
    if most > 0:
        parts.append(f"{counted(most, 'time')} in all")
    return "at most " + " and ".join(parts) if parts else "as often as you like"


def unpacked_limits_words() -> str:
    """What one upload may unpack to, from settings: 'at most 2000 files, 10 MB per file and 50 MB in all'."""
    files = settings.UPLOAD_MAX_FILES
    return (f"at most {counted(files, 'file')}, {human_size(settings.UPLOAD_MAX_FILE_BYTES)} "
            f"per file and {human_size(settings.UPLOAD_MAX_UNPACKED_BYTES)} in all")


def _time_is_up(invitation: Invitation, now: datetime, step: str | None = None) -> SessionRefused | None:
    """Refused after the deadline plus grace: an upload, or (``step``) a gate step, in the same words."""
    closes = upload_closes_at(invitation)
    if closes is None or now <= closes:
        return None
    deadline = f"{invitation.deadline:%Y-%m-%d %H:%M} UTC"
    if step is None:
        message = (f"Time is up: the deadline was {deadline}, and uploads closed {grace_words()} after it. "
                   "Your earlier uploads, if any, are kept. If something went wrong, write to the person "
                   "who invited you.")
    else:
        message = (f"Time is up: the deadline was {deadline}, and the gate closed {grace_words()} after it. "
                   f"This {step} step is kept as refused; your uploads, if any, are kept. If something went "
                   "wrong, write to the person who invited you.")
    return SessionRefused(message, "deadline")


def _seconds(n: int, one: str = "1 second") -> str:
    return one if n == 1 else f"{n} seconds"


def _too_many_uploads(invitation: Invitation, now: datetime) -> SessionRefused | None:
    """The per-invitation upload limits: one upload per interval, and so many in all.

    why: every upload costs four sandbox runs; one candidate once sent 12
    zips in under 3 seconds. Only stored uploads count, so a refused file
    (not a zip, too large) never uses up the allowance.
    """
    interval, most = settings.UPLOAD_INTERVAL_S, settings.UPLOAD_MAX_COUNT
    if interval <= 0 and most <= 0:
        return None
    found = Submission.objects.filter(invitation_id=invitation.pk).aggregate(n=Count("pk"), last=Max("uploaded_at"))
    if most > 0 and found["n"] >= most:
        taken = counted(found["n"], "upload")
        return SessionRefused(
            f"This link has taken {taken}, the most it accepts, so this one was not stored. Your uploads are "
            "kept, and the latest accepted one is reviewed. If you need to upload again, write to the person "
            "who invited you.",
            "too_many_uploads",
        )
    if interval > 0 and found["last"] is not None:
        elapsed = (now - found["last"]).total_seconds()
        if elapsed < interval:
            wait = max(1, math.ceil(interval - elapsed))
            ago = "just now" if elapsed < 1 else _seconds(int(elapsed)) + " ago"
            return SessionRefused(
                f"Too soon: this link takes one upload every {_seconds(interval, one='second')}, and your last "
                f"one arrived {ago}. Wait {_seconds(wait)}, then upload again. Your earlier uploads are kept.",
                "too_soon",
                retry_after=wait,
            )
    return None


def check_upload_allowed(invitation: Invitation, now: datetime | None = None) -> None:
    """Raise SessionRefused unless this invitation may upload right now."""
    now = now or timezone.now()
    if invitation.started_at is None:
        raise SessionRefused("Your clock has not started yet. Press Start on your page first.", "not_started")
    refusal = _time_is_up(invitation, now) or _too_many_uploads(invitation, now)
    if refusal is not None:
        raise refusal


def do_open_invitation(invitation: Invitation) -> None:
    """The candidate opened the link: remember the first time."""
    if invitation.opened_at is None:
        now = timezone.now()
        if Invitation.objects.filter(pk=invitation.pk, opened_at__isnull=True).update(opened_at=now):
            funnel.touch(invitation.pk)
        invitation.opened_at = now


@transaction.atomic
def do_start_session(invitation: Invitation) -> bool:
    """Start the clock: started_at now, deadline after the version's time limit.

    Returns False (and changes nothing) when the clock was already running.
    """
    # why lock: two Start clicks at once must not both set the clock.
    locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if locked.started_at is not None:
        invitation.started_at, invitation.deadline = locked.started_at, locked.deadline
        return False
    now = timezone.now()
    locked.started_at = now
    locked.deadline = now + invitation.packet_version.time_limit
    locked.opened_at = locked.opened_at or now
    locked.save(update_fields=["started_at", "deadline", "opened_at"])
    funnel.touch(locked.pk)
    invitation.started_at, invitation.deadline, invitation.opened_at = (
        locked.started_at, locked.deadline, locked.opened_at)
    return True


@dataclass(frozen=True)
class GateReport:
    """What the gate sent for one step: the log's text, a sha256 per file, the candidate's clock."""

    log_text: str
    tree_hashes: Mapping[str, str]
    local_time: str


def _green_shows_a_pass(text: str) -> bool:
    """pytest's closing line counts passes and no failures or errors."""
    for line in reversed(clean_log(text).split("\n")):
        match = CLOSING_RE.match(line.strip())
        if match:
            counts = match.group("counts")
            return " passed" in counts and " failed" not in counts and " error" not in counts
    return False


def log_refusal(step: str, report: GateReport) -> str | None:
    """What the step's own log says against it (None: nothing). Pure, so it runs before any lock is taken."""
    if step == Step.RED:
        red = analyse_red_log(report.log_text, known_test_ids=None, original_failures=None)
        if not red.failed:
            return "The red log shows no failure: red means the test runner printed FAILED."
        if not red.genuine:
            return ("The red log does not look like pytest's own output (" + "; ".join(red.missing[:3])
                    + "). Run `python gate.py red` and let it capture the run.")
    if step == Step.GREEN and not _green_shows_a_pass(report.log_text):
        return "still red: the green log does not end with pytest's passing summary."
    return None


def refusal_for(invitation: Invitation, step: str, report: GateReport, logged: str | None) -> str | None:
    """Why the server refuses this step now (None: accepted). The same order as the gate's own.

    ``logged`` is ``log_refusal(step, report)``, worked out beforehand.
    """
    if step not in (Step.RED, Step.MODEL, Step.GREEN):
        return f"Unknown step {step!r}."
    accepted = set(
        GateReceipt.objects.filter(invitation=invitation, accepted=True).values_list("step", flat=True)
    )
    no_model = effective_policy(invitation.packet_version) == PacketVersion.ModelPolicy.NONE
    if step == Step.MODEL and no_model:
        return "This take-home uses no model, so there is no model step: fix the code, then run `python gate.py green`."
    if step == Step.MODEL:
        if Step.RED not in accepted:
            return "No red run has been witnessed yet. The model waits: run `python gate.py red` first."
        if PROMPT_FILE not in report.tree_hashes:
            return "Write artifacts/prompt.txt first."
    if step == Step.GREEN and no_model and Step.RED not in accepted:
        return "Green before red is a skip, not a pass: run `python gate.py red` first."
    if step == Step.GREEN and not no_model and Step.MODEL not in accepted:
        return "Green before model is a skip, not a pass: run `python gate.py model` first."
    return logged


def do_record_gate_step(invitation: Invitation, step: str, report: GateReport,
                        captured_by: str = GateReceipt.CapturedBy.CANDIDATE) -> GateReceipt:
    """Witness one gate step: store a receipt with the server's time, accepted or refused.

    Refused steps are kept too (accepted=False, with the reason): a gate that
    says no is part of the story a reviewer reads. They never count as a step.
    Raises SessionRefused, storing nothing, before the clock has started; and
    after the deadline plus grace, once the step is kept as a refused receipt
    (on the exception's ``receipt``), as a late upload is refused.
    """
    # why before the transaction: reading a log of up to 200,000 characters takes a while,
    # and on SQLite every other write waits while a transaction holds the lock.
    logged = log_refusal(step, report)
    with transaction.atomic():
        # why lock: two receipts at once must see each other when checking the order.
        invitation = (Invitation.objects.select_for_update().select_related("packet_version")
                      .get(pk=invitation.pk))
        if invitation.started_at is None:
            raise SessionRefused("Your clock has not started yet. Press Start on your page first.", "not_started")
        late = _time_is_up(invitation, timezone.now(), step=step)
        refusal = late.message if late is not None else refusal_for(invitation, step, report, logged)
        receipt = GateReceipt.objects.create(
            invitation=invitation,
            step=step,
            accepted=refusal is None,
            refusal=(refusal or "")[:300],
            local_time=report.local_time[:64],
            log_text=report.log_text[-LOG_LIMIT:],
            tree_hashes=dict(report.tree_hashes),
            captured_by=captured_by,
        )
        if receipt.accepted and step == Step.RED:
            funnel.touch(invitation.pk)
    if late is not None:
        late.receipt = receipt
        raise late
    return receipt


def do_record_model_exchange(invitation: Invitation, **fields) -> ModelExchange:
    """Store one model-window exchange; the first one is also the model step's receipt.

    why a receipt: a request sent through the window after red is the model
    step, witnessed by the server rather than said by the gate. It is written
    only when no accepted model receipt exists yet (gate.py model may have come first),
    with the last user message as its prompt, as gate.py model sends artifacts/prompt.txt.
    """
    with transaction.atomic():
        # why lock: two first exchanges at once must not both write the receipt.
        Invitation.objects.select_for_update().filter(pk=invitation.pk).first()
        exchange = ModelExchange.objects.create(invitation=invitation, **fields)
        if not GateReceipt.objects.filter(invitation=invitation, step=Step.MODEL, accepted=True).exists():
            prompt = next((m["content"] for m in reversed(exchange.messages)
                           if m.get("role") == "user" and isinstance(m.get("content"), str)), "")
            GateReceipt.objects.create(invitation=invitation, step=Step.MODEL, received_at=exchange.at,
                                       log_text=prompt[-LOG_LIMIT:])
        funnel.touch(invitation.pk)
    return exchange


def stored_name(sha256: str) -> str:
    """Where an upload lives under MEDIA_ROOT: by content, so the same bytes are stored once."""
    return f"uploads/{sha256[:2]}/{sha256}.zip"


def _store(incoming: IncomingArchive) -> Path | None:
    """Move the received file to its place by hash; returns that path when this call created it."""
    final = Path(settings.MEDIA_ROOT) / stored_name(incoming.sha256)
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        incoming.discard()
        return None
    os.replace(incoming.path, final)
    return final


def _lock_content(sha256: str) -> None:
    """Make uploads of the same bytes (and their clean-up) take turns until the transaction ends.

    why: the same bytes are stored once, so the clean-up of an upload whose
    commit failed must not remove a file that another upload of those bytes
    has just committed a row for. On SQLite the IMMEDIATE transaction already
    makes every write take turns; PostgreSQL locks rows only, so this takes a
    transaction-scoped advisory lock on the hash.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [int(sha256[:15], 16)])


def _remove_unless_used(path: Path, sha256: str) -> None:
    """After a failed commit: remove the file this upload created, unless a committed upload uses it."""
    try:
        with transaction.atomic():
            _lock_content(sha256)
            if not Submission.objects.filter(archive=stored_name(sha256)).exists():
                path.unlink(missing_ok=True)
    except DatabaseError:
        # why keep it: a file nobody uses costs disk; one removed under a committed upload loses work.
        log.warning("kept %s: the database could not say whether a stored upload uses it", path)


@dataclass
class UploadResult:
    submission: Submission
    receipt: GateReceipt
    grading: lifecycle.GradingRequest
    missing: tuple[Missing, ...] = ()  # a hosted submit anyway: the expected artifacts it went without

    @property
    def queued(self) -> bool | None:
        """None until the commit; False: the broker was down (the sweep sends it later)."""
        return self.grading.sent


def do_accept_upload(invitation: Invitation, incoming: IncomingArchive, via: str = "browser") -> UploadResult:
    """Keep an upload: file by hash, Submission and an upload receipt in one transaction, then grade.

    The submission is the invitation's newest, so it goes under review
    (``is_latest``) until it is graded, or refused (then the flag falls back to
    the latest accepted upload). Older uploads not yet being graded are
    superseded. Grading is enqueued after the commit; if the broker is down it
    waits for the sweep, and the upload still succeeds. Raises SessionRefused
    (storing nothing, deleting the received file) after the deadline plus
    grace, and past the per-invitation upload limits.
    """
    created = None
    try:
        with transaction.atomic():
            # why lock: "latest" must be one row even when two uploads race.
            locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
            if locked.revoked_at is not None:
                raise SessionRefused("This link is not valid.", "invalid")
            now = timezone.now()
            # why again, under the lock: two uploads racing past the view's check must
            # not both fit into the last place of the limit.
            check_upload_allowed(locked, now)
            Submission.objects.filter(invitation=locked, is_latest=True).update(is_latest=False)
            submission = Submission.objects.create(
                invitation=locked, archive=stored_name(incoming.sha256), sha256=incoming.sha256,
                size=incoming.size, original_name=incoming.original_name, via=via, uploaded_at=now,
            )
            receipt = GateReceipt.objects.create(
                invitation=locked, step=Step.UPLOAD, received_at=now, sha256=incoming.sha256
            )
            locked.submitted_at = now
            locked.save(update_fields=["submitted_at"])
            invitation.submitted_at = now
            funnel.touch(locked.pk)
            # Older uploads not yet being graded are not graded; this one is sent once the upload commits.
            result = UploadResult(submission, receipt, lifecycle.request_grading(submission))
            # why last: moving the file is the one step a rollback cannot undo, so it
            # comes after every write that could be refused (a busy or read-only database).
            _lock_content(incoming.sha256)
            created = _store(incoming)
    except BaseException:
        incoming.discard()
        if created is not None:
            _remove_unless_used(created, incoming.sha256)
        raise
    return result


# -- hosted sessions: the server captures red and green itself --------------------------------

CAPTURE_STEPS = (Step.RED, Step.MODEL, Step.GREEN)
SERVER_LOGS = {Step.RED: "artifacts/red.log", Step.GREEN: "artifacts/green.log"}
STAMP_FILE = "artifacts/model_allowed.at"
_GATE_COMMAND_RE = re.compile(r"(?:[Rr]un )?`python gate\.py (\w+)`")


def hosted_words(message: str) -> str:
    """A refusal written for gate.py, said for the hosted session: "run `python gate.py red`" -> "capture red"."""
    return _GATE_COMMAND_RE.sub(
        lambda m: f"capture {m.group(1)} (the button, or `gate {m.group(1)}` in the terminal)", message)


def _file_hashes(files: Mapping[str, bytes]) -> dict[str, str]:
    return {path: hashlib.sha256(data).hexdigest() for path, data in sorted(files.items())}


@contextmanager
def _capture_lock(invitation: Invitation):
    """One capture or hosted submit at a time per invitation, across processes (web and gate host).

    why a file lock: the buttons run in the web process, `gate red` in the gate
    host; two sandboxes over one workspace at once would only race.
    """
    from .workspaces import folder_for

    folder = folder_for(invitation)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "capture.lock").open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SessionRefused("A capture or submit of this workspace is already running. Wait for it to "
                                 "finish (a few seconds), then try again.", "busy", retry_after=5) from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _check_hosted(invitation: Invitation) -> None:
    """Refusals before anything is read: a revoked link, before Start, no workspace opened yet."""
    if invitation.revoked_at is not None:
        raise SessionRefused("This link is not valid.", "invalid")
    if invitation.started_at is None:
        raise SessionRefused("Your clock has not started yet. Press Start on your page first.", "not_started")
    if not Workspace.objects.filter(invitation_id=invitation.pk).exists():
        raise SessionRefused("There is no workspace for this link yet: open the workspace page first, "
                             "then capture.", "no_workspace")


def _snapshot(invitation: Invitation) -> dict[str, bytes]:
    from . import workspaces

    sandbox = workspaces.backend()
    try:
        return dict(sandbox.snapshot_files(workspaces.open_files(invitation)))
    except sandbox.WorkspaceTooBig as exc:
        raise SessionRefused(str(exc), "too_big") from exc
    except workspaces.WorkspaceFull as exc:  # WorkspaceElsewhere: kept on another host
        raise SessionRefused(str(exc), "unavailable", retry_after=60) from exc
    except sandbox.WorkspaceUnavailable as exc:
        log.error("workspace of invitation %s unavailable: %s", invitation.pk, exc)
        raise SessionRefused("The server could not read your workspace just now. Try again in a minute; your "
                             "files are kept.", "unavailable") from exc


def _run_tests(invitation: Invitation, files: Mapping[str, bytes]) -> str:
    """The packet's test command over ``files`` in a fresh grading sandbox; returns what it printed."""
    from grading.pipeline import sandbox_for_spec
    from grading.sandbox import SandboxUnavailable

    spec = invitation.packet_version.to_spec()
    try:
        # why the files themselves: the sandbox unpacks them into its own tmpfs, nothing on disk here
        result = sandbox_for_spec(spec).run(files, spec.test_command)
    except SandboxUnavailable as exc:
        log.error("capture for invitation %s: the sandbox is unavailable: %s", invitation.pk, exc)
        raise SessionRefused("The server could not run your tests just now (its sandbox is unavailable). Nothing "
                             "was captured; try again in a minute.", "unavailable") from exc
    return result.log


def do_capture(invitation: Invitation, step: str) -> GateReceipt:
    """The server witnesses a step of a hosted session itself, and keeps a receipt captured by the server.

    red and green: the packet's test command runs in a fresh grading sandbox
    over a snapshot of the workspace, and its output is the step's log, judged
    by the same rules as the gate's (a red that shows no failure, a green that
    is not all passing, a step out of order: refused, and kept as refused).
    model: artifacts/prompt.txt of the workspace is the step's log, as
    ``gate.py model`` sends it. Raises SessionRefused before Start, after the
    deadline plus grace (the step kept as refused, as the gate's is), while
    another capture of this workspace runs, and when the workspace cannot be read.
    No transaction is open while the sandbox runs.
    """
    from .workspaces import append_marker

    if step not in CAPTURE_STEPS:
        raise SessionRefused(f"Unknown step {step!r}: capture red, model or green.", "unknown_step")
    _check_hosted(invitation)
    if _time_is_up(invitation, timezone.now(), step=step) is not None:
        # kept as a refused step, as a late gate step is; no workspace is read
        try:
            do_record_gate_step(invitation, step, GateReport("", {}, ""), captured_by=GateReceipt.CapturedBy.SERVER)
        except SessionRefused as exc:
            exc.message = hosted_words(exc.message)
            raise
    with _capture_lock(invitation):
        # why first: a step out of order is refused without spending a sandbox run on it
        order = refusal_for(invitation, step, GateReport("", {PROMPT_FILE: ""}, ""), None)
        files = _snapshot(invitation)
        if step == Step.MODEL:
            log_text = files.get(PROMPT_FILE, b"").decode("utf-8", "replace")
        else:
            log_text = "" if order else _run_tests(invitation, files)
        report = GateReport(log_text=log_text, tree_hashes=_file_hashes(files), local_time="")
        try:
            receipt = do_record_gate_step(invitation, step, report, captured_by=GateReceipt.CapturedBy.SERVER)
        except SessionRefused as exc:
            append_marker(invitation, f"{step} refused")
            exc.message = hosted_words(exc.message)
            raise
    append_marker(invitation, f"{step} {'captured' if receipt.accepted else 'refused'}")
    return receipt


def _latest_server_receipt(invitation: Invitation, step: str) -> GateReceipt | None:
    return (GateReceipt.objects.filter(invitation=invitation, step=step, accepted=True,
                                       captured_by=GateReceipt.CapturedBy.SERVER)
            .order_by("-received_at", "-pk").first())


def hosted_files(invitation: Invitation, files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The workspace's files as they are submitted: with the server's own logs and stamp.

    artifacts/red.log and artifacts/green.log are the logs the server captured
    (left out when it captured none: the candidate cannot write them), and
    artifacts/model_allowed.at the server's time of the model step.
    """
    files = dict(files)
    for step, path in SERVER_LOGS.items():
        files.pop(path, None)
        receipt = _latest_server_receipt(invitation, step)
        if receipt is not None:
            files[path] = receipt.log_text.encode("utf-8")
    files.pop(STAMP_FILE, None)
    model = (GateReceipt.objects.filter(invitation=invitation, step=Step.MODEL, accepted=True)
             .order_by("received_at", "pk").first())
    if model is not None:
        files[STAMP_FILE] = f"{model.received_at.timestamp():.3f}\n".encode()
    return files


def hosted_archive(invitation: Invitation, files: Mapping[str, bytes]) -> bytes:
    """The workspace's files as an upload zip, with the server's own logs and stamp (hosted_files)."""
    return _zipped(invitation, hosted_files(invitation, files))


def _zipped(invitation: Invitation, files: Mapping[str, bytes]) -> bytes:
    """``files`` as a zip under the packet's folder.

    Every entry gets one time, so the zip shows no order of its own: the receipts say it.
    """
    folder = invitation.packet_version.packet.slug
    when = datetime.now(UTC).timetuple()[:6]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in sorted(files.items()):
            info = zipfile.ZipInfo(f"{folder}/{path}", when)
            info.external_attr = 0o644 << 16
            zf.writestr(info, data, zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def _incoming(data: bytes, name: str) -> IncomingArchive:
    """``data`` written where a browser upload streams to, so storing it is the same rename."""
    from .uploads import INCOMING

    folder = Path(settings.MEDIA_ROOT) / INCOMING
    folder.mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix="in-", suffix=".zip", dir=folder)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return IncomingArchive(path=Path(path), sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                           original_name=name)


class WorkspaceIncomplete(SessionRefused):
    """A hosted submit that stopped before storing anything: artifacts the reviewers look for are missing.

    ``missing``: each one (sessions_app.artifacts.Missing) in the hosted
    session's words; ``message`` says them as the terminal's `gate submit` does.
    """

    def __init__(self, missing: list[Missing]):
        super().__init__(incomplete_words(missing), "incomplete")
        self.missing = missing


def hosted_missing(invitation: Invitation, files: Mapping[str, bytes]) -> list[Missing]:
    """What of the expected artifacts ``files`` (as submitted) lacks, said for the hosted session."""
    model_step = effective_policy(invitation.packet_version) != PacketVersion.ModelPolicy.NONE
    return [replace(m, what=hosted_words(m.what)) for m in missing_artifacts(files, model_step)]


def incomplete_words(missing: list[Missing]) -> str:
    """`gate submit` before an incomplete workspace, in the words of gate.py's own submit."""
    lines = "".join(f"\n  - {m.line}" for m in missing)
    return (f"Reviewers look for these, and your workspace does not have them:{lines}\n"
            "Nothing was submitted. Add what is missing and run `gate submit` again, or run "
            "`gate submit --anyway` to submit the workspace as it is.")


def do_submit_workspace(invitation: Invitation, *, anyway: bool = False) -> UploadResult:
    """Submit a hosted session: its files, with the server's logs, go the way of an upload (via "hosted").

    When artifacts the reviewers look for are missing (sessions_app.artifacts,
    the rule gate.py's submit follows), nothing is stored and
    WorkspaceIncomplete says which, unless ``anyway``: then the upload goes
    and ``result.missing`` names them. The candidate may submit again until
    uploads close, as with uploads; the same limits hold. Raises
    SessionRefused as do_accept_upload does, and when the workspace is too big
    or cannot be read.
    """
    from .workspaces import append_marker

    _check_hosted(invitation)
    check_upload_allowed(invitation)  # the deadline plus grace, and the upload limits
    with _capture_lock(invitation):
        files = hosted_files(invitation, _snapshot(invitation))
        missing = hosted_missing(invitation, files)
        if missing and not anyway:
            raise WorkspaceIncomplete(missing)
        data = _zipped(invitation, files)
        if len(data) > settings.UPLOAD_MAX_BYTES:
            raise SessionRefused(f"Your workspace zips to {human_size(len(data))}, more than the limit of "
                                 f"{human_size(settings.UPLOAD_MAX_BYTES)}. Remove large files you do not need, "
                                 "then submit again.", "too_large")
        result = do_accept_upload(invitation, _incoming(data, f"{invitation.packet_version.packet.slug}.zip"),
                                  via="hosted")
    append_marker(invitation, "submitted")
    result.missing = tuple(missing)
    return result


def capture_words(receipt: GateReceipt, test_command: str) -> str:
    """What a capture did, in words for the candidate (the page and the `gate` command say the same)."""
    step = receipt.step
    if not receipt.accepted:
        return f"{step.capitalize()} not captured: {hosted_words(receipt.refusal)}"
    if step == Step.MODEL:
        return "Model step witnessed: your prompt in artifacts/prompt.txt is kept with the server's time."
    ran = f"The server ran `{test_command}` over your workspace in a fresh sandbox"
    if step == Step.RED:
        return f"Red captured. {ran} and saw it fail; that log is your red log."
    return f"Green captured. {ran} and every test passed; that log is your green log. Submit when you are done."


def hosted_status_words(invitation: Invitation) -> str:
    """`gate status` in the hosted session: the clock, the steps the server witnessed, the uploads."""
    invitation.refresh_from_db()
    lines = []
    phase = session_phase(invitation)
    if phase == "not_started":
        lines.append("Your clock has not started yet.")
    elif phase == "running":
        left = int((invitation.deadline - timezone.now()).total_seconds())
        lines.append(f"Time left: {left // 3600}h {left % 3600 // 60:02d}m (deadline "
                     f"{invitation.deadline:%Y-%m-%d %H:%M} UTC).")
    elif phase == "grace":
        lines.append(f"The deadline has passed; you can still submit for {grace_words()} after it.")
    else:
        lines.append("Time is up: nothing more is accepted.")
    receipts = list(GateReceipt.objects.filter(invitation=invitation).exclude(step=Step.UPLOAD)
                    .order_by("received_at", "pk"))
    if not receipts:
        lines.append("No step witnessed yet: `gate red` captures your red run.")
    for r in receipts:
        if r.captured_by != GateReceipt.CapturedBy.SERVER:
            who = "sent by gate.py"
        else:
            who = "captured by the server" if r.accepted else "asked of the server"
        verdict = "accepted" if r.accepted else f"refused: {hosted_words(r.refusal)}"
        lines.append(f"  {r.received_at:%H:%M:%S} UTC  {r.step:<5}  {verdict} ({who})")
    count = Submission.objects.filter(invitation=invitation).count()
    lines.append(f"Submitted {counted(count, 'time')}." if count else "Not submitted yet: `gate submit` sends "
                 "your workspace for review (you may submit again until the deadline).")
    return "\n".join(lines)


def submitted_words(result: UploadResult) -> str:
    """What a hosted submit did; a submit anyway names again what it went without."""
    submitted = "Submitted"
    if result.missing:
        submitted = f"Submitted as it is, without {listed([m.path for m in result.missing])}"
    return (f"{submitted}: your workspace was stored (sha256 {result.submission.sha256[:12]}…) with the logs the "
            "server captured, and will be graded shortly. You may keep working and submit again until the "
            "deadline; the latest accepted submission is reviewed.")
