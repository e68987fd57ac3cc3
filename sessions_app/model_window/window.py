"""The model window's rules: when it is open, what a request may ask for, and the caps.

The HTTP side is in model_views.py, the upstream call in upstream.py, and the
record (ModelExchange and the model receipt) in actions: do_reserve_model_exchange
before the upstream call, do_finish_model_exchange after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Max, Sum

from sessions_app import actions
from sessions_app.models import GateReceipt, ModelExchange
from shared.words import counted
from takehome.models import Invitation, PacketVersion, effective_policy

from .upstream import Upstream

# Keys passed on to the upstream, each with the kind of value it takes; everything else a client sends is
# dropped. why a list: n, tools, logit_bias and the like would change what a request costs or does.
NUMBER_KEYS = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
PASSED_KEYS = (*NUMBER_KEYS, "stop", "seed")
# The roles a message may have: a conversation in text. why: tool and function messages, and content
# parts other than text (images by any URL, audio, files), would reach the model beside what the
# reviewer reads as the exchange.
ROLES = ("system", "user", "assistant")
MAX_STOPS = 4
# takehome's own key in a request (dropped before the upstream): "continue" sends the conversation's earlier
# turns before the request's messages, "new" starts the invitation's next conversation; without it the
# messages go as the client sent them (a client that keeps its own history), in the current conversation.
CONVERSATION_KEY = "conversation"
# The earlier turns sent with a "continue": the last HISTORY_TURNS exchanges of the conversation, fewer when
# their prompts and replies add up to more than HISTORY_CHARS characters (about a quarter as many tokens).
# why bounded: every turn sent is paid again in the invitation's token cap; the panel says where it cuts.
HISTORY_TURNS = 8
HISTORY_CHARS = 24_000


class WindowRefused(Exception):
    """The window refuses this request: an HTTP status, an OpenAI error type and code, and the message."""

    def __init__(self, status: int, message: str, code: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.code, self.kind = status, message, code, kind
        self.param: str | None = None  # the request's key at fault, when one is

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def upstream() -> Upstream:
    return Upstream(settings.MODEL_URL, settings.MODEL_KEY, settings.MODEL_TIMEOUT_S)


def check_open(invitation: Invitation) -> None:
    """Raise WindowRefused unless this invitation may use the window now."""
    policy = effective_policy(invitation.packet_version)
    if policy != PacketVersion.ModelPolicy.PROVIDED:
        why = ("this take-home uses no model" if policy == PacketVersion.ModelPolicy.NONE
               else "you use your own model for this take-home, and save the prompt and reply in artifacts/")
        raise WindowRefused(404, f"This server provides no model here: {why}.", "model_not_provided",
                            "not_found_error")
    if not settings.MODEL_URL:
        raise WindowRefused(503, "This server has no model configured at the moment. Tell the person who "
                            "invited you; meanwhile use your own model and save the prompt and reply in "
                            "artifacts/.", "model_not_configured", "server_error")
    if invitation.started_at is None:
        raise WindowRefused(403, "Your clock has not started yet. Press Start on your page first.",
                            "not_started", "permission_error")
    if invitation.phase == Invitation.CLOSED:
        raise WindowRefused(403, "Time is up: the model window closed with the gate "
                            f"{actions.grace_words()} after your deadline.", "deadline", "permission_error")
    # why counted_receipts: on a hosted-only version only a red the server captured opens the window
    if not actions.counted_receipts(invitation).filter(step=GateReceipt.Step.RED).exists():
        version = invitation.packet_version
        hosted = "capture red in your workspace (the button, or `gate red` in the terminal)"
        if not actions.zip_offered(version):
            first = hosted
        elif actions.hosted_offered(version):
            # why both: one message serves the workspace's chat pane and the downloaded copy's `gate.py ask`
            first = f"{hosted}, or run python gate.py red where you work on a download"
        else:
            first = "run python gate.py red"
        raise WindowRefused(403, f"No red run has been witnessed yet. The model waits: {first} first, then ask.",
                            "red_not_witnessed", "permission_error")


def closed_because(invitation: Invitation) -> str:
    """Why the window is closed for this invitation now, in the endpoint's words; "" when it is open."""
    try:
        check_open(invitation)
    except WindowRefused as refused:
        return refused.message
    return ""


