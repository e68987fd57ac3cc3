"""Writes on the candidate's side: opening, starting, gate receipts, uploads.

Every write that touches more than one row, or must not race, is here, in a
transaction. Gate receipts are append-only and written nowhere else.
"""

from __future__ import annotations

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
from typing import Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from grading.engine.checks.receipts import (
    GATE_REFUSED_OFFLINE,
    GATE_REFUSED_ORDER,
    GATE_REFUSED_OUTCOME,
    gate_refusal_kind,
)
from grading.engine.checks.redlog import CLOSING_RE, analyse_red_log, clean_log
from shared import stored
from shared.handover import hand_over
from shared.words import counted, listed
from takehome import funnel
from takehome.audit import record
from takehome.models import Invitation, PacketVersion, effective_policy

from .artifacts import Missing, missing_artifacts
from .models import UPLOAD_TOO_SOON, GateReceipt, ModelExchange, Submission, Workspace
from .signals import invitation_started, submission_stored
from .uploads import IncomingArchive, human_size, unpack_refusal

log = logging.getLogger(__name__)

Step = GateReceipt.Step
PROMPT_FILE = "artifacts/prompt.txt"
LOG_LIMIT = 200_000  # characters of a log kept on a receipt


class SessionRefused(Exception):
    """A candidate's request that the rules refuse; ``message`` says why, in plain words.

    ``retry_after``: seconds after which the same request would be accepted,
    when waiting helps. ``receipt``: the refused gate step, kept as a receipt.
    ``record``: what a refused upload's receipt keeps, for the recruiter and
    the reviewers, where the candidate's words would mislead them (the
    message otherwise).
    """

    def __init__(self, message: str, code: str = "refused", retry_after: int | None = None,
                 record: str | None = None):
        super().__init__(message)
        self.message, self.code, self.retry_after = message, code, retry_after
        self.record = record or message
        self.receipt: GateReceipt | None = None


class DeadlineMoved(Exception):
    """The deadline a submission at the deadline was for was extended before it was stored: nothing is stored.

    why not a SessionRefused: nothing was refused, so nothing is kept as a refused upload; the
    workspace reopens for the extra time, and the new deadline submits it (see do_submit_at_deadline).
    """


# -- work modes: which routes a packet version offers -----------------------------------------

NOT_ZIP = ("This take-home is worked in a hosted workspace only: it has no download, no gate.py and no zip "
           "upload. Open your workspace from your page; the server captures each step there.")
NOT_HOSTED = ("This take-home is worked on your own machine only: it has no hosted workspace. Download the "
              "project from your page, and upload your zip there.")


def zip_offered(version: PacketVersion) -> bool:
    """Whether the version is worked offline: the download, gate.py's receipts and the zip upload."""
    return version.work_mode in (PacketVersion.WorkMode.ZIP, PacketVersion.WorkMode.BOTH)


def hosted_offered(version: PacketVersion) -> bool:
    """Whether the version is worked in a hosted workspace: its page, terminal, capture and submit."""
    return version.work_mode in (PacketVersion.WorkMode.HOSTED, PacketVersion.WorkMode.BOTH)


def check_zip_route(invitation: Invitation) -> None:
    """Raise SessionRefused ("work_mode") when the version offers no zip route.

    why on the server: a hosted-only packet's evidence is what the server
    captured itself; a receipt or a zip made on the candidate's machine would
    stand beside it as if it weighed the same.
    """
    if not zip_offered(invitation.packet_version):
        raise SessionRefused(NOT_ZIP, "work_mode")


def check_hosted_route(invitation: Invitation) -> None:
    """Raise SessionRefused ("work_mode") when the version offers no hosted workspace."""
    if not hosted_offered(invitation.packet_version):
        raise SessionRefused(NOT_HOSTED, "work_mode")


def counted_receipts(invitation: Invitation):
    """The accepted receipts that count for the order of the steps (model window, model and green checks).

    A hosted-only version counts only what the server witnessed itself: red
    and green captured by the server, and the model step (captured, or the
    model window's own record: no other route writes one for such a version).
    In "zip" and "both", gate.py's receipts count too: a candidate working
    offline sends them, and the review page says who witnessed each step.
    """
    receipts = GateReceipt.objects.filter(invitation=invitation, accepted=True)
    if invitation.packet_version.work_mode == PacketVersion.WorkMode.HOSTED:
        receipts = receipts.filter(Q(captured_by=GateReceipt.CapturedBy.SERVER) | Q(step=Step.MODEL))
    return receipts


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
    if invitation.phase_at(now) != Invitation.CLOSED:
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


