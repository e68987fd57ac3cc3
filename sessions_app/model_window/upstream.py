"""The model window's call to the upstream chat API, asynchronous (httpx2), no Django.

The upstream is any OpenAI-compatible server. The URL, key and timeout come
from the caller (settings), never from the candidate's request, so nothing a
candidate sends can change where the call goes or which headers it carries.

Nothing the upstream sends is passed on as it came: each reply, plain or
streamed, is rebuilt from an allow-list (the reply's text, a finish reason from
a fixed list, token counts as numbers), its id and model name are ours, and
the text goes through a KeyFilter. why: an upstream (or a proxy before it) may
quote the key it was given anywhere, in an error event of a 200 stream, in a
reply's body, split over two chunks; the only free text that reaches the
client is the reply's and our own words, and neither can carry the key.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx2

ERROR_BODY_LIMIT = 2000  # bytes of an upstream's error body read for its message
REDACTED = "[key]"
# A reply that ends on this many characters of the key's start or more ends on "[key]" instead.
# why 8: shorter tails ("s", "sk-") are ordinary text that happens to end like the key begins.
KEY_TAIL_REDACTED = 8
FINISH_REASONS = ("stop", "length", "content_filter")


@dataclass(frozen=True)
class Upstream:
    base_url: str  # e.g. http://127.0.0.1:11434/v1, without /chat/completions
    key: str = field(repr=False)  # why: a traceback's locals must not show it
    timeout_s: float

    def redact(self, text: str) -> str:
        """``text`` with the key taken out, and a tail that starts the key cut off (it may have been cut short)."""
        return KeyFilter(self.key).whole(text)


class UpstreamError(Exception):
    """The upstream failed; the message says how in words a candidate can read (never the key)."""


def rough_tokens(text: str) -> int:
    """Tokens estimated as one per four characters (rounded up): English text with common tokenizers."""
    return math.ceil(len(text) / 4)


def _key_start_at_end(text: str, key: str) -> int:
    """How many characters at the end of ``text`` are the start of ``key`` (fewer than all of it)."""
    for n in range(min(len(text), len(key) - 1), 0, -1):
        if text.endswith(key[:n]):
            return n
    return 0


class KeyFilter:
    """Lets a reply's text out as it streams, all but the key, even when the key comes split over chunks.

    Each piece is let out at once except a tail that could be the start of the
    key: that waits for the next piece (or the end). Ordinary text rarely ends
    like the key begins, so the wait is nothing or a character or two.
    """

    def __init__(self, key: str):
        self.key, self.held = key, ""

    def feed(self, text: str) -> str:
        if not self.key:
            return text
        text = (self.held + text).replace(self.key, REDACTED)
        keep = _key_start_at_end(text, self.key)
        self.held = text[len(text) - keep:]
        return text[:len(text) - keep]

    def finish(self) -> str:
        held, self.held = self.held, ""
        return REDACTED if len(held) >= KEY_TAIL_REDACTED else held

    def whole(self, text: str) -> str:
        return self.feed(text) + self.finish()


@dataclass
class Reply:
    """What came back: the text (rebuilt, without the key), the model's name, and the token counts."""

    text: str = ""
    model: str = ""
    tokens_in: int | None = None  # from the upstream's usage; None when it gave none
    tokens_out: int | None = None
    finish_reason: str | None = None

    def take_usage(self, body: dict) -> dict | None:
        """The usage as numbers only (taken into the counts), or None when there is none."""
        usage = body.get("usage")
        if not isinstance(usage, dict):
            return None
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if type(prompt) is int and type(completion) is int and prompt >= 0 and completion >= 0:
            self.tokens_in, self.tokens_out = prompt, completion
            return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        return None


@dataclass(frozen=True)
class Event:
    """One server-sent event for the client, and the reply's text it carries."""

    data: bytes
    text: str = ""


