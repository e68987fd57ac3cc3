"""`gate ask` in a hosted workspace: the model window, asked from the terminal through the gate socket.

The gate host (sessions_app.hosted.gate_host) hands the request here; the
prompt is the command's text, or artifacts/prompt.txt read from the
workspace. The reply goes back as it arrives, through ``say``, and ends as
any exchange of the window does: on record (finish_exchange), and written
into the workspace as its artifacts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from sessions_app import actions
from sessions_app.models import ModelExchange
from shared.words import counted
from takehome.models import Invitation

from . import window as model_window
from .upstream import Call, UpstreamError
from .views import finish_exchange
from .window import WindowRefused

log = logging.getLogger(__name__)

PROMPT_CAP = 64 * 1024  # bytes of artifacts/prompt.txt read, as the window takes a request


def _prompt_from_workspace(invitation: Invitation) -> str:
    from sessions_app.hosted import workspaces

    try:
        data = workspaces.read_file(invitation, actions.PROMPT_FILE, PROMPT_CAP)
    except Exception as exc:  # too big, or the workspace cannot be opened: said, never raised through the socket
        raise WindowRefused(400, f"artifacts/prompt.txt could not be read: {exc}", "prompt_unreadable") from None
    text = (data or b"").decode("utf-8", "replace")
    if not text.strip():
        raise WindowRefused(400, "Write artifacts/prompt.txt first: the exact prompt you will send to the model "
                            "(or give it after the command: gate ask \"your question\").", "missing_prompt")
    return text


def _reserve(invitation_id: int, prompt: str | None, new: bool) -> tuple[ModelExchange, dict]:
    close_old_connections()
    try:
        invitation = (Invitation.objects.select_related("packet_version__packet")
                      .filter(pk=invitation_id, revoked_at__isnull=True).first())
        if invitation is None:
            raise WindowRefused(404, "This session's link is no longer valid.", "invalid_link")
        model_window.check_open(invitation)
        text = _prompt_from_workspace(invitation) if prompt is None else prompt
        return model_window.reserve(invitation, {"messages": [{"role": "user", "content": text}], "stream": True,
                                                 model_window.CONVERSATION_KEY: "new" if new else "continue"})
    finally:
        close_old_connections()


def _saved_words(exchange: ModelExchange) -> str:
    exchange.refresh_from_db()
    earlier = exchange.earlier_messages // 2
    sent = (f"with {counted(earlier, 'earlier exchange')} of it sent along" if earlier
            else "its first exchange")
    where = (f"saved in {exchange.artifact}" if exchange.artifact
             else "kept by the server (it could not write it into your workspace; Submit adds it)")
    return f"Conversation {exchange.conversation}, {sent}. The reply is {where}."


async def ask(invitation_id: int, prompt: str | None, new: bool, say: Callable[[str], Awaitable[None]]) -> dict:
    """Ask the model for the workspace behind the socket; the reply's text through ``say``; the outcome in words."""
    try:
        exchange, body = await sync_to_async(_reserve, thread_sensitive=False)(invitation_id, prompt, new)
    except WindowRefused as refused:
        return {"ok": False, "message": refused.message}
    call = Call(model_window.upstream(), body, reply_id=f"chatcmpl-{exchange.pk}")
    delivered, error, gone = [], "", False
    try:
        await call.send()
        async for event in call.stream():
            if event.text:
                await say(event.text)
                delivered.append(event.text)
    except UpstreamError as exc:
        error = str(exc)
    except (ConnectionError, OSError):
        gone = True  # the terminal's gate went away (Ctrl+C): the record says so
    finally:
        await call.close()
        await finish_exchange(exchange, call, "".join(delivered), error=error, client_gone=gone)
    if error or gone:
        return {"ok": False, "message": error or "The reply was cut off: the gate command stopped."}
    return {"ok": True, "message": await sync_to_async(_saved_words, thread_sensitive=False)(exchange)}