def _too_many_uploads(invitation: Invitation, now: datetime, via: str = "browser") -> SessionRefused | None:
    """The per-invitation upload limits: one upload per interval, and so many in all.

    why: every upload costs four sandbox runs; one candidate once sent 12
    zips in under 3 seconds. Only stored uploads count, so a refused file
    (not a zip, too large) never uses up the allowance. ``via`` "hosted": said
    as the workspace's Submit (submissions), not as uploads.
    """
    noun, verb = ("submission", "submit") if via == "hosted" else ("upload", "upload")
    interval, most = settings.UPLOAD_INTERVAL_S, settings.UPLOAD_MAX_COUNT
    if interval <= 0 and most <= 0:
        return None
    found = Submission.objects.filter(invitation_id=invitation.pk).aggregate(n=Count("pk"), last=Max("uploaded_at"))
    if most > 0 and found["n"] >= most:
        taken = counted(found["n"], noun)
        return SessionRefused(
            f"This link has taken {taken}, the most it accepts, so this one was not stored. Your {noun}s are "
            f"kept, and the latest accepted one is reviewed. If you need to {verb} again, write to the person "
            "who invited you.",
            "too_many_uploads",
        )
    if interval > 0 and found["last"] is not None:
        elapsed = (now - found["last"]).total_seconds()
        if elapsed < interval:
            wait = max(1, math.ceil(interval - elapsed))
            ago = "just now" if elapsed < 1 else _seconds(int(elapsed)) + " ago"
            after = "under 1 s" if elapsed < 1 else f"{int(elapsed)} s"
            return SessionRefused(
                f"Too soon: this link takes one {noun} every {_seconds(interval, one='second')}, and your last "
                f"one arrived {ago}. Wait {_seconds(wait)}, then {verb} again. Your earlier {noun}s are kept.",
                "too_soon",
                retry_after=wait,
                # why other words for the record: the reviewers read it, and nothing was lost by it
                record=too_soon_record(after, interval, wait),
            )
    return None


def too_soon_record(after: str, interval: int, wait: int) -> str:
    """A too-soon upload as its receipt keeps it, for the recruiter and the reviewers (UPLOAD_TOO_SOON first)."""
    return (f"{UPLOAD_TOO_SOON} sent {after} after the previous upload, where this link takes one every "
            f"{interval} s; not stored, and the candidate was told to wait {wait} s and upload again.")


def _too_slow(invitation: Invitation, began: datetime, now: datetime) -> SessionRefused | None:
    """An upload that began before uploads closed but was still arriving too long after they closed.

    why a bound: the deadline is judged by when the request began, so a
    request line sent in time with its body trickled in later must not buy
    more than UPLOAD_IN_FLIGHT_S of extra work.
    """
    closes = invitation.upload_closes_at
    allowance = timedelta(seconds=settings.UPLOAD_IN_FLIGHT_S)
    if closes is None or began > closes or now <= closes + allowance:
        return None
    return SessionRefused(
        f"Time is up: this upload began at {began:%H:%M:%S} UTC, before uploads closed at {closes:%H:%M:%S} UTC, "
        f"but it had not arrived whole {counted(settings.UPLOAD_IN_FLIGHT_S, 'second')} after they closed, the "
        "longest an upload under way is waited for. Your earlier uploads, if any, are kept. If something went "
        "wrong, write to the person who invited you.", "deadline")


def check_upload_allowed(invitation: Invitation, now: datetime | None = None, via: str = "browser",
                         began: datetime | None = None) -> None:
    """Raise SessionRefused unless this invitation may upload right now (``via`` "hosted": a workspace's submit).

    ``began``: when the upload's request began on the server (shared.request_start), before its
    body arrived; the deadline is judged by it, within UPLOAD_IN_FLIGHT_S (``_too_slow``).
    """
    now = now or timezone.now()
    began = min(began or now, now)
    if via != "hosted":
        check_zip_route(invitation)
    if invitation.started_at is None:
        raise SessionRefused("Your clock has not started yet. Press Start on your page first.", "not_started")
    refusal = (_time_is_up(invitation, began) or _too_slow(invitation, began, now)
               or _too_many_uploads(invitation, now, via))
    if refusal is not None:
        raise refusal


REFUSED_UPLOADS_KEPT = 50  # per invitation: past this, refusals are answered but no longer stored


def do_record_refused_upload(invitation: Invitation, message: str, *, code: str, sha256: str = ""
                             ) -> GateReceipt | None:
    """Keep a refused upload as a refused upload receipt (accepted False, with the reason in words and as
    ``code``, SessionRefused's or the upload form's); None when not kept.

    why: an upload the rules turned away (the deadline, the limits, the work
    mode, not a zip) is part of the story the recruiter and the reviewer
    read. Past REFUSED_UPLOADS_KEPT refusals of one invitation nothing more is
    stored, so a script posting in a loop cannot fill the database.
    """
    try:
        with transaction.atomic():
            kept = GateReceipt.objects.filter(invitation_id=invitation.pk, step=Step.UPLOAD, accepted=False).count()
            if kept >= REFUSED_UPLOADS_KEPT:
                return None
            return GateReceipt.objects.create(invitation_id=invitation.pk, step=Step.UPLOAD, accepted=False,
                                              refusal=message[:300], refusal_code=code[:30], sha256=sha256)
    except DatabaseError:
        # why not raise: the refusal is answered all the same; only its record is missing
        log.exception("could not keep the refused upload of invitation %s", invitation.pk)
        return None


def do_open_invitation(invitation: Invitation) -> None:
    """The candidate opened the link: remember the first time."""
    if invitation.mark_opened():
        funnel.touch(invitation.pk)