def used(invitation: Invitation) -> tuple[int, int]:
    """Requests and tokens (in and out) this invitation has used so far, those under way by their reservation."""
    found = invitation.model_exchanges.aggregate(n=Count("pk"), tin=Sum("tokens_in"), tout=Sum("tokens_out"))
    return found["n"], (found["tin"] or 0) + (found["tout"] or 0)


def check_caps(invitation: Invitation) -> int:
    """Raise WindowRefused (429) past a per-invitation cap; else the tokens still allowed."""
    requests, tokens = used(invitation)
    if requests >= settings.MODEL_MAX_REQUESTS:
        raise WindowRefused(429, f"The model window's cap is reached: this link has sent "
                            f"{counted(requests, 'request')}, the most it allows. Your exchanges are kept.",
                            "request_cap", "rate_limit_error")
    if tokens >= settings.MODEL_MAX_TOKENS:
        raise WindowRefused(429, f"The model window's cap is reached: this link has used {tokens} tokens of "
                            f"{settings.MODEL_MAX_TOKENS}. Your exchanges are kept.", "token_cap", "rate_limit_error")
    return settings.MODEL_MAX_TOKENS - tokens


def _refused(message: str, code: str, param: str) -> WindowRefused:
    refused = WindowRefused(400, message, code)
    refused.param = param
    return refused


def _text_content(content, where: str) -> str | list[dict]:
    """A message's content rebuilt: text as it is, or a list of text parts, each only {type, text}."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise _refused("Each message needs a \"role\" (text) and a \"content\" (text).", "invalid_messages",
                       f"{where}.content")
    parts = []
    for number, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text" or not isinstance(part.get("text"), str):
            what = f"a part of type {kind!r}" if isinstance(kind, str) else "a part that is not text"
            raise _refused(f"The model window takes text only; {where}.content[{number}] is {what}. "
                           "Send the text itself.", "unsupported_content", f"{where}.content[{number}]")
        parts.append({"type": "text", "text": part["text"]})
    return parts


def sendable_messages(messages) -> list[dict]:
    """The messages rebuilt from the allow-list: each {role, content}, text only; WindowRefused (400) otherwise.

    Keys beside role and content (name, tool_calls...) are dropped, so what goes
    upstream is exactly what the record shows the reviewer.
    """
    if not isinstance(messages, list) or not messages:
        raise WindowRefused(400, "The request needs \"messages\": a list of {\"role\", \"content\"} objects.",
                            "missing_messages")
    rebuilt = []
    for number, message in enumerate(messages):
        where = f"messages[{number}]"
        if not (isinstance(message, dict) and isinstance(message.get("role"), str) and "content" in message):
            raise _refused("Each message needs a \"role\" (text) and a \"content\" (text).", "invalid_messages",
                           where)
        if message["role"] not in ROLES:
            raise _refused(f"The model window takes the roles system, user and assistant; {where} has the role "
                           f"{message['role'][:40]!r}.", "unsupported_role", f"{where}.role")
        rebuilt.append({"role": message["role"], "content": _text_content(message["content"], where)})
    return rebuilt


def _option(key: str, value):
    """A passed key's value as sent upstream; WindowRefused (400) when it is not of its kind."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if key in NUMBER_KEYS and is_number:
        return value
    if key == "seed" and type(value) is int:
        return value
    if key == "stop" and (isinstance(value, str) or (isinstance(value, list) and len(value) <= MAX_STOPS
                                                      and all(isinstance(v, str) for v in value))):
        return value
    kind = {"seed": "a whole number", "stop": f"a text or a list of at most {MAX_STOPS} texts"}.get(key, "a number")
    raise _refused(f"\"{key}\" must be {kind}.", "invalid_value", key)


