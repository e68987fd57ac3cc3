"""The candidate's side, behind the link. HTTP only: parse, authorise by token, call an action, render.

Pages a browser posts (Start, the upload form) keep CSRF. The endpoints the
gate calls (gate steps, status, and the upload when the gate sends it)
authenticate by the token in the URL and answer JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import wraps

from csp.constants import NONCE
from csp.decorators import csp_update
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.html import format_html
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from shared.http import from_gate, htmx_redirect, wants_json
from shared.request_start import request_began
from takehome.models import Invitation, PacketVersion, effective_policy
from takehome.templatetags.takehome_tags import utc_time
from takehome.unavailable import NO_SPACE, Unavailable

from . import actions
from .bundle import VENV_STEPS, build_bundle, model_base_url, server_python
from .forms import GateReceiptForm, UploadForm
from .links import TooManyLookups, invitation_for
from .model_window import window as model_window
from .models import GateReceipt, ModelExchange, Submission, Workspace
from .uploads import HashingUploadHandler, human_size

INVALID = "This link is not valid."
TOO_MANY = ("Too many requests: too many links that do not work were tried from your address in the last minute. "
            "Wait a minute, then try again.")
GATE_STEPS = (GateReceipt.Step.RED, GateReceipt.Step.MODEL, GateReceipt.Step.GREEN)
# Multipart framing around the file: boundaries and part headers are small.
MULTIPART_SLACK = 64 * 1024


class LinkProblem(Exception):
    """The token found no live invitation, or this address asked too often."""

    def __init__(self, status: int, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after

    def response(self) -> JsonResponse:
        return with_retry_after(JsonResponse({"message": self.message}, status=self.status), self.retry_after)


def with_retry_after(response: HttpResponse, seconds: int | None) -> HttpResponse:
    if seconds is not None:
        response["Retry-After"] = str(seconds)
    return response


def _lookup(request: HttpRequest, token: str) -> Invitation:
    try:
        invitation = invitation_for(request, token)
    except TooManyLookups as exc:
        raise LinkProblem(429, TOO_MANY, retry_after=exc.retry_after)
    if invitation is None:
        raise LinkProblem(404, INVALID)
    return invitation


def _problem_page(request: HttpRequest, problem: LinkProblem) -> HttpResponse:
    if wants_json(request):
        return problem.response()
    if problem.status == 429:
        return with_retry_after(render(request, "sessions_app/too_many.html", status=429), problem.retry_after)
    return render(request, "sessions_app/invalid_link.html", status=404)


def with_invitation(view=None, *, json_only: bool = False):
    """Look the token up once for a candidate view, which then gets the invitation.

    An unknown or revoked token, or too many look-ups from one address, gets
    the plain "not valid" page (or JSON for the gate and for json_only views).
    """

    def decorator(view):
        @wraps(view)
        def wrapped(request: HttpRequest, token: str, *args, **kwargs):
            try:
                invitation = _lookup(request, token)
            except LinkProblem as problem:
                return problem.response() if json_only else _problem_page(request, problem)
            return view(request, invitation, token, *args, **kwargs)

        return wrapped

    return decorator(view) if view is not None else decorator


@dataclass(frozen=True)
class ReviewedUpload:
    """Which upload reviewers will see, as the candidate's page says it."""

    upload: Submission | None  # the one under review, as far as the candidate is told
    refused_since: tuple[Submission, ...] = ()  # newer uploads refused, which did not replace it
    none_accepted: bool = False  # every upload so far was refused: reviewers see only that

    @property
    def for_review(self) -> Submission | None:
        """The upload to mark "for review" / "(reviewed)": None when none was accepted (``upload`` is then
        the latest refused one, which reviewers see only as refused)."""
        return None if self.none_accepted else self.upload


def reviewed_upload(submissions: list[Submission]) -> ReviewedUpload:
    """From the invitation's uploads, newest first: the one under review and what did not replace it.

    why from ``candidate_status`` and not ``is_latest``: the flag moves when the
    worker refuses or fails an upload, at a time that grading's duration decides;
    the candidate's page must not move with it (docs/evidence.md).
    """
    if not submissions:
        return ReviewedUpload(None)
    upload = next((s for s in submissions if s.candidate_status != Submission.Status.REJECTED), None)
    if upload is None:
        return ReviewedUpload(submissions[0], none_accepted=True)
    newer = [s for s in submissions if (s.uploaded_at, s.pk) > (upload.uploaded_at, upload.pk)]
    return ReviewedUpload(upload, tuple(newer))