@transaction.atomic
def do_start_session(invitation: Invitation) -> bool:
    """Start the clock: started_at now, deadline after the version's time limit.

    Returns False (and changes nothing) when the clock was already running.
    """
    # why lock: two Start clicks at once must not both set the clock.
    invitation.lock()
    if not invitation.start_clock():
        return False
    funnel.touch(invitation.pk)
    invitation_started.send(sender=Invitation, invitation_id=invitation.pk)
    return True


@dataclass(frozen=True)
class GateReport:
    """What the gate sent for one step: the log's text, a sha256 per file, the candidate's clock."""

    log_text: str
    tree_hashes: Mapping[str, str]
    local_time: str
    gate_refused: str = ""  # gate.py refused the step on the candidate's machine, for this reason
    gate_refusal_kind: str = "order"  # "order" (green before model...) or "outcome" (still red...)
    offline: bool = False  # the refusal happened offline and is sent now


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
    accepted = set(counted_receipts(invitation).values_list("step", flat=True))
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


GATE_REFUSALS_KEPT = 50  # per invitation: steps gate.py refused, past this answered but not stored


def do_record_gate_refusal(invitation: Invitation, step: str, report: GateReport) -> GateReceipt | None:
    """Keep a step gate.py refused on the candidate's machine as a refused receipt; None when not kept.

    why: a green before the model or a model before red that the gate stopped
    is part of the story too; before, gate.py stopped without a word to the
    server. Kept whatever the clock says (a refusal made offline may arrive
    after the deadline: it says when, in the candidate's clock, and that it
    came late), never counted as a step, at most GATE_REFUSALS_KEPT of them.
    """
    check_zip_route(invitation)
    if invitation.started_at is None:
        raise SessionRefused("Your clock has not started yet. Press Start on your page first.", "not_started")
    prefix = GATE_REFUSED_ORDER if report.gate_refusal_kind == "order" else GATE_REFUSED_OUTCOME
    refusal = f"{prefix}{GATE_REFUSED_OFFLINE if report.offline else ''}: {' '.join(report.gate_refused.split())}"
    with transaction.atomic():
        Invitation.objects.select_for_update().filter(pk=invitation.pk).first()
        kept = GateReceipt.objects.filter(Q(refusal__startswith=GATE_REFUSED_ORDER)
                                          | Q(refusal__startswith=GATE_REFUSED_OUTCOME),
                                          invitation=invitation, accepted=False).count()
        if kept >= GATE_REFUSALS_KEPT:
            return None
        return GateReceipt.objects.create(
            invitation=invitation, step=step, accepted=False, refusal=refusal[:300],
            local_time=report.local_time[:64], log_text=report.log_text[-LOG_LIMIT:],
            tree_hashes=dict(report.tree_hashes),
        )


def do_record_gate_step(invitation: Invitation, step: str, report: GateReport,
                        captured_by: str = GateReceipt.CapturedBy.CANDIDATE, judged: str | None = None,
                        integrity: Mapping | None = None) -> GateReceipt:
    """Witness one gate step: store a receipt with the server's time, accepted or refused.

    Refused steps are kept too (accepted=False, with the reason): a gate that
    says no is part of the story a reviewer reads. They never count as a step.
    Raises SessionRefused, storing nothing, before the clock has started; and
    after the deadline plus grace, once the step is kept as a refused receipt
    (on the exception's ``receipt``), as a late upload is refused. A server
    capture passes ``judged``, why its run is refused on what it really did
    (said when its log shows nothing against it), and its ``integrity`` record.
    """
    # why before the transaction: reading a log of up to 200,000 characters takes a while,
    # and on SQLite every other write waits while a transaction holds the lock.
    logged = log_refusal(step, report) or judged
    with transaction.atomic():
        # why lock: two receipts at once must see each other when checking the order.
        invitation = (Invitation.objects.select_for_update().select_related("packet_version")
                      .get(pk=invitation.pk))
        if captured_by != GateReceipt.CapturedBy.SERVER:
            check_zip_route(invitation)  # nothing is stored: such a version has no gate.py
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
            integrity=dict(integrity or {}),
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


def do_reserve_model_exchange(invitation: Invitation, body_within_caps) -> tuple[ModelExchange, dict]:
    """Reserve a model-window request: the body to send, and its exchange counted in the caps from now on.

    ``body_within_caps()`` checks the caps and builds the body (raising when a
    cap is reached), and says the exchange's conversation; it runs under the invitation's lock, so no other request
    of this invitation is checked between it and the reservation. why the
    lock: on PostgreSQL it makes the checks take turns; on SQLite the
    IMMEDIATE transaction already does (settings.py).
    """
    from .model_window.upstream import (
        rough_tokens,  # why here: the upstream client is the model window's, not every action's
    )

    with transaction.atomic():
        Invitation.objects.select_for_update().filter(pk=invitation.pk).first()
        body, conversation = body_within_caps()
        messages = body["messages"]
        exchange = ModelExchange.objects.create(
            invitation=invitation, conversation=conversation, messages=messages, model=body["model"],
            streamed=bool(body.get("stream")),
            options={key: value for key, value in body.items() if key != "messages"},
            tokens_in=rough_tokens(_sent_text(messages)), tokens_out=body["max_tokens"], tokens_estimated=True,
            finished=False)
    return exchange, body


