"""The model window's record beside what the zip says was asked and answered.

No Django. The server's exchanges (sessions_app.models.ModelExchange) come in
as plain ``Exchange`` values, like gate receipts do; ``model_section`` builds
the evidence's ``model`` section (docs/evidence.md).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

MATCHES, DIFFERS, ABSENT = "matches", "differs", "absent"
NO_MODEL = "none"  # PacketVersion.ModelPolicy.NONE: the "paper patch", red then green with no model step


@dataclass(frozen=True)
class Exchange:
    """One request through the model window and what came back, as the server stored it."""

    at: datetime
    messages: list
    reply: str
    model: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    error: str = ""
    options: dict | None = None  # the request's keys sent besides the messages (model, max_tokens...)
    client_gone: bool = False  # the client left before the reply ended: ``reply`` is what it had been sent
    finished: bool = True  # False: the server stopped during the call and never wrote its end
    conversation: int = 1  # the invitation's conversation it belongs to, from 1 (its earlier turns are in messages)
    artifact: str = ""  # where the server wrote the reply in a hosted workspace (artifacts/model-2.md), "" if nowhere

    def to_dict(self) -> dict:
        return {
            "at": self.at.isoformat(),
            "messages": self.messages,
            "reply": self.reply,
            "model": self.model,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "latency_s": round(self.latency_s, 3),
            "error": self.error or None,
            "options": self.options or {},
            "client_gone": self.client_gone,
            "finished": self.finished,
            "conversation": self.conversation,
            "artifact": self.artifact,
        }


@dataclass(frozen=True)
class ModelRecord:
    """The packet's model policy, whether an upstream is configured, and the invitation's exchanges."""

    policy: str
    configured: bool
    exchanges: tuple[Exchange, ...] = ()


def has_model_step(record: ModelRecord | None) -> bool:
    """Whether the packet asks for the model step (prompt, stamp, reply); unknown policy: it does."""
    return record is None or record.policy != NO_MODEL


def content_text(content) -> str:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"]
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        )
    return ""


def user_messages(messages) -> list[str]:
    """The text of each user message sent, in order."""
    if not isinstance(messages, list):
        return []
    return [content_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"]


def _prompts(messages) -> list[str]:
    """What may stand in prompt.txt: each user message, and all of them together (a conversation)."""
    users = user_messages(messages)
    return users + ["\n\n".join(users)] if len(users) > 1 else users


def _lines(text: str) -> list[str]:
    # why: editors and terminals change line ends and trailing blanks; the words are what count
    return [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").strip().split("\n")]


def _same(a: str, b: str) -> bool:
    return a.split() == b.split()


def compare(text: str | None, sent: Iterable[tuple[int, str]], name: str) -> dict:
    """``text`` (a file of the zip) against the server's texts, each with its exchange's number.

    matches: equal to one of them, whitespace and line ends aside; differs: a
    unified diff against the last one; absent: no file (or a blank one), or
    nothing on record to compare with.
    """
    sent = [(number, s) for number, s in sent if s.strip()]
    if text is None or not text.strip() or not sent:
        return {"result": ABSENT, "exchange": None, "diff": ""}
    for number, s in sent:
        if _same(text, s):
            return {"result": MATCHES, "exchange": number, "diff": ""}
    number, s = sent[-1]
    diff = difflib.unified_diff(
        _lines(s), _lines(text), f"exchange {number} (server)", f"artifacts/{name}", lineterm=""
    )
    return {"result": DIFFERS, "exchange": number, "diff": "\n".join(diff) + "\n"}


def model_section(record: ModelRecord | None, prompt: str | None, reply: str | None) -> dict:
    """The evidence's ``model`` section; ``record`` None when the policy is not known (grade_zip gives it, with no exchange)."""
    exchanges = record.exchanges if record else ()
    numbered = list(enumerate(exchanges, start=1))
    return {
        "policy": record.policy if record else None,
        "configured": record.configured if record else False,
        "exchanges": [e.to_dict() for e in exchanges],
        "prompt_matches": compare(prompt, [(n, m) for n, e in numbered for m in _prompts(e.messages)], "prompt.txt"),
        "reply_matches": compare(reply, [(n, e.reply) for n, e in numbered], "model.md"),
    }
