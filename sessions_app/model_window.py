"""The model window's rules: when it is open, what a request may ask for, and the caps.

The HTTP side is in model_views.py, the upstream call in upstream.py, and the
record (ModelExchange and the model receipt) in actions.do_record_model_exchange.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Count, Sum

from shared.words import counted
from takehome.models import Invitation, PacketVersion, effective_policy

from . import actions
from .models import GateReceipt
from .upstream import Upstream

# Keys passed on to the upstream; everything else a client sends is dropped.
# why a list: n, tools, logit_bias and the like would change what a request costs or does.
PASSED_KEYS = ("temperature", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty")


class WindowRefused(Exception):
    """The window refuses this request: an HTTP status, an OpenAI error type and code, and the message."""

    def __init__(self, status: int, message: str, code: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.code, self.kind = status, message, code, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": None, "code": self.code}}


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
    if actions.session_phase(invitation) == "closed":
        raise WindowRefused(403, "Time is up: the model window closed with the gate "
                            f"{actions.grace_words()} after your deadline.", "deadline", "permission_error")
    if not GateReceipt.objects.filter(invitation=invitation, step=GateReceipt.Step.RED, accepted=True).exists():
        raise WindowRefused(403, "No red run has been witnessed yet. The model waits: run python gate.py red "
                            "first, then ask.", "red_not_witnessed", "permission_error")


def closed_because(invitation: Invitation) -> str:
    """Why the window is closed for this invitation now, in the endpoint's words; "" when it is open."""
    try:
        check_open(invitation)
    except WindowRefused as refused:
        return refused.message
    return ""


def used(invitation: Invitation) -> tuple[int, int]:
    """Requests and tokens (in and out) this invitation has used so far."""
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


def upstream_body(request_body: dict, version: PacketVersion, tokens_left: int) -> dict:
    """What is sent upstream: the messages, the packet's model, max_tokens capped, a few safe keys.

    Raises WindowRefused (400) when the messages are missing or not a list of
    {role, content} objects.
    """
    messages = request_body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise WindowRefused(400, "The request needs \"messages\": a list of {\"role\", \"content\"} objects.",
                            "missing_messages")
    for message in messages:
        if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), (str, list))):
            raise WindowRefused(400, "Each message needs a \"role\" (text) and a \"content\" (text).",
                                "invalid_messages")
    asked = request_body.get("max_tokens") or request_body.get("max_completion_tokens")
    cap = min(settings.MODEL_MAX_REPLY_TOKENS, tokens_left)
    body = {key: request_body[key] for key in PASSED_KEYS if key in request_body}
    body.update(messages=messages, model=version.model_in_use,
                max_tokens=min(asked, cap) if type(asked) is int and asked > 0 else cap)  # why type(): True is an int too
    if request_body.get("stream") is True:
        # why include_usage: the last chunk then carries the token counts the caps need.
        body.update(stream=True, stream_options={"include_usage": True})
    return body
