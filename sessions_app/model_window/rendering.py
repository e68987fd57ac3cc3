"""A model's reply as HTML for the candidate's chat: Markdown, with nothing of the reply's own HTML.

The reply is the upstream's text, so whoever controls the upstream (or talks
the model into it) writes it. markdown-it-py renders it with raw HTML off:
a ``<script>`` or an ``<img onerror>`` in the reply is shown as text. Links
and images are shown as text too (their words, then the address): a reply
cannot put a link on the candidate's page that looks like ours, nor make the
browser fetch anything. Code blocks keep their text exactly, and can be
scrolled from the keyboard.
"""

from __future__ import annotations

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.token import Token

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})


def _link_open(self, tokens: list[Token], idx: int, options, env) -> str:
    return ""


def _link_close(self, tokens: list[Token], idx: int, options, env) -> str:
    # the link's own text was rendered between the two; the address follows it, as text
    depth, start = 0, idx
    while start > 0:
        start -= 1
        if tokens[start].type == "link_close":
            depth += 1
        elif tokens[start].type == "link_open":
            if depth == 0:
                break
            depth -= 1
    href = str(tokens[start].attrGet("href") or "")
    words = "".join(t.content for t in tokens[start + 1:idx])
    return "" if not href or words == href or f"mailto:{words}" == href else f" ({escape(href)})"


def _image(self, tokens: list[Token], idx: int, options, env) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = token.content or "image"
    return escape(f"[{alt}]" + (f" ({src})" if src else ""))


_md.add_render_rule("link_open", _link_open)
_md.add_render_rule("link_close", _link_close)
_md.add_render_rule("image", _image)


def render_reply(text: str) -> SafeString:
    """``text`` (a model's reply) as safe HTML: paragraphs, emphasis, lists, headings, quotes and code."""
    html = _md.render(text or "")
    # why a plain replace is safe: with HTML off, a "<pre>" written in the reply comes out as "&lt;pre&gt;",
    # so every "<pre>" here is markdown-it's own.
    return mark_safe(html.replace("<pre>", '<pre tabindex="0">'))  # noqa: S308 (escaped by markdown-it)