def clock_context(invitation: Invitation, token: str) -> dict:
    """What every candidate page shows of the session: whose, which packet, and the clock."""
    now = timezone.now()
    return {
        "invitation": invitation,
        "version": invitation.packet_version,
        "token": token,
        "phase": invitation.phase_at(now),
        "seconds_left": invitation.seconds_left_at(now),
        "upload_closes_at": invitation.upload_closes_at,
        # why both times: the page's countdown corrects for the candidate's clock by the server's now (clock.js)
        "server_now_ms": int(now.timestamp() * 1000),
        "deadline_ms": int(invitation.deadline.timestamp() * 1000) if invitation.deadline else None,
    }


def candidate_receipts(invitation: Invitation) -> list[GateReceipt]:
    """The gate steps the server holds, each refused one with ``refusal_words``: its reason in the candidate's
    words, said for where the step was taken (a server capture: the workspace's way; else gate.py's)."""
    window = actions.model_window_offered(invitation)
    receipts = list(invitation.receipts.exclude(step=GateReceipt.Step.UPLOAD).order_by("received_at", "pk"))
    for r in receipts:
        r.refusal_words = actions.refusal_words(r.refusal, hosted=r.captured_by == GateReceipt.CapturedBy.SERVER,
                                                model_window=window)
    return receipts


def session_context(invitation: Invitation, token: str, form: UploadForm | None = None) -> dict:
    submissions = list(invitation.submissions.order_by("-uploaded_at", "-pk"))
    return {
        **clock_context(invitation, token),
        "grace": actions.grace_words(),
        "upload_limits": actions.upload_limits_words(),
        "unpacked_limits": actions.unpacked_limits_words(),
        "max_bytes": settings.UPLOAD_MAX_BYTES,
        "max_size": human_size(settings.UPLOAD_MAX_BYTES),
        "form": form or UploadForm(),
        "submissions": submissions,
        "reviewed": reviewed_upload(submissions),
        "receipts": candidate_receipts(invitation),
        "server_python": server_python(invitation.packet_version),
        "venv_steps": VENV_STEPS,
        "model_panel": model_panel(invitation),
        "model_policy": effective_policy(invitation.packet_version),
        "model_base_url": model_base_url(token),
        "work_mode": invitation.packet_version.work_mode,
    }


@dataclass(frozen=True)
class ModelPanel:
    """The chat (sessions_app/_model_chat.html): closed and why (or open), the conversations so far.

    ``exchanges`` carry ``reply_html`` (the reply's Markdown, rendered safely);
    ``next`` is what a prompt sent now goes with (window.History); ``where`` is
    "page" (the candidate's page) or "workspace" (the pane beside the terminal);
    ``written``: replies are written into a hosted workspace; ``prompt_start``:
    artifacts/prompt.txt, to start the first exchange from in the workspace.
    """

    closed_because: str
    exchanges: list[ModelExchange]
    next: model_window.History
    where: str = "page"
    written: bool = False
    prompt_start: str = ""
    history_turns: int = model_window.HISTORY_TURNS
    history_chars: int = model_window.HISTORY_CHARS


def model_panel(invitation: Invitation, where: str = "page") -> ModelPanel | None:
    """The panel, only for a version whose model is provided here; None for own or none."""
    from .model_window.rendering import render_reply

    if effective_policy(invitation.packet_version) != PacketVersion.ModelPolicy.PROVIDED:
        return None
    exchanges = list(invitation.model_exchanges.all())
    for exchange in exchanges:
        exchange.reply_html = render_reply(exchange.reply)
    closed = model_window.closed_because(invitation)
    written = Workspace.objects.filter(invitation_id=invitation.pk).exists()
    start = ""
    if where == "workspace" and written and not closed and not exchanges:
        start = _prompt_start(invitation)
    return ModelPanel(closed, exchanges, model_window.history(invitation, "continue"), where, written, start)


