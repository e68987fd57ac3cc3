"""The model window's endpoint, OpenAI-compatible: /t/<token>/model/v1/chat/completions and /models.

The token in the path authenticates; whatever API key a client sends (its
Authorization header) is ignored and never passed on. Every refusal is an
OpenAI-shaped error, {"error": {"message", "type", "param", "code"}}, so any
client shows the message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from takehome.models import Invitation

from . import actions, model_window
from .links import TooManyLookups, invitation_for
from .model_window import WindowRefused
from .uploads import human_size
from .upstream import Call, UpstreamError, rough_tokens
from .views import INVALID, TOO_MANY


def _error(refused: WindowRefused) -> JsonResponse:
    return JsonResponse(refused.body(), status=refused.status)


def _open_invitation(request: HttpRequest, token: str) -> Invitation:
    """The invitation behind the token, with the window open for it; else WindowRefused."""
    try:
        invitation = invitation_for(request, token)
    except TooManyLookups:
        raise WindowRefused(429, TOO_MANY, "too_many_lookups", "rate_limit_error") from None
    if invitation is None:
        raise WindowRefused(404, INVALID, "invalid_link", "not_found_error")
    model_window.check_open(invitation)
    return invitation


@require_GET
def models(request: HttpRequest, token: str) -> JsonResponse:
    """The one model this window offers, as /v1/models lists them."""
    try:
        invitation = _open_invitation(request, token)
    except WindowRefused as refused:
        return _error(refused)
    name = invitation.packet_version.model_in_use
    return JsonResponse({"object": "list", "data": [{"id": name, "object": "model", "created": 0,
                                                      "owned_by": "takehome"}]})


def _read_body(request: HttpRequest) -> dict:
    limit = settings.MODEL_MAX_REQUEST_BYTES
    too_big = WindowRefused(413, f"The request is larger than the {human_size(limit)} the model window takes. "
                            "Send a shorter prompt.", "request_too_large")
    try:
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            raise too_big
        raw = request.body
    except RequestDataTooBig:
        raise too_big from None
    if len(raw) > limit:
        raise too_big
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise WindowRefused(400, "The request body is not valid JSON.", "invalid_json") from None
    if not isinstance(body, dict):
        raise WindowRefused(400, "The request body must be a JSON object.", "invalid_json")
    return body


@csrf_exempt  # why: called by API clients with the token in the URL, never by a form on a page
@require_POST
def chat_completions(request: HttpRequest, token: str) -> HttpResponse:
    """Pass one chat request to the upstream and its reply back (streamed when asked), on record."""
    try:
        invitation = _open_invitation(request, token)
        request_body = _read_body(request)
        tokens_left = model_window.check_caps(invitation)
        body = model_window.upstream_body(request_body, invitation.packet_version, tokens_left)
    except WindowRefused as refused:
        return _error(refused)
    sent_at = timezone.now()
    call = Call(model_window.upstream(), body)
    try:
        call.send()
        if not body.get("stream"):
            reply = call.whole()
    except UpstreamError as exc:
        call.close()
        _record(invitation, call, sent_at, str(exc))
        return _error(WindowRefused(502, str(exc), "upstream_error", "server_error"))
    if body.get("stream"):
        response = StreamingHttpResponse(_relay(invitation, call, sent_at), content_type="text/event-stream")
        # why: a proxy that buffers (nginx, some Caddy set-ups) would hold the events until the end.
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    call.close()
    _record(invitation, call, sent_at, "")
    return JsonResponse(reply)


def _relay(invitation: Invitation, call: Call, sent_at: datetime) -> Iterator[bytes]:
    """The upstream's events as they arrive; an error event when the stream breaks; the record at the end."""
    error = ""
    try:
        yield from call.stream()
    except UpstreamError as exc:
        error = str(exc)
        yield b"data: " + json.dumps(WindowRefused(502, error, "upstream_error", "server_error").body()).encode()
        yield b"\n\n"
    except GeneratorExit:
        error = "The client closed the connection before the reply ended."
        raise
    finally:
        call.close()
        _record(invitation, call, sent_at, error)


def _record(invitation: Invitation, call: Call, sent_at: datetime, error: str) -> None:
    """Store the exchange. Token counts without the upstream's usage: one per four characters."""
    reply, messages = call.reply, call.body["messages"]
    estimated = reply.tokens_in is None
    if estimated:
        sent_text = "".join(m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
                            for m in messages)
        tokens_in, tokens_out = rough_tokens(sent_text), rough_tokens(reply.text)
    else:
        tokens_in, tokens_out = reply.tokens_in, reply.tokens_out
    actions.do_record_model_exchange(
        invitation, at=sent_at, messages=messages, reply=reply.text, model=reply.model or call.body["model"],
        streamed=bool(call.body.get("stream")), tokens_in=tokens_in, tokens_out=tokens_out,
        tokens_estimated=estimated, latency_s=round(call.latency_s, 3), error=error[:500],
    )