def _sent_text(messages: list[dict]) -> str:
    return "".join(m["content"] if isinstance(m["content"], str) else "".join(p["text"] for p in m["content"])
                   for m in messages)


def do_finish_model_exchange(exchange: ModelExchange, *, reply: str, model: str, tokens_in: int | None,
                             tokens_out: int | None, latency_s: float, error: str, client_gone: bool) -> None:
    """Finish a reserved exchange once, with what the client was sent; the first one is also the model receipt.

    Token counts are the upstream's usage, or (None) estimated at one per four
    characters of the prompt and of the reply.
    """
    from .model_window.upstream import rough_tokens

    estimated = tokens_in is None or tokens_out is None
    if estimated:
        tokens_in, tokens_out = rough_tokens(_sent_text(exchange.messages)), rough_tokens(reply)
    with transaction.atomic():
        # why lock: two first exchanges at once must not both write the receipt.
        Invitation.objects.select_for_update().filter(pk=exchange.invitation_id).first()
        done = ModelExchange.objects.filter(pk=exchange.pk, finished=False).update(
            reply=reply, model=model[:200], tokens_in=tokens_in, tokens_out=tokens_out, tokens_estimated=estimated,
            latency_s=latency_s, error=error[:500], client_gone=client_gone, finished=True)
        if done and not GateReceipt.objects.filter(invitation_id=exchange.invitation_id, step=Step.MODEL,
                                                   accepted=True).exists():
            prompt = next((_sent_text([m]) for m in reversed(exchange.messages) if m["role"] == "user"), "")
            GateReceipt.objects.create(invitation_id=exchange.invitation_id, step=Step.MODEL, received_at=exchange.at,
                                       log_text=prompt[-LOG_LIMIT:])
        funnel.touch(exchange.invitation_id)


def reply_artifacts(number: int) -> tuple[str, str]:
    """Where the ``number``-th answered exchange's prompt and reply go in a hosted workspace.

    prompt.txt and model.md for the first, as the gate's steps ask for them;
    prompt-2.txt and model-2.md for the second, and so on, as gate.py ask numbers them.
    """
    suffix = "" if number == 1 else f"-{number}"
    return f"artifacts/prompt{suffix}.txt", f"artifacts/model{suffix}.md"


REPLY_ARTIFACT_RE = re.compile(r"artifacts/model(?:-([1-9][0-9]*))?\.md")


def artifact_number(artifact: str) -> int | None:
    """The number reply_artifacts gave ``artifact`` (artifacts/model-2.md: 2), None for any other name."""
    if (found := REPLY_ARTIFACT_RE.fullmatch(artifact or "")) is None:
        return None
    return int(found.group(1) or 1)


def server_reply_files(invitation: Invitation, until: datetime | None = None) -> dict[str, bytes]:
    """The artifacts the server holds for the invitation's answered exchanges (reply_artifacts), by path.

    An exchange the server wrote into the workspace keeps the number it was written with; the others take
    the lowest numbers left, in the order of the exchanges (for a zip candidate: 1, 2, 3...).
    """
    exchanges = list(ModelExchange.objects.filter(invitation_id=invitation.pk).answered())
    used = {n for e in exchanges if (n := artifact_number(e.artifact)) is not None}
    files = {}
    for exchange in exchanges:
        number = artifact_number(exchange.artifact)
        if number is None:
            number = 1
            while number in used:
                number += 1
            used.add(number)
        if until is not None and exchange.at > until:
            continue
        prompt, reply = reply_artifacts(number)
        files[prompt], files[reply] = exchange.prompt.encode("utf-8"), exchange.reply.encode("utf-8")
    return files


def _reserve_reply_artifact(exchange: ModelExchange) -> int | None:
    """Give an answered exchange the lowest file number not taken and record it (``artifact``); None when it
    has none to take (not answered whole, or written already).

    The numbers follow the replies as they end: a reply that ends before an earlier-started one keeps its
    file, and the other takes the next (numbered by the place among the answered exchanges, both took 1).
    why the lock: two replies can end together (the chat pane and `gate ask`, or two tabs), and each must
    see the other's number before taking its own. The invitation's row makes them take turns on
    PostgreSQL; on SQLite the IMMEDIATE transaction does.
    """
    with transaction.atomic():
        Invitation.objects.select_for_update().filter(pk=exchange.invitation_id).exists()
        order = list(ModelExchange.objects.filter(invitation_id=exchange.invitation_id).answered()
                     .values_list("pk", "artifact"))
        if dict(order).get(exchange.pk, "x"):
            return None
        taken = {n for _, artifact in order if (n := artifact_number(artifact)) is not None}
        number = 1
        while number in taken:
            number += 1
        ModelExchange.objects.filter(pk=exchange.pk).update(artifact=reply_artifacts(number)[1])
    return number


