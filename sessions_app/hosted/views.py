"""The hosted session's gate buttons: capture red, model or green, and submit (POST, htmx-friendly).

The terminal and the workspace page are sessions_app.hosted.consumers and the
workspace view; these answer a button. An htmx request gets the gate panel
back with the outcome in it; a plain form post is redirected to the
workspace page with the outcome as a message. A submit of a workspace that
lacks artifacts the reviewers look for stores nothing and answers with the
panel (the whole workspace page, for a plain form post) saying which, and a
"Submit anyway" button that posts again with ``anyway``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from csp.constants import NONCE
from csp.decorators import csp_update
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from sessions_app import actions
from sessions_app.models import GateReceipt, Submission
from sessions_app.views import not_offered, with_invitation, workspace_context
from takehome.models import Invitation, PacketVersion, effective_policy

from . import workspaces

PANEL = "sessions_app/_workspace_gate.html"
log = logging.getLogger(__name__)


def workspace_url(token: str) -> str:
    """The workspace page; the landing page until the workspace page is there."""
    try:
        return reverse("sessions_app:workspace", args=[token])
    except NoReverseMatch:
        return reverse("sessions_app:landing", args=[token])


def gate_panel_context(invitation: Invitation, token: str) -> dict:
    """What the gate panel shows: the steps the server captured, and whether the model step is asked for."""
    accepted = set(GateReceipt.objects.filter(invitation=invitation, accepted=True)
                   .exclude(step=GateReceipt.Step.UPLOAD).values_list("step", flat=True))
    latest = {}
    window = actions.model_window_offered(invitation)
    for receipt in invitation.receipts.filter(step__in=actions.CAPTURE_STEPS).order_by("received_at", "pk"):
        latest[receipt.step] = receipt
        # the candidate's words, said for this page (gate.py's commands become the workspace's)
        receipt.refusal_words = actions.refusal_words(receipt.refusal, hosted=True, model_window=window)
    return {
        # why here: the panel is swapped after each button, and the list must follow it
        "captures": [latest[step] for step in actions.CAPTURE_STEPS if step in latest],  # the last of each, accepted or not
        "token": token,
        "invitation": invitation,
        "captured": [step for step in actions.CAPTURE_STEPS if step in accepted],
        "model_step": effective_policy(invitation.packet_version) != PacketVersion.ModelPolicy.NONE,
        "submitted": Submission.objects.filter(invitation=invitation).count(),
        "phase": invitation.phase,
    }


def _answer(request: HttpRequest, invitation: Invitation, token: str, ok: bool, message: str) -> HttpResponse:
    if request.htmx:
        context = {**gate_panel_context(invitation, token), "outcome": message, "outcome_ok": ok}
        # why 200 for a refusal: htmx swaps only successful answers, and the refusal is the answer
        return render(request, PANEL, context)
    (messages.success if ok else messages.error)(request, message)
    return redirect(workspace_url(token))


@require_POST
@with_invitation
def capture(request: HttpRequest, invitation: Invitation, token: str, step: str) -> HttpResponse:
    """Run the packet's tests over the workspace on the server and keep the log as the step's (red|model|green)."""
    if step not in actions.CAPTURE_STEPS:
        return _answer(request, invitation, token, False, f"There is no step called {step[:20]!r} to capture: "
                       "use red, model or green.")
    try:
        receipt = actions.do_capture(invitation, step)
    except actions.SessionRefused as exc:
        if exc.code == "work_mode":
            return not_offered(request, invitation, token, exc)
        return _answer(request, invitation, token, False, exc.message)
    message = actions.capture_words(receipt, invitation.packet_version.test_command)
    return _answer(request, invitation, token, receipt.accepted, message)


def _confirm(request: HttpRequest, invitation: Invitation, token: str, missing: list) -> HttpResponse:
    """Nothing was submitted: the panel names what is missing and offers Submit anyway (200, htmx swaps it)."""
    if request.htmx:
        return render(request, PANEL, {**gate_panel_context(invitation, token), "missing": missing})
    # why the page itself, not a redirect: the list and the second button are this answer's, not a message's
    return render(request, "sessions_app/workspace.html", {**workspace_context(invitation, token), "missing": missing})


@require_POST
# why the workspace page's nonce: a plain form post may get the whole page back (see _confirm)
@csp_update({"style-src": [NONCE]})
@with_invitation
def submit(request: HttpRequest, invitation: Invitation, token: str) -> HttpResponse:
    """Send the workspace for review, with the server's captured logs, the way an upload goes.

    Missing artifacts stop it, unless the form says ``anyway`` (the Submit anyway button).
    """
    try:
        result = actions.do_submit_workspace(invitation, anyway=request.POST.get("anyway") == "yes")
    except actions.WorkspaceIncomplete as exc:
        return _confirm(request, invitation, token, exc.missing)
    except actions.SessionRefused as exc:
        if exc.code == "work_mode":
            return not_offered(request, invitation, token, exc)
        return _answer(request, invitation, token, False, exc.message)
    return _answer(request, invitation, token, True, actions.submitted_words(result))


@require_POST
@with_invitation
def restart(request: HttpRequest, invitation: Invitation, token: str) -> HttpResponse:
    """Restart the workspace's shell (the terminal's offer when it cannot attach): its processes end, its files stay."""
    try:
        workspaces.restart_shell(invitation)
    except workspaces.RestartRefused as exc:
        messages.error(request, str(exc))
    except Exception as exc:  # the workspace's own errors carry the words for the candidate
        messages.error(request, f"The shell could not be restarted: {exc}")
    else:
        messages.success(request, "The shell was restarted: every program in it ended, and your files are as "
                                  "they were.")
    return redirect(workspace_url(token))


# -- after the deadline: the files read-only, and what was submitted when ---------------------------------------

@dataclass
class Folder:
    """One folder of a closed workspace's file tree: its sub-folders and its files (name, path), sorted."""

    name: str
    folders: list[Folder] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)


