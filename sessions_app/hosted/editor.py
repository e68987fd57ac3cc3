"""The workspace page's editor: JSON endpoints to list, read, create, rename and save the workspace's files.

HTTP only: the token in the URL authorises, as for the terminal (refused when
the link is revoked, the session not started, not hosted, or closed); writes
are POSTs with the page's CSRF token. The work is
sessions_app.hosted.workspaces (the row, the mount) and
grading.engine.sandbox.editing (the files, never outside the workspace).
Every answer is JSON with a ``message`` a person can read; a save over a
change made on disk since the editor read the file is 409.
"""

from __future__ import annotations

import json

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from sessions_app.views import with_invitation
from takehome.models import Invitation

from . import workspaces

# why each status: the editor shows the message in every case; the status tells it what to offer
STATUS = {"missing": 404, "changed": 409, "too_big": 413, "full": 507, "frozen": 403, "closed": 503}


def _refused(invitation: Invitation) -> JsonResponse | None:
    """The terminal's refusals, said to the editor (403), or None when the workspace may be used."""
    from .consumers import refusal_for

    refusal = refusal_for(invitation)
    if refusal is None:
        return None
    return JsonResponse({"code": "not_allowed", "message": refusal[1]}, status=403)


def _answer(call) -> JsonResponse:
    """Run ``call`` (a workspaces.editor_* call) and turn the editor's refusals and the workspace's errors into JSON."""
    editing = workspaces.editing()
    try:
        return JsonResponse(call())
    except editing.FileChanged as exc:
        return JsonResponse({"code": exc.code, "message": exc.message, "sha256": exc.sha256}, status=409)
    except editing.EditRefused as exc:
        return JsonResponse({"code": exc.code, "message": exc.message}, status=STATUS.get(exc.code, 400))
    except workspaces.WorkspaceFull as exc:  # no uid free, or the workspace is on another server
        return JsonResponse({"code": "unavailable", "message": str(exc)}, status=503)
    except workspaces.backend().WorkspaceUnavailable as exc:
        return JsonResponse({"code": "unavailable", "message": f"The workspace could not be opened: {exc}"},
                            status=503)


def _payload(request: HttpRequest) -> dict | JsonResponse:
    try:
        payload = json.loads(request.body or b"{}")
    except RequestDataTooBig:
        return JsonResponse({"code": "too_big", "message": "The file is too large to save from the editor."},
                            status=413)
    except (ValueError, UnicodeDecodeError):
        return JsonResponse({"code": "bad_request", "message": "The request is not JSON; nothing was saved."},
                            status=400)
    if not isinstance(payload, dict):
        return JsonResponse({"code": "bad_request", "message": "The request must be a JSON object."}, status=400)
    return payload


def _write_request(request: HttpRequest, invitation: Invitation) -> dict | JsonResponse:
    """A write's JSON object, or the answer that refuses it (the session's state, then the request's shape)."""
    return _refused(invitation) or _payload(request)


@require_GET
@never_cache
@with_invitation(json_only=True)
def tree(request: HttpRequest, invitation: Invitation, token: str) -> JsonResponse:
    """The workspace's folders, files and links: path, kind, size, mtime (ns)."""
    if refused := _refused(invitation):
        return refused

    def listed():
        found = workspaces.editor_tree(invitation)
        return {"entries": [{"path": e.path, "kind": e.kind, "size": e.size, "mtime_ns": e.mtime_ns}
                            for e in found.entries], "truncated": found.truncated}

    return _answer(listed)


@require_GET
@never_cache
@with_invitation(json_only=True)
def read(request: HttpRequest, invitation: Invitation, token: str) -> JsonResponse:
    """One file (``?path=``): its text, or ``binary`` when it is not text, and the sha256 a save names as its base."""
    if refused := _refused(invitation):
        return refused

    def opened():
        found = workspaces.editor_read(invitation, request.GET.get("path", ""))
        answer = {"path": found.path, "sha256": found.sha256, "size": found.size, "text": found.text,
                  "binary": found.text is None}
        if found.text is None:
            answer["message"] = f"{found.path} is not text (a binary file): open it in the terminal."
        return answer

    return _answer(opened)


@require_POST
@with_invitation(json_only=True)
def save(request: HttpRequest, invitation: Invitation, token: str) -> JsonResponse:
    """Save ``{"path", "text", "base"}``: ``base`` is the sha256 the editor read; 409 when the disk changed since."""
    payload = _write_request(request, invitation)
    if isinstance(payload, JsonResponse):
        return payload
    text, base = payload.get("text"), payload.get("base")
    if not isinstance(text, str) or not isinstance(base, str):
        return JsonResponse({"code": "bad_request", "message": "A save needs the file's text and the hash it was "
                             "read with; nothing was saved."}, status=400)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return JsonResponse({"code": "bad_request", "message": "The text is not valid UTF-8; nothing was saved."},
                            status=400)

    def saved():
        sha256 = workspaces.editor_save(invitation, payload.get("path"), data, base)
        path = str(workspaces.editing().clean_path(payload.get("path")))
        return {"path": path, "sha256": sha256, "message": f"Saved {path}."}

    return _answer(saved)


@require_POST
@with_invitation(json_only=True)
def create(request: HttpRequest, invitation: Invitation, token: str) -> JsonResponse:
    """Make the empty file ``{"path"}``, with the folders on the way."""
    payload = _write_request(request, invitation)
    if isinstance(payload, JsonResponse):
        return payload

    def made():
        path = workspaces.editor_create(invitation, payload.get("path"))
        return {"path": path, "message": f"Created {path}."}

    return _answer(made)


@require_POST
@with_invitation(json_only=True)
def rename(request: HttpRequest, invitation: Invitation, token: str) -> JsonResponse:
    """Rename ``{"path"}`` to ``{"to"}`` inside the workspace."""
    payload = _write_request(request, invitation)
    if isinstance(payload, JsonResponse):
        return payload

    def renamed():
        old = str(workspaces.editing().clean_path(payload.get("path")))
        path = workspaces.editor_rename(invitation, old, payload.get("to"))
        return {"path": path, "message": f"Renamed {old} to {path}."}

    return _answer(renamed)
