"""The model window's call to the upstream chat API: standard library only, no Django.

The upstream is any OpenAI-compatible server. The URL, key and timeout come
from the caller (settings), never from the candidate's request, so nothing a
candidate sends can change where the call goes or which headers it carries.
"""

from __future__ import annotations

import http.client
import json
import math
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

ERROR_BODY_LIMIT = 2000  # bytes of an upstream's error body read for its message


@dataclass(frozen=True)
class Upstream:
    base_url: str  # e.g. http://127.0.0.1:11434/v1, without /chat/completions
    key: str = field(repr=False)  # why: a traceback's locals must not show it
    timeout_s: float

    def redact(self, text: str) -> str:
        """``text`` with the key taken out. why: a vendor's error may quote the key it was given."""
        return text.replace(self.key, "[key]") if self.key else text


class UpstreamError(Exception):
    """The upstream failed; the message says how in words a candidate can read (never the key)."""


def rough_tokens(text: str) -> int:
    """Tokens estimated as one per four characters (rounded up): English text with common tokenizers."""
    return math.ceil(len(text) / 4)


@dataclass
class Reply:
    """What came back, assembled from a plain reply or from a stream's chunks."""

    text: str = ""
    model: str = ""
    tokens_in: int | None = None  # from the upstream's usage; None when it gave none
    tokens_out: int | None = None
    parts: list[str] = field(default_factory=list)

    def add_chunk(self, chunk: dict) -> None:
        """Take one streamed chunk: its text delta, model name and usage (the last chunk carries it)."""
        self.model = chunk.get("model") or self.model
        for choice in chunk.get("choices") or ():
            content = (choice.get("delta") or {}).get("content")
            if isinstance(content, str):
                self.parts.append(content)
        self._take_usage(chunk)
        self.text = "".join(self.parts)

    def take_whole(self, body: dict) -> None:
        """Take a plain (not streamed) reply."""
        self.model = body.get("model") or ""
        choices = body.get("choices") or [{}]
        content = (choices[0].get("message") or {}).get("content")
        self.text = content if isinstance(content, str) else ""
        self._take_usage(body)

    def _take_usage(self, body: dict) -> None:
        usage = body.get("usage")
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(prompt, int) and isinstance(completion, int):
                self.tokens_in, self.tokens_out = prompt, completion


class Call:
    """One POST to <base_url>/chat/completions. Use ``send()``, then ``whole()`` or ``stream()``; ``close()``."""

    def __init__(self, upstream: Upstream, body: dict):
        self.upstream, self.body = upstream, body
        self.started = time.monotonic()
        self.reply = Reply()
        self._connection: http.client.HTTPConnection | None = None
        self._response: http.client.HTTPResponse | None = None

    @property
    def latency_s(self) -> float:
        return time.monotonic() - self.started

    def send(self) -> None:
        """Send the request and read the status line; raise UpstreamError unless the upstream said 200."""
        url = urlsplit(self.upstream.base_url)
        if url.scheme == "https":
            self._connection = http.client.HTTPSConnection(
                url.hostname, url.port, timeout=self.upstream.timeout_s, context=ssl.create_default_context())
        else:
            self._connection = http.client.HTTPConnection(url.hostname, url.port, timeout=self.upstream.timeout_s)
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.upstream.key:
            headers["Authorization"] = f"Bearer {self.upstream.key}"
        try:
            self._connection.request("POST", url.path.rstrip("/") + "/chat/completions",
                                     body=json.dumps(self.body).encode(), headers=headers)
            self._response = self._connection.getresponse()
        except TimeoutError:
            raise UpstreamError(self._timed_out()) from None
        except (OSError, http.client.HTTPException) as exc:
            raise UpstreamError(f"The model server could not be reached ({type(exc).__name__}). "
                                "Try again in a minute; if it persists, tell the person who invited you.") from None
        if self._response.status != 200:
            raise UpstreamError(self._http_error())

    def whole(self) -> dict:
        """The plain reply's JSON body, taken into ``reply``."""
        try:
            data = self._response.read()
        except TimeoutError:
            raise UpstreamError(self._timed_out()) from None
        except (OSError, http.client.HTTPException):
            raise UpstreamError(self._broken("reply")) from None
        try:
            body = json.loads(data)
            if not isinstance(body, dict):
                raise ValueError
            self.reply.take_whole(body)
        except (ValueError, AttributeError, TypeError):
            raise UpstreamError("The model server sent a reply that is not valid JSON.") from None
        return body

    def stream(self) -> Iterator[bytes]:
        """The server-sent event lines as they arrive, each taken into ``reply`` on the way.

        Ends normally at ``data: [DONE]``; raises UpstreamError when the stream
        breaks or ends before it, or when a data line is not JSON.
        """
        while True:
            try:
                line = self._response.readline()
            except TimeoutError:
                raise UpstreamError(self._timed_out()) from None
            except (OSError, http.client.HTTPException):
                raise UpstreamError(self._broken("stream")) from None
            if not line:
                raise UpstreamError(self._broken("stream"))
            text = line.strip()
            if text.startswith(b"data:"):
                data = text[5:].strip()
                if data == b"[DONE]":
                    yield line
                    return
                try:
                    self.reply.add_chunk(json.loads(data))
                except (ValueError, AttributeError, TypeError):
                    raise UpstreamError("The model server sent a stream chunk that is not valid JSON.") from None
            yield line

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()

    def _timed_out(self) -> str:
        seconds = self.upstream.timeout_s
        return (f"The model did not answer within {seconds:g} second{'' if seconds == 1 else 's'}. "
                "Try again, perhaps with a shorter prompt.")

    def _broken(self, what: str) -> str:
        return f"The model server's {what} broke off before it ended. Try again."

    def _http_error(self) -> str:
        status = self._response.status
        try:
            data = self._response.read(ERROR_BODY_LIMIT)
            detail = json.loads(data)["error"]["message"]
        except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError):
            detail = ""
        said = f": {self.upstream.redact(str(detail))[:200]}" if detail else ""
        return f"The model server answered HTTP {status}{said}. Try again in a minute."