def file_tree(paths) -> Folder:
    """The folders and files of ``paths`` ("a/b.py"), nested, each level sorted by name."""
    root = Folder("")
    for path in sorted(paths):
        *parents, name = path.split("/")
        folder = root
        for part in parents:
            found = next((f for f in folder.folders if f.name == part), None)
            if found is None:
                found = Folder(part)
                folder.folders.append(found)
            folder = found
        folder.files.append((name, path))
    return root


def closed_context(invitation: Invitation, shown: str | None = None) -> dict:
    """What the workspace page says once uploads closed: every submission with its time, and the frozen files
    read-only, ``shown`` (a path among them) with its contents."""
    context: dict = {"kept_submissions": list(Submission.objects.filter(invitation=invitation)
                                              .order_by("uploaded_at", "pk"))}
    try:
        files = workspaces.closed_files(invitation)
    except workspaces.WorkspaceElsewhere as exc:
        return {**context, "closed_problem": str(exc)}
    except Exception:
        log.exception("could not read the closed workspace of invitation %s", invitation.pk)
        return {**context, "closed_problem": "The server could not read your workspace's files just now (our "
                                             "fault, it is logged). Reload the page in a minute; they are kept."}
    context["closed_files"] = files
    if files is None:
        return context
    context["tree"] = file_tree(files)
    if shown is not None:
        data = files.get(shown)
        text = None
        if data is not None:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                pass  # said as a binary file, never shown as mojibake
        context["shown"] = {"path": shown, "known": shown in files, "too_large": shown in files and data is None,
                            "text": text, "size": len(data or b""), "limit_kb": workspaces.SHOWN_FILE_BYTES >> 10}
    return context


@require_GET
@never_cache
@with_invitation
def workspace_files(request: HttpRequest, invitation: Invitation, token: str) -> HttpResponse:
    """A closed workspace's files, read-only: the tree, and the contents of the file ``?path=`` names."""
    try:
        actions.check_hosted_route(invitation)
    except actions.SessionRefused as exc:
        return not_offered(request, invitation, token, exc)
    if invitation.phase != Invitation.CLOSED:
        # why: while the workspace is open its files are the terminal's, read there
        return redirect(workspace_url(token))
    shown = request.GET.get("path") or None
    return render(request, "sessions_app/workspace_files.html",
                  {**workspace_context(invitation, token), **closed_context(invitation, shown)})