def do_write_model_artifacts(exchange: ModelExchange) -> str:
    """In a hosted workspace, write an answered exchange's exact prompt and raw reply as its artifacts.

    why the server: the candidate never copies them by hand (and cannot get
    them wrong). Returns the reply's path, "" when nothing was written (no
    open workspace here, an exchange that ended without a whole reply, or a
    write that failed: logged, and Submit adds the server's copy all the same).
    """
    from .hosted import workspaces

    number = _reserve_reply_artifact(exchange)
    if number is None:
        return ""
    exchange.refresh_from_db()
    prompt, reply = reply_artifacts(number)
    try:
        written = workspaces.write_files(exchange.invitation, {prompt: exchange.prompt.encode("utf-8"),
                                                              reply: exchange.reply.encode("utf-8")})
    except Exception as exc:  # the sandbox's errors, a full workspace, a folder in the way
        log.warning("could not write %s into the workspace of invitation %s: %s", reply, exchange.invitation_id,
                    exc)
        written = False
    if not written:
        # why give the number back: ``artifact`` says where the server wrote the reply, and it wrote none
        ModelExchange.objects.filter(pk=exchange.pk, artifact=reply).update(artifact="")
        return ""
    return reply


def stored_name(sha256: str) -> str:
    """Where an upload lives in the storage: by content, so the same bytes are stored once."""
    return stored.upload_name(sha256)


def _store(incoming: IncomingArchive) -> str | None:
    """Move the received file into the storage under its hash; returns that name when this call stored it.

    On the filesystem storage a rename (the file arrived beside its place); on a bucket, an upload.
    """
    name = stored_name(incoming.sha256)
    if stored.exists(name):
        incoming.discard()
        return None
    stored.save(name, incoming.path, move=True)
    _hand_over_local(name)
    return name


def _hand_over_local(name: str) -> None:
    """On the filesystem storage, the stored zip and its folders go to the web server's user, when a workspace
    host (root) stored them; a bucket has no local owner to set."""
    from django.core.files.storage import default_storage

    try:
        path = Path(default_storage.path(name))
    except NotImplementedError:
        return
    hand_over(path.parent.parent, path.parent, path)


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


def _remove_unless_used(name: str, sha256: str) -> None:
    """After a failed commit: remove the file this upload stored, unless a committed upload uses it."""
    try:
        with transaction.atomic():
            _lock_content(sha256)
            if not Submission.objects.filter(archive=name).exists():
                stored.delete(name)
    except (DatabaseError, OSError) as exc:
        # why keep it: a file nobody uses costs disk; one removed under a committed upload loses work.
        log.warning("kept %s: the database could not say whether a stored upload uses it, or the storage "
                    "could not remove it (%s)", name, exc)


@dataclass
class UploadResult:
    submission: Submission
    receipt: GateReceipt
    grading: Any  # the desk's answer to submission_stored (grading.lifecycle.GradingRequest); None without one
    missing: tuple[Missing, ...] = ()  # a hosted submit anyway: the expected artifacts it went without

    @property
    def queued(self) -> bool | None:
        """None until the commit; False: the broker was down (the sweep sends it later)."""
        return self.grading.sent if self.grading is not None else None


def do_accept_upload(invitation: Invitation, incoming: IncomingArchive, via: str = "browser",
                     began: datetime | None = None, *, files_digest: str = "",
                     at_deadline: bool = False) -> UploadResult:
    """Keep an upload: file by hash, Submission and an upload receipt in one transaction, then grade.

    The submission is the invitation's newest, so it goes under review
    (``is_latest``) until it is graded, or refused (then the flag falls back to
    the latest accepted upload). Older uploads not yet being graded are
    superseded. Grading is enqueued after the commit; if the broker is down it
    waits for the sweep, and the upload still succeeds. Raises SessionRefused
    (storing nothing, deleting the received file) after the deadline plus
    grace (judged by ``began``, when the request began, see check_upload_allowed), and past the
    per-invitation upload limits. ``at_deadline``: the server's own submit of a hosted workspace
    once uploads closed (do_submit_at_deadline), which neither the limits nor the clock hold, but for
    the deadline it is made for (``for_deadline``): DeadlineMoved when that deadline was extended
    meanwhile, IntegrityError for a second one of the same deadline; the audit trail records it
    ("deadline_submit") in the same transaction. ``files_digest``: a hosted submit's
    files_digest, kept to tell the deadline whether anything changed since.
    """
    created = None
    try:
        # why before the transaction: unpacking takes a moment, and the lock would hold every other upload.
        refusal = unpack_refusal(incoming.path, settings.MEDIA_ROOT)
        with transaction.atomic():
            # why lock: "latest" must be one row even when two uploads race.
            invitation.lock()
            if invitation.revoked_at is not None:
                raise SessionRefused("This link is not valid.", "invalid")
            now = timezone.now()
            # why again, under the lock: two uploads racing past the view's check must
            # not both fit into the last place of the limit.
            earlier = for_deadline = None
            if at_deadline:
                # why under the lock: a recruiter's extension that commits first has reopened this
                # deadline; its state would otherwise be kept as submitted at a deadline that is not one
                if invitation.phase_at(now) != Invitation.CLOSED:
                    raise DeadlineMoved()
                for_deadline = invitation.deadline
                earlier = (Submission.objects.filter(invitation=invitation).exclude(at_deadline=True)
                           .aggregate(at=Max("uploaded_at"))["at"])
            else:
                check_upload_allowed(invitation, now, via=via, began=began)
            Submission.objects.filter(invitation=invitation, is_latest=True).update(is_latest=False)
            submission = Submission.objects.create(
                invitation=invitation, archive=stored_name(incoming.sha256), sha256=incoming.sha256,
                size=incoming.size, original_name=incoming.original_name, via=via, uploaded_at=now,
                unpack_refusal=refusal, files_digest=files_digest, at_deadline=at_deadline,
                earlier_submit_at=earlier, for_deadline=for_deadline,
            )
            receipt = GateReceipt.objects.create(
                invitation=invitation, step=Step.UPLOAD, received_at=now, sha256=incoming.sha256, submission=submission
            )
            invitation.mark_submitted(now)
            funnel.touch(invitation.pk)
            if at_deadline:
                # why here: the trail and the submission commit together, or neither does.
                record(None, "deadline_submit", submission, _deadline_submit_words(submission))
            # Older uploads not yet being graded are not graded; this one is sent once the upload commits.
            answers = submission_stored.send(sender=Submission, submission=submission)
            result = UploadResult(submission, receipt, next((a for _, a in answers if a is not None), None))
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