def _prompt_start(invitation: Invitation) -> str:
    """artifacts/prompt.txt of the workspace, "" when there is none (or it cannot be read now)."""
    from .hosted import workspaces
    from .model_window.terminal import PROMPT_CAP

    try:
        data = workspaces.read_file(invitation, actions.PROMPT_FILE, PROMPT_CAP)
    except Exception:  # the page shows an empty box rather than fail
        return ""
    return (data or b"").decode("utf-8", "replace")


@require_GET
@never_cache
@with_invitation
def model_chat(request: HttpRequest, invitation: Invitation, token: str) -> HttpResponse:
    """The chat, for htmx: the whole pane (while closed it asks every few seconds) or its history after an exchange.

    A plain visit goes to the page the chat is on.
    """
    where = "workspace" if request.GET.get("where") == "workspace" else "page"
    if not request.htmx:
        return htmx_redirect(request, "sessions_app:workspace" if where == "workspace" else "sessions_app:landing",
                             token=token)
    template = "sessions_app/_model_chat.html"
    if request.htmx.target == "model-history":
        template += "#model-history"
    return render(request, template, {"token": token, "model_panel": model_panel(invitation, where)})


@require_GET
@never_cache
@vary_on_headers("HX-Request")
@with_invitation
def landing(request: HttpRequest, invitation: Invitation, token: str) -> HttpResponse:
    """The page behind the link: prompt, rules, clock, download, upload, uploads so far.

    htmx asks for one part: the model window's history after an exchange, else the uploads.
    """
    actions.do_open_invitation(invitation)
    if request.htmx and request.htmx.target == "model-history":
        return render(request, "sessions_app/_model_chat.html#model-history",
                      {"token": token, "model_panel": model_panel(invitation)})
    template = "sessions_app/session_detail.html"
    if request.htmx:
        template += "#upload-list"
    return render(request, template, session_context(invitation, token))


# what the page below the banner offers once the clock runs, per the packet version's work_mode
NEXT_STEP = {
    PacketVersion.WorkMode.ZIP: "Download the project below.",
    PacketVersion.WorkMode.HOSTED: "Open your workspace below.",
    PacketVersion.WorkMode.BOTH: "Choose below: open a workspace in your browser, or download the project.",
}


@require_http_methods(["GET", "POST"])
@never_cache
@with_invitation
def start(request: HttpRequest, invitation: Invitation, token: str) -> HttpResponse:
    """Start the clock, once, after a confirmation that states the time limit and the deadline.

    GET (and a POST without ``confirm=yes``) shows the confirmation and
    changes nothing; a second Start changes nothing and says so.
    """
    if invitation.started_at is None and (request.method == "GET" or request.POST.get("confirm") != "yes"):
        version = invitation.packet_version
        return render(request, "sessions_app/start_confirm.html", {
            "invitation": invitation, "version": version, "token": token,
            "deadline_if_now": invitation.deadline_if_started(timezone.now()), "grace": actions.grace_words(),
        })
    if request.method == "POST" and actions.do_start_session(invitation):
        # why <time> elements: the page adds the candidate's local time beside the server's UTC.
        messages.success(request, format_html(
            "Your clock is running: {} minutes, until {}. {}", invitation.packet_version.time_limit_minutes,
            utc_time(invitation.deadline, "H:i T"), NEXT_STEP[invitation.packet_version.work_mode]))
    else:
        messages.info(request, format_html(
            "Your clock was already started at {}; nothing changed. The deadline is still {}.",
            utc_time(invitation.started_at, "H:i T"), utc_time(invitation.deadline, "H:i T")))
    return htmx_redirect(request, "sessions_app:landing", token=token)