def upstream_body(request_body: dict, version: PacketVersion, tokens_left: int) -> dict:
    """What is sent upstream, rebuilt: the messages, the packet's model, max_tokens capped, a few safe keys.

    Raises WindowRefused (400) when the messages are missing or not a list of
    {role, content} objects in text, or a passed key's value is not of its kind.
    """
    messages = sendable_messages(request_body.get("messages"))
    asked = request_body.get("max_tokens") or request_body.get("max_completion_tokens")
    cap = min(settings.MODEL_MAX_REPLY_TOKENS, tokens_left)
    body = {key: _option(key, request_body[key]) for key in PASSED_KEYS if request_body.get(key) is not None}
    body.update(messages=messages, model=version.model_in_use,
                max_tokens=min(asked, cap) if type(asked) is int and asked > 0 else cap)  # why type(): True is an int too
    if request_body.get("stream") is True:
        # why include_usage: the last chunk then carries the token counts the caps need.
        body.update(stream=True, stream_options={"include_usage": True})
    return body


@dataclass(frozen=True)
class History:
    """What a request of an invitation is sent with: its conversation's number and the earlier turns.

    ``messages`` are the turns sent (user then assistant, oldest first),
    ``turns`` how many exchanges they are, ``left_out`` how many earlier
    exchanges of the conversation are no longer sent (past the bound).
    """

    conversation: int
    messages: tuple[dict, ...] = ()
    turns: int = 0
    left_out: int = 0


def current_conversation(invitation: Invitation) -> int:
    """The number of the invitation's latest conversation (1 before any exchange)."""
    return invitation.model_exchanges.aggregate(n=Max("conversation"))["n"] or 1


def history(invitation: Invitation, mode: str | None) -> History:
    """What a request with ``conversation`` = ``mode`` ("continue", "new" or None) is sent with."""
    if mode == "new":
        started = invitation.model_exchanges.exists()
        return History(current_conversation(invitation) + 1 if started else 1)
    number = current_conversation(invitation)
    if mode != "continue":
        return History(number)
    turns = list(invitation.model_exchanges.filter(conversation=number).answered())
    kept: list[ModelExchange] = []
    size = 0
    for exchange in reversed(turns[-HISTORY_TURNS:]):
        size += len(exchange.prompt) + len(exchange.reply)
        if size > HISTORY_CHARS:
            break
        kept.insert(0, exchange)
    messages = tuple(m for e in kept for m in ({"role": "user", "content": e.prompt},
                                               {"role": "assistant", "content": e.reply}))
    return History(number, messages, len(kept), len(turns) - len(kept))


def conversation_mode(request_body: dict) -> str | None:
    """The request's ``conversation`` key: "continue", "new" or None; WindowRefused (400) for anything else."""
    mode = request_body.get(CONVERSATION_KEY)
    if mode is None or mode in ("continue", "new"):
        return mode
    raise _refused('"conversation" must be "continue" or "new".', "invalid_value", CONVERSATION_KEY)


def reserve(invitation: Invitation, request_body: dict) -> tuple[ModelExchange, dict]:
    """Check the caps and reserve this request's place in them, in one step; the exchange and the body to send.

    why one step under the invitation's lock: two requests that both checked
    the caps before either was counted would both pass (a cap of 100 served
    157 to 60 threads). The reservation counts the request and its tokens (the
    prompt's estimate and the max_tokens granted) until the exchange finishes
    with the real counts. Raises WindowRefused past a cap or for a bad body.
    """
    sendable_messages(request_body.get("messages"))  # why first: a bad body is refused without taking the lock
    mode = conversation_mode(request_body)

    def body_within_caps() -> tuple[dict, int]:
        # why under the lock too: two requests at once continue the same turns, or start one new conversation each
        before = history(invitation, mode)
        body = upstream_body(request_body, invitation.packet_version, check_caps(invitation))
        body["messages"] = [*before.messages, *body["messages"]]
        return body, before.conversation

    return actions.do_reserve_model_exchange(invitation, body_within_caps)