def _deadline_submit_words(submission: Submission) -> str:
    """The audit trail's sentence for a submission at the deadline: which one, and what it followed."""
    words = f"submission {submission.pk}, sha256 {submission.sha256[:12]}"
    if submission.earlier_submit_at is not None:
        words += f", after an earlier submit at {submission.earlier_submit_at:%H:%M} UTC"
    return words


# -- hosted sessions: the server captures red and green itself --------------------------------

CAPTURE_STEPS = (Step.RED, Step.MODEL, Step.GREEN)
SERVER_LOGS = {Step.RED: "artifacts/red.log", Step.GREEN: "artifacts/green.log"}
STAMP_FILE = "artifacts/model_allowed.at"
_GATE_COMMAND_RE = re.compile(r"(?:[Rr]un )?`python gate\.py (\w+)`")


def hosted_words(message: str, model_window: bool = False) -> str:
    """A refusal written for gate.py, said for the hosted session: "run `python gate.py red`" -> "capture red".

    ``model_window``: the server provides the model, so asking it in the
    model window takes the model step too (sessions_app.model_window.window).
    """

    def said(match: re.Match) -> str:
        step = match.group(1)
        if step == Step.MODEL and model_window:
            words = "ask the model in the model window (or capture model: the button, or `gate model` in the terminal)"
        else:
            words = f"capture {step} (the button, or `gate {step}` in the terminal)"
        return words[0].upper() + words[1:] if match.group(0).startswith("Run") else words

    return _GATE_COMMAND_RE.sub(said, message)


def model_window_offered(invitation: Invitation) -> bool:
    """Whether this server provides the model here: then its window takes the model step too."""
    return effective_policy(invitation.packet_version) == PacketVersion.ModelPolicy.PROVIDED


def refusal_words(refusal: str, *, hosted: bool = False, model_window: bool = False) -> str:
    """A refused receipt's reason as the candidate reads it, where it is shown.

    The server keeps a step gate.py refused on the candidate's machine, and an
    upload refused as too soon, in the reviewers' words ("on the candidate's
    machine", "the candidate was told to wait"); the candidate reads them in
    their own. ``hosted``: said for the hosted session (hosted_words), for a
    step the server captured or a page of the workspace; otherwise gate.py's
    commands stay. Backticks mark commands: pages render them as code.
    """
    kind = gate_refusal_kind(refusal)
    if kind is not None:
        rest = refusal.removeprefix(GATE_REFUSED_ORDER if kind == "order" else GATE_REFUSED_OUTCOME)
        offline = rest.startswith(GATE_REFUSED_OFFLINE)
        reason = rest.removeprefix(GATE_REFUSED_OFFLINE).removeprefix(":").strip()
        when = " while it was offline (it told the server when next online)" if offline else ""
        refusal = f"gate.py refused this step on your machine{when}: {reason}"
    elif refusal.startswith(f"{UPLOAD_TOO_SOON} sent "):
        refusal = ("Too soon after your previous upload, so it was not stored; you were told how long to wait. "
                   "Your earlier uploads are kept.")
    return hosted_words(refusal, model_window) if hosted else refusal


def _file_hashes(files: Mapping[str, bytes]) -> dict[str, str]:
    return {path: hashlib.sha256(data).hexdigest() for path, data in sorted(files.items())}


@contextmanager
def _capture_lock(invitation: Invitation):
    """One capture or hosted submit at a time per invitation (workspaces.capture_lock); busy: SessionRefused."""
    from .hosted.workspaces import WorkspaceBusy, WorkspaceElsewhere, capture_lock, check_held_here

    try:
        check_held_here(invitation.pk)  # why first: the lock lives in the workspace's folder, on its host
    except WorkspaceElsewhere as exc:
        raise SessionRefused(str(exc), "unavailable", retry_after=60) from None
    try:
        with capture_lock(invitation):
            yield
    except WorkspaceBusy:
        raise SessionRefused("A capture or submit of this workspace is already running. Wait for it to "
                             "finish (a few seconds), then try again.", "busy", retry_after=5) from None


