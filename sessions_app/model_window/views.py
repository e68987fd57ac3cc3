"""The model window's endpoint, OpenAI-compatible: /t/<token>/model/v1/chat/completions and /models.

The token in the path authenticates; whatever API key a client sends (its
Authorization header) is ignored and never passed on. Every refusal is an
OpenAI-shaped error, {"error": {"message", "type", "param", "code"}}, so any
client shows the message.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from sessions_app import actions
from sessions_app.links import TooManyLookups, invitation_for
from sessions_app.models import ModelExchange
from sessions_app.uploads import human_size
from sessions_app.views import INVALID, TOO_MANY
from takehome.models import Invitation

from . import window as model_window
from .upstream import Call, UpstreamError
from .window import WindowRefused

DONE = b"data: [DONE]\n\n"


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
    if request.content_type != "application/json":
        # why: a form or a file upload is no chat request; saying so beats a puzzling "not valid JSON".
        sent = request.content_type or "no Content-Type"
        raise WindowRefused(415, f"The model window takes Content-Type: application/json; this request was "
                            f"sent as {sent[:80]}.", "unsupported_media_type")
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
async def chat_completions(request: HttpRequest, token: str) -> HttpResponse:
    """Pass one chat request to the upstream and its reply back (streamed when asked), on record.

    why async: under daphne a synchronous view's streamed reply is read to its
    end before the first byte is sent, and it holds one of daphne's few view
    threads (ASGI_THREADS) for the whole reply; here each event goes out as
    the upstream's arrives, and a reply under way holds no thread.
    """
    try:
        invitation = await sync_to_async(_open_invitation)(request, token)
        request_body = _read_body(request)
        exchange, body = await sync_to_async(model_window.reserve)(invitation, request_body)
    except WindowRefused as refused:
        return _error(refused)
    call = Call(model_window.upstream(), body, reply_id=f"chatcmpl-{exchange.pk}")
    if body.get("stream"):
        response = StreamingHttpResponse(_relay(exchange, call), content_type="text/event-stream")
        # why: a proxy that buffers (nginx, some Caddy set-ups) would hold the events until the end.
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return _said(response, exchange)
    try:
        await call.send()
        reply = await call.whole()
    except UpstreamError as exc:
        await finish_exchange(exchange, call, "", error=str(exc))
        return _error(WindowRefused(502, str(exc), "upstream_error", "server_error"))
    except asyncio.CancelledError:
        # why: the client left while the upstream was still answering; it was sent nothing.
        await finish_exchange(exchange, call, "", client_gone=True)
        raise
    finally:
        await call.close()
    await finish_exchange(exchange, call, call.reply.text)
    return _said(JsonResponse(reply), exchange)


def _said(response: HttpResponse, exchange: ModelExchange) -> HttpResponse:
    """The conversation the exchange is in, and how many earlier turns went with it, for gate.py to say."""
    response["X-Takehome-Conversation"] = str(exchange.conversation)
    response["X-Takehome-Earlier-Turns"] = str(exchange.earlier_messages // 2)
    return response


async def _relay(exchange: ModelExchange, call: Call) -> AsyncIterator[bytes]:
    """The reply's events as the upstream's arrive; an error event when it fails; the record at the end.

    What is recorded is what was handed to the client's connection: an event
    counts once the server has taken it and asked for the next. When the
    client leaves, daphne cancels the response and this stops reading the
    upstream; the record says so.
    """
    delivered, error, gone, finished = [], "", False, False
    try:
        try:
            await call.send()
            async for event in call.stream():
                if event.data == DONE:
                    # why before [DONE]: the client that hears the end finds the exchange on record, and in
                    # a hosted workspace its artifacts written; every event with text was handed over already.
                    finished = True
                    await finish_exchange(exchange, call, "".join(delivered))
                yield event.data
                delivered.append(event.text)
        except UpstreamError as exc:
            error = str(exc)
            rest = call.rest()
            if rest is not None:
                yield rest.data
                delivered.append(rest.text)
            yield b"data: " + json.dumps(WindowRefused(502, error, "upstream_error", "server_error").body()).encode()
            yield b"\n\n"
    except (asyncio.CancelledError, GeneratorExit):
        gone = True  # why both: daphne cancels the task at an await, or the server closes us at a yield
        raise
    finally:
        await call.close()
        if not finished:
            await finish_exchange(exchange, call, "".join(delivered), error=error, client_gone=gone)


async def finish_exchange(exchange: ModelExchange, call: Call, delivered: str, error: str = "",
                  client_gone: bool = False) -> None:
    """The exchange on record with what the client was sent; a whole reply also written into a hosted workspace."""
    reply = call.reply
    await sync_to_async(actions.do_finish_model_exchange)(
        exchange, reply=delivered, model=reply.model or call.body["model"], tokens_in=reply.tokens_in,
        tokens_out=reply.tokens_out, latency_s=round(call.latency_s, 3), error=error, client_gone=client_gone)
    if not (error or client_gone) and delivered:
        await sync_to_async(actions.do_write_model_artifacts)(exchange)