@require_GET
@never_cache
@with_invitation
def download(request: HttpRequest, invitation: Invitation, token: str) -> HttpResponse:
    """The project folder as a zip, with the candidate's own gate.py. Only once the clock runs."""
    try:
        actions.check_zip_route(invitation)
    except actions.SessionRefused as exc:
        return not_offered(request, invitation, token, exc)
    if invitation.started_at is None:
        message = "Press Start first: the download is ready once your clock is running."
        if wants_json(request):
            return JsonResponse({"message": message}, status=409)
        messages.error(request, message)
        return htmx_redirect(request, "sessions_app:landing", token=token)
    data = build_bundle(invitation, token)
    response = HttpResponse(data, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{invitation.packet.slug}.zip"'
    return response


@csrf_exempt  # why: called by gate.py with the token in the URL; see from_gate()
@require_POST
@with_invitation(json_only=True)
def gate_step(request: HttpRequest, invitation: Invitation, token: str, step: str) -> JsonResponse:
    """Witness one gate step (red, model, green): store a receipt with the server's time."""
    try:
        actions.check_zip_route(invitation)
    except actions.SessionRefused as exc:
        return JsonResponse({"accepted": False, "code": exc.code, "message": exc.message}, status=409)
    if step not in GATE_STEPS:
        return JsonResponse({"message": f"There is no gate step called {step[:20]!r}: use red, model or green."},
                            status=404)
    try:
        payload = json.loads(request.body or b"{}")
    except RequestDataTooBig:
        return JsonResponse({"message": "The receipt is too large; nothing was recorded."}, status=413)
    except (ValueError, UnicodeDecodeError):
        return JsonResponse({"message": "The receipt is not JSON; nothing was recorded."}, status=400)
    if not isinstance(payload, dict):
        return JsonResponse({"message": "The receipt must be a JSON object; nothing was recorded."}, status=400)
    form = GateReceiptForm(payload)
    if not form.is_valid():
        return JsonResponse({"message": f"The receipt is not valid ({form.first_error()}); nothing was recorded."},
                            status=400)
    # why: a gate.py carries its own candidate's token; one sent to another link is someone else's work.
    if form.cleaned_data["token"] and form.cleaned_data["token"] != token:
        return JsonResponse({"message": "This gate belongs to another candidate's link; nothing was recorded."},
                            status=403)
    report = form.report()
    if report.gate_refused:
        # A step gate.py refused on the candidate's machine: kept as a refused receipt, never a step.
        try:
            kept = actions.do_record_gate_refusal(invitation, step, report)
        except actions.SessionRefused as exc:
            return JsonResponse({"accepted": False, "message": exc.message}, status=409)
        if kept is None:
            return JsonResponse({"accepted": False, "recorded": False,
                                 "message": "Refusal not kept: this link has too many already."}, status=200)
        return JsonResponse({**_receipt_body(kept), "recorded": True}, status=200)
    try:
        receipt = actions.do_record_gate_step(invitation, step, report)
    except actions.SessionRefused as exc:
        if exc.receipt is None:
            return JsonResponse({"accepted": False, "message": exc.message}, status=409)
        # Kept as a refused receipt, and answered as a late upload is.
        return JsonResponse(_receipt_body(exc.receipt), status=refusal_status(exc.code))
    return JsonResponse(_receipt_body(receipt), status=201 if receipt.accepted else 409)


def _receipt_body(receipt: GateReceipt) -> dict:
    return {
        "accepted": receipt.accepted,
        "receipt": receipt.pk,
        "step": receipt.step,
        "received_at": receipt.received_at.isoformat(),
        "message": actions.refusal_words(receipt.refusal) if receipt.refusal else f"{receipt.step} witnessed.",
    }


@require_GET
@never_cache
@with_invitation(json_only=True)
def status(request: HttpRequest, invitation: Invitation, token: str) -> JsonResponse:
    """What the server witnessed, the uploads and their grading, and the time left (JSON)."""
    iso = lambda value: value.isoformat() if value else None  # noqa: E731
    submissions = list(invitation.submissions.order_by("-uploaded_at", "-pk"))
    reviewed = reviewed_upload(submissions)
    window = actions.model_window_offered(invitation)
    now = timezone.now()
    return JsonResponse({
        "packet": invitation.packet.title,
        "server_time": now.isoformat(),
        "started_at": iso(invitation.started_at),
        "deadline": iso(invitation.deadline),
        "uploads_close_at": iso(invitation.upload_closes_at),
        "seconds_left": invitation.seconds_left_at(now),
        "phase": invitation.phase_at(now),
        "receipts": [
            {"id": r.pk, "step": r.step, "accepted": r.accepted,
             "refusal": actions.refusal_words(r.refusal, hosted=r.captured_by == GateReceipt.CapturedBy.SERVER,
                                              model_window=window),
             "received_at": iso(r.received_at), "local_time": r.local_time}
            for r in invitation.receipts.order_by("received_at", "pk")
        ],
        # why received or rejected only, decided as each upload arrived: what grading does later
        # (and when) never reaches the candidate (docs/evidence.md).
        "submissions": [
            {"id": s.pk, "sha256": s.sha256, "size": s.size, "uploaded_at": iso(s.uploaded_at),
             "status": s.candidate_status, "reviewed": s == reviewed.for_review, "is_latest": s == reviewed.for_review,
             "via": s.via, "refusal": s.unpack_refusal}
            for s in submissions
        ],
    })


def refusal_status(code: str) -> int:
    """The HTTP status of an upload (or late gate step) the rules refuse: 429 for the upload limits,
    409 for a route the version's work mode does not offer."""
    if code == "work_mode":
        return 409
    return 429 if code in ("too_soon", "too_many_uploads") else 403


def not_offered(request: HttpRequest, invitation: Invitation, token: str, exc: actions.SessionRefused) -> HttpResponse:
    """409: a route the packet version's work mode does not offer, said in a sentence (JSON for clients)."""
    if wants_json(request):
        return JsonResponse({"code": exc.code, "message": exc.message}, status=409)
    return render(request, "sessions_app/not_offered.html", {"invitation": invitation, "token": token,
                                                             "message": exc.message}, status=409)


def _upload_refused(request, invitation, token, code: str, message: str, status: int,
                    retry_after: int | None = None, record: str | None = None) -> HttpResponse:
    """A refused upload: JSON for the gate; for a browser, the form again with the reason.

    A browser gets 200 (htmx 2 swaps only 2xx by default), except for the
    upload limits: those answer 429 whoever asks, with Retry-After when waiting
    helps, and the page's script lets htmx swap that one in. Every refusal is
    kept as a refused upload receipt, for the recruiter and the reviewers, in
    ``record``'s words when given (SessionRefused.record), else the message's.
    """
    actions.do_record_refused_upload(invitation, record or message, code=code)
    if wants_json(request):
        response = JsonResponse({"code": code, "message": message}, status=status)
    else:
        form = UploadForm(data={}, refusal=(code, message))
        form.is_valid()
        template = "sessions_app/session_detail.html"
        if request.htmx:
            template += "#upload-form"
        response = render(request, template, session_context(invitation, token, form),
                          status=429 if status == 429 else 200)
    return with_retry_after(response, retry_after)


def _rules_refused(request, invitation, token, exc: actions.SessionRefused) -> HttpResponse:
    return _upload_refused(request, invitation, token, exc.code, exc.message, refusal_status(exc.code),
                           exc.retry_after, record=exc.record)


@csrf_exempt  # why: the gate posts here by token; browsers are checked in _receive_browser
@require_POST
@with_invitation
def upload(request: HttpRequest, invitation: Invitation, token: str) -> HttpResponse:
    """Receive a zip (multipart field ``archive``), keep it by hash and queue its grading.

    The deadline is judged by when the request began, before its body arrived (shared.request_start).
    """
    began = request_began(request)
    try:
        actions.check_upload_allowed(invitation, began=began)
    except actions.SessionRefused as exc:
        return _rules_refused(request, invitation, token, exc)
    handler = HashingUploadHandler(request, max_bytes=settings.UPLOAD_MAX_BYTES, media_root=settings.MEDIA_ROOT)
    form_messages = UploadForm(max_bytes=settings.UPLOAD_MAX_BYTES).messages
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    # why before reading the body: a declared size over the limit is refused without taking it in.
    if declared > settings.UPLOAD_MAX_BYTES + MULTIPART_SLACK:
        return _upload_refused(request, invitation, token, "too_large", form_messages["too_large"], 413)
    request.upload_handlers = [handler]
    try:
        if from_gate(request):
            return _receive(request, invitation, token, handler, via="gate", began=began)
        return _receive_browser(request, invitation, token, handler, via="browser", began=began)
    finally:
        # why: a file refused late (CSRF, deadline, a busy database) or cut short must not stay
        # behind; a stored one has moved already.
        handler.discard()


def _receive(request, invitation: Invitation, token: str, handler: HashingUploadHandler, via: str,
             began=None) -> HttpResponse:
    form = UploadForm(request.POST, request.FILES, max_bytes=settings.UPLOAD_MAX_BYTES)
    if handler.error == "no_space":
        raise Unavailable(NO_SPACE)  # answered 503 with Retry-After by takehome.unavailable
    form.upload_error = handler.error
    if not form.is_valid():
        code, message = form.first_error()
        status = 413 if code == "too_large" else 400
        return _upload_refused(request, invitation, token, code, message, status)
    try:
        result = actions.do_accept_upload(invitation, form.cleaned_data["archive"], via=via, began=began)
    except actions.SessionRefused as exc:
        return _rules_refused(request, invitation, token, exc)
    submission = result.submission
    message = (f"Upload received and stored (sha256 {submission.sha256[:12]}…, {human_size(submission.size)}). "
               + (f"It cannot be graded: {submission.unpack_refusal}" if submission.unpack_refusal
                  else "It will be reviewed."))
    # why no database read from here on: the upload is committed, and an answer that failed now
    # (503: "not stored") would tell the candidate the opposite of the truth.
    if wants_json(request):
        return JsonResponse({
            "message": message,
            "submission": submission.pk,
            "receipt": result.receipt.pk,
            "sha256": submission.sha256,
            "size": submission.size,
            "received_at": submission.uploaded_at.isoformat(),
            "status": submission.candidate_status,
            "refusal": submission.unpack_refusal,
        }, status=201)
    # why not the same words: the receipt page below says what becomes of it, accepted or not.
    stored = f"Upload received and stored (sha256 {submission.sha256[:12]}…, {human_size(submission.size)})."
    if submission.unpack_refusal:
        messages.error(request, f"{stored} It cannot be graded: see why below.")
    else:
        messages.success(request, stored)
    return htmx_redirect(request, "sessions_app:submission-detail", token=token, pk=submission.pk)


# why: browsers keep CSRF; the check runs after the upload handler is in place.
_receive_browser = csrf_protect(_receive)


@require_GET
@never_cache
@vary_on_headers("HX-Request")
@with_invitation
def submission_detail(request: HttpRequest, invitation: Invitation, token: str, pk: int) -> HttpResponse:
    """The receipt of one upload: its hash, the server's time, and its grading status."""
    # why filter by invitation: one candidate's token never shows another's upload.
    submission = invitation.submissions.filter(pk=pk).first()
    if submission is None:
        return render(request, "sessions_app/invalid_link.html", status=404)
    receipt = GateReceipt.objects.filter(submission=submission).first()
    template = "sessions_app/submission_detail.html"
    if request.htmx:
        template += "#grading-state"
    reviewed = reviewed_upload(list(invitation.submissions.order_by("-uploaded_at", "-pk")))
    return render(request, template, {"invitation": invitation, "token": token, "submission": submission,
                                      "receipt": receipt, "reviewed": reviewed})


def workspace_context(invitation: Invitation, token: str) -> dict:
    from .hosted.consumers import hosted_allowed
    from .hosted.views import closed_context, gate_panel_context

    context = {
        **clock_context(invitation, token),
        **gate_panel_context(invitation, token),
        "hosted": hosted_allowed(invitation.packet_version),
        "model_provided": effective_policy(invitation.packet_version) == PacketVersion.ModelPolicy.PROVIDED,
        "model_panel": model_panel(invitation, "workspace"),
    }
    if context["phase"] == Invitation.CLOSED and context["hosted"]:
        context.update(closed_context(invitation))  # the files read-only, what was submitted when
    return context


@require_GET
@never_cache
# why a nonce for styles on this page only: xterm.js sizes and colours the terminal with
# <style> elements it creates; terminal.js gives each the nonce. Scripts stay 'self' only.
@csp_update({"style-src": [NONCE]})
@with_invitation
def workspace(request: HttpRequest, invitation: Invitation, token: str) -> HttpResponse:
    """The hosted session: the terminal in the page, with the gate's buttons and their results beside it."""
    try:
        actions.check_hosted_route(invitation)
    except actions.SessionRefused as exc:
        return not_offered(request, invitation, token, exc)
    if invitation.started_at is None:
        messages.info(request, "Press Start first: the workspace opens once your clock is running.")
        return htmx_redirect(request, "sessions_app:landing", token=token)
    return render(request, "sessions_app/workspace.html", workspace_context(invitation, token))