def _check_hosted(invitation: Invitation) -> None:
    """Refusals before anything is read: a revoked link, before Start, no workspace opened yet."""
    if invitation.revoked_at is not None:
        raise SessionRefused("This link is not valid.", "invalid")
    check_hosted_route(invitation)
    if invitation.started_at is None:
        raise SessionRefused("Your clock has not started yet. Press Start on your page first.", "not_started")
    if not Workspace.objects.filter(invitation_id=invitation.pk).exists():
        raise SessionRefused("There is no workspace for this link yet: open the workspace page first, "
                             "then capture.", "no_workspace")


def _snapshot(invitation: Invitation) -> dict[str, bytes]:
    from .hosted import workspaces

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


def _run_tests(invitation: Invitation, files: Mapping[str, bytes], step: str) -> tuple[str, str | None, dict]:
    """The packet's test command over ``files`` in a fresh grading sandbox, judged as any rerun.

    Returns what it printed, why the step is refused on what the run really
    did (None: it holds up; grading.engine.integrity.capture_refusal) and the run's
    integrity record ({} for a command that is not pytest's).
    """
    from grading.engine.integrity import capture_refusal, run_capture
    from grading.engine.sandbox import SandboxUnavailable
    from shared.sandboxes import sandbox_for_spec

    spec = invitation.packet_version.to_spec()
    try:
        # why the files themselves: the sandbox unpacks them into its own tmpfs, nothing on disk here.
        # why judged: a conftest.py that rewrites pytest's reports turned unfixed code into a captured green.
        result, record = run_capture(sandbox_for_spec(spec), files, spec.test_command)
    except SandboxUnavailable as exc:
        log.error("capture for invitation %s: the sandbox is unavailable: %s", invitation.pk, exc)
        raise SessionRefused("The server could not run your tests just now (its sandbox is unavailable). Nothing "
                             "was captured; try again in a minute.", "unavailable") from exc
    return result.log, capture_refusal(step, result, record), record or {}


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
    from .hosted.workspaces import append_marker

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
        judged, integrity = None, {}
        if step == Step.MODEL:
            log_text = files.get(PROMPT_FILE, b"").decode("utf-8", "replace")
        elif order:
            log_text = ""
        else:
            log_text, judged, integrity = _run_tests(invitation, files, step)
        report = GateReport(log_text=log_text, tree_hashes=_file_hashes(files), local_time="")
        try:
            receipt = do_record_gate_step(invitation, step, report, captured_by=GateReceipt.CapturedBy.SERVER,
                                          judged=judged, integrity=integrity)
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
    artifacts/model_allowed.at the server's time of the model step. The
    prompts and replies of the exchanges the server holds fill in
    artifacts/prompt.txt and model.md (model-2.md...) where those are missing.
    """
    files = dict(files)
    for step, path in SERVER_LOGS.items():
        files.pop(path, None)
        receipt = _latest_server_receipt(invitation, step)
        if receipt is not None:
            files[path] = receipt.log_text.encode("utf-8")
    # why only where missing or blank: a reply the server wrote stays as the workspace has it (the reviewers
    # compare it with the exchange); one that never reached the files, or was removed, is the server's copy.
    for path, data in server_reply_files(invitation).items():
        if not files.get(path, b"").strip():
            files[path] = data
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
    # why: a workspace host runs as root, and the web server (its own user) serves this upload to reviewers
    hand_over(folder, path)
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
    window = model_window_offered(invitation)
    return [replace(m, what=hosted_words(m.what, window)) for m in missing_artifacts(files, model_step)]


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
    from .hosted.workspaces import append_marker, publish_recording

    _check_hosted(invitation)
    try:
        check_upload_allowed(invitation, via="hosted")  # the deadline plus grace, and the upload limits
    except SessionRefused as exc:
        do_record_refused_upload(invitation, exc.record, code=exc.code)
        raise
    with _capture_lock(invitation):
        files = hosted_files(invitation, _snapshot(invitation))
        missing = hosted_missing(invitation, files)
        if missing and not anyway:
            raise WorkspaceIncomplete(missing)
        result = _store_workspace(invitation, files)
    append_marker(invitation, "submitted")
    publish_recording(invitation)  # why now: the reviewer's page, on any host, replays it with this submission
    result.missing = tuple(missing)
    return result


def files_digest(files: Mapping[str, bytes]) -> str:
    """One sha256 over the names and contents of ``files``: equal exactly when the files are.

    why not the zip's hash: every zip of the same files differs by its entries' time (_zipped).
    """
    digest = hashlib.sha256()
    for path, data in sorted(files.items()):
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def _store_workspace(invitation: Invitation, files: Mapping[str, bytes], *, at_deadline: bool = False,
                     record_prefix: str = "") -> UploadResult:
    """The hosted submit's last steps, for the Submit and the deadline alike: zip, size check, upload.

    A refusal (too large, the clock, the limits) is kept as any refused upload is, and raised.
    """
    data = _zipped(invitation, files)
    try:
        if len(data) > settings.UPLOAD_MAX_BYTES:
            raise SessionRefused(f"Your workspace zips to {human_size(len(data))}, more than the limit of "
                                 f"{human_size(settings.UPLOAD_MAX_BYTES)}. Remove large files you do not "
                                 "need, then submit again.", "too_large")
        return do_accept_upload(invitation, _incoming(data, f"{invitation.packet_version.packet.slug}.zip"),
                                via="hosted", files_digest=files_digest(files), at_deadline=at_deadline)
    except SessionRefused as exc:
        do_record_refused_upload(invitation, record_prefix + exc.record, code=exc.code)  # kept as any refused upload is
        raise


AT_DEADLINE_REFUSED = "At the deadline the server could not submit the workspace: "


def _last_submitted_digest(invitation: Invitation) -> str:
    """The files_digest the deadline compares with: the newest submission's, else the seed's (nothing done).

    An uploaded zip (or a hosted submit older than the digest) has none, so anything counts as changed.
    """
    from .hosted.workspaces import seed_files

    last = Submission.objects.filter(invitation=invitation).order_by("-uploaded_at", "-pk").first()
    if last is not None:
        return last.files_digest
    return files_digest(seed_files(invitation))


def do_submit_at_deadline(invitation: Invitation, now: datetime | None = None) -> UploadResult | None:
    """The server submits a frozen hosted workspace that changed since its last submission (or since it was
    seeded, when there is none), once its uploads closed; None when nothing changed.

    The same path as the candidate's Submit (_snapshot, hosted_files, _store_workspace), as a Submit
    anyway: what lacks artifacts goes all the same, and reviewers see what is missing in its evidence.
    It is marked ``at_deadline``, takes no place among the candidate's limits, and is graded as any
    upload. Idempotent: a second call finds the same digest and does nothing; two at once take turns
    on the capture lock (the second is refused as busy, and the sweep calls it again), and the
    database keeps one submission per invitation and deadline (``for_deadline``). A deadline extended
    meanwhile stores nothing (None): the workspace reopens, and its new deadline submits it. Nothing
    happens unless the workspace is frozen and its deadline not settled yet. A workspace too big or too large
    to submit is kept as a refused upload (AT_DEADLINE_REFUSED), for the recruiter and the reviewers,
    and SessionRefused is raised, as are the snapshot's errors (WorkspaceUnavailable: try again).
    """
    from .hosted.workspaces import append_marker, publish_recording

    if invitation.revoked_at is not None or invitation.phase_at(now or timezone.now()) != Invitation.CLOSED:
        return None  # why: a revoked link submits nothing; an extended deadline is not there yet
    with _capture_lock(invitation):
        # why read again under the lock: the deadline may have been extended since the sweep read it, and a
        # reopening (workspaces.reopen) takes the same lock; an open workspace's files are the candidate's
        invitation.refresh_from_db(fields=["started_at", "deadline", "revoked_at"])
        if invitation.revoked_at is not None or invitation.phase_at(now or timezone.now()) != Invitation.CLOSED:
            return None
        if not Workspace.objects.filter(invitation=invitation, frozen_at__isnull=False,
                                        deadline_settled_at__isnull=True).exists():
            return None
        try:
            files = hosted_files(invitation, _snapshot(invitation))
        except SessionRefused as exc:
            if exc.code == "too_big":
                do_record_refused_upload(invitation, AT_DEADLINE_REFUSED + exc.record, code=exc.code)
            raise
        if files_digest(files) == _last_submitted_digest(invitation):
            return None
        try:
            result = _store_workspace(invitation, files, at_deadline=True, record_prefix=AT_DEADLINE_REFUSED)
        except IntegrityError:
            return None  # another sweep submitted it first: at most one per invitation and deadline
        except DeadlineMoved:
            return None  # extended since the check above: the workspace reopens for the extra time
        result.missing = tuple(hosted_missing(invitation, files))
    append_marker(invitation, "submitted at the deadline")
    publish_recording(invitation)
    return result


def capture_words(receipt: GateReceipt, test_command: str) -> str:
    """What a capture did, in words for the candidate (the page and the `gate` command say the same)."""
    step = receipt.step
    if not receipt.accepted:
        words = refusal_words(receipt.refusal, hosted=True, model_window=model_window_offered(receipt.invitation))
        return f"{step.capitalize()} not captured: {words}"
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
    now = timezone.now()
    phase = invitation.phase_at(now)
    if phase == Invitation.NOT_STARTED:
        lines.append("Your clock has not started yet.")
    elif phase == Invitation.RUNNING:
        left = invitation.seconds_left_at(now)
        lines.append(f"Time left: {left // 3600}h {left % 3600 // 60:02d}m (deadline "
                     f"{invitation.deadline:%Y-%m-%d %H:%M} UTC).")
    elif phase == Invitation.GRACE:
        lines.append(f"The deadline has passed; you can still submit for {grace_words()} after it.")
    else:
        lines.append("Time is up: nothing more is accepted.")
    receipts = list(GateReceipt.objects.filter(invitation=invitation).exclude(step=Step.UPLOAD)
                    .order_by("received_at", "pk"))
    if not receipts:
        lines.append("No step witnessed yet: `gate red` captures your red run.")
    window = model_window_offered(invitation)
    for r in receipts:
        if r.captured_by != GateReceipt.CapturedBy.SERVER:
            who = "sent by gate.py"
        else:
            who = "captured by the server" if r.accepted else "asked of the server"
        verdict = "accepted" if r.accepted else f"refused: {refusal_words(r.refusal, hosted=True, model_window=window)}"
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
            "server captured, and will be reviewed. You may keep working and submit again until the "
            "deadline; the latest accepted submission is reviewed.")