class Call:
    """One POST to <base_url>/chat/completions: ``send()``, then ``whole()`` or ``stream()``; ``close()``.

    ``reply_id`` and the body's model name are what the client is told;
    ``reply`` holds what was read (the text without the key).
    """

    def __init__(self, upstream: Upstream, body: dict, reply_id: str):
        self.upstream, self.body, self.reply_id = upstream, body, reply_id
        self.started = time.monotonic()
        self.created = int(time.time())
        self.reply = Reply()
        self.filter = KeyFilter(upstream.key)
        self._client: httpx2.AsyncClient | None = None
        self._response: httpx2.Response | None = None

    @property
    def latency_s(self) -> float:
        return time.monotonic() - self.started

    async def send(self) -> None:
        """Send the request and read the status line; raise UpstreamError unless the upstream said 200."""
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.upstream.key:
            headers["Authorization"] = f"Bearer {self.upstream.key}"
        # why trust_env=False: no proxy or netrc from the environment decides where the key goes.
        self._client = httpx2.AsyncClient(timeout=self.upstream.timeout_s, trust_env=False)
        request = self._client.build_request("POST", self.upstream.base_url.rstrip("/") + "/chat/completions",
                                             content=json.dumps(self.body).encode(), headers=headers)
        try:
            self._response = await self._client.send(request, stream=True)
            if self._response.status_code != 200:
                raise UpstreamError(await self._http_error())
        except httpx2.TimeoutException:
            raise UpstreamError(self._timed_out()) from None
        except httpx2.HTTPError as exc:
            raise UpstreamError(f"The model server could not be reached ({type(exc).__name__}). "
                                "Try again in a minute; if it persists, tell the person who invited you.") from None

    async def whole(self) -> dict:
        """The plain reply, rebuilt for the client and taken into ``reply``."""
        try:
            data = await self._response.aread()
        except httpx2.TimeoutException:
            raise UpstreamError(self._timed_out()) from None
        except httpx2.HTTPError:
            raise UpstreamError(self._broken("reply")) from None
        try:
            body = json.loads(data)
            if not isinstance(body, dict):
                raise ValueError
            self._refuse_error(body)
            choices = body.get("choices") or [{}]
            message = choices[0].get("message") or {}
            content = message.get("content")
            self._take_model(body)
            self._take_finish(choices[0].get("finish_reason"))
        except (ValueError, AttributeError, TypeError, IndexError):
            raise UpstreamError("The model server sent a reply that is not valid JSON.") from None
        self.reply.text = self.filter.whole(content if isinstance(content, str) else "")
        rebuilt = {"id": self.reply_id, "object": "chat.completion", "created": self.created,
                   "model": self.body["model"],
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": self.reply.text},
                                "finish_reason": self.reply.finish_reason or "stop"}]}
        usage = self.reply.take_usage(body)
        if usage:
            rebuilt["usage"] = usage
        return rebuilt

    async def stream(self) -> AsyncIterator[Event]:
        """The reply's events for the client, rebuilt, as the upstream's arrive; ``data: [DONE]`` last.

        Raises UpstreamError when the stream breaks or ends before [DONE], when
        a data line is not JSON, or when the upstream sends an error in it.
        """
        lines = self._response.aiter_lines()
        while True:
            try:
                line = await anext(lines)
            except StopAsyncIteration:
                raise UpstreamError(self._broken("stream")) from None
            except httpx2.TimeoutException:
                raise UpstreamError(self._timed_out()) from None
            except httpx2.HTTPError:
                raise UpstreamError(self._broken("stream")) from None
            text = line.strip()
            if not text.startswith("data:"):
                continue  # comments, event names, blank lines: nothing a client needs
            data = text[5:].strip()
            if data == "[DONE]":
                rest = self.filter.finish()
                if rest:
                    yield self._chunk({"content": rest}, rest)
                yield Event(b"data: [DONE]\n\n")
                return
            try:
                chunk = json.loads(data)
                if not isinstance(chunk, dict):
                    raise ValueError
                self._refuse_error(chunk)
                event = self._rebuilt(chunk)
            except (ValueError, AttributeError, TypeError):
                raise UpstreamError("The model server sent a stream chunk that is not valid JSON.") from None
            if event is not None:
                yield event

    def rest(self) -> Event | None:
        """When the stream broke: the text the filter still held, as one last chunk (None when it held none)."""
        text = self.filter.finish()
        return self._chunk({"content": text}, text) if text else None

    async def close(self) -> None:
        if self._response is not None:
            await self._response.aclose()
        if self._client is not None:
            await self._client.aclose()

    def _rebuilt(self, chunk: dict) -> Event | None:
        """One upstream chunk as the client gets it: the first choice's text and finish reason, the usage."""
        self._take_model(chunk)
        usage = self.reply.take_usage(chunk)
        choice = next((c for c in chunk.get("choices") or () if isinstance(c, dict) and c.get("index", 0) == 0), None)
        if choice is None:
            if usage is None:
                return None
            return Event(self._data({"choices": [], "usage": usage}))
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        content = delta.get("content")
        text = self.filter.feed(content) if isinstance(content, str) else ""
        finish = self._take_finish(choice.get("finish_reason"))
        if finish is not None:
            text += self.filter.finish()  # the reply's last words: nothing follows that could complete a key
        self.reply.text += text
        rebuilt = {"role": "assistant", "content": text} if delta.get("role") == "assistant" else {"content": text}
        body = {"choices": [{"index": 0, "delta": rebuilt, "finish_reason": finish}]}
        if usage is not None:
            body["usage"] = usage
        return Event(self._data(body), text)

    def _chunk(self, delta: dict, text: str) -> Event:
        self.reply.text += text
        return Event(self._data({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}), text)

    def _data(self, body: dict) -> bytes:
        event = {"id": self.reply_id, "object": "chat.completion.chunk", "created": self.created,
                 "model": self.body["model"], **body}
        return b"data: " + json.dumps(event).encode() + b"\n\n"

    def _take_model(self, body: dict) -> None:
        # why redacted and short: the reviewer reads it; the client never does (it is told ours).
        model = body.get("model")
        if isinstance(model, str) and model:
            self.reply.model = self.upstream.redact(model)[:200]

    def _take_finish(self, reason) -> str | None:
        if reason is None:
            return None
        self.reply.finish_reason = reason if reason in FINISH_REASONS else "stop"
        return self.reply.finish_reason

    def _refuse_error(self, body: dict) -> None:
        """An error the upstream sent with a 200 (a stream's error event, or a body): raised, in our words."""
        error = body.get("error")
        if error is None:
            return
        detail = error.get("message") if isinstance(error, dict) else error
        said = f": {self._detail(detail)}" if isinstance(detail, str) and detail else ""
        raise UpstreamError(f"The model server sent an error{said}. Try again in a minute.")

    def _detail(self, text: str) -> str:
        # why redact after cutting too: a cut may leave the key's first characters at the end.
        return self.upstream.redact(self.upstream.redact(text)[:200])

    def _timed_out(self) -> str:
        seconds = self.upstream.timeout_s
        return (f"The model did not answer within {seconds:g} second{'' if seconds == 1 else 's'}. "
                "Try again, perhaps with a shorter prompt.")

    def _broken(self, what: str) -> str:
        return f"The model server's {what} broke off before it ended. Try again."

    async def _http_error(self) -> str:
        status = self._response.status_code
        data = b""
        try:
            async for part in self._response.aiter_bytes():
                data += part
                if len(data) >= ERROR_BODY_LIMIT:
                    break
            detail = json.loads(data[:ERROR_BODY_LIMIT])["error"]["message"]
        except (httpx2.HTTPError, ValueError, KeyError, TypeError):
            detail = ""
        said = f": {self._detail(str(detail))}" if detail else ""
        return f"The model server answered HTTP {status}{said}. Try again in a minute."
