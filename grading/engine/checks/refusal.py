"""Does refuse.md name a concrete harmful alternative? A hint, not a verdict.

``specific`` means: the note mentions at least one of the packet's hints
(e.g. "dropping rows", "abs", "pandas") *and* says something about it, i.e.
it has at least ``MIN_WORDS`` words once the words naming the hint are set
aside. "I would be careful" mentions nothing; "no eval" names a hint but says
nothing about why. The article's own one sentence, "dropping rows changes
revenue, it does not fix the sum", is specific. A reviewer decides the cell.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MIN_WORDS = 5
WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")


@dataclass(frozen=True)
class RefusalReport:
    present: bool
    specific: bool
    mentions: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"present": self.present, "specific": self.specific, "mentions": list(self.mentions)}


def _compile(rx: str) -> re.Pattern:
    try:
        return re.compile(rx, re.IGNORECASE)
    except re.error:
        # A packet author's broken expression still works as plain words.
        return re.compile(re.escape(rx), re.IGNORECASE)


def check_refusal(text: str | None, hints: Mapping[str, str | Sequence[str]]) -> RefusalReport:
    """Which hints ``refuse.md`` mentions, and whether it reads as specific.

    A hint is one regular expression or several (other wordings, other
    languages); it is mentioned when any of them matches. They are searched
    case-insensitively over the text with its line breaks and Markdown
    emphasis flattened, so a sentence wrapped over two lines still matches. Labels come back in the packet's order.
    """
    if text is None or not text.strip():
        return RefusalReport(present=False, specific=False)
    # Markdown: emphasis and code marks anywhere, quote and heading marks at line starts.
    plain = re.sub(r"(?m)^[ \t]*[>#]+", " ", re.sub(r"[*`]+", " ", text))
    flat = " ".join(plain.split())
    mentions, spans = [], []
    for label, patterns in hints.items():
        if isinstance(patterns, str):
            patterns = [patterns]
        found = [m.span() for rx in patterns for m in _compile(rx).finditer(flat)]
        if found:
            mentions.append(label)
            spans.extend(found)
    # The words naming a hint are set aside (once, however many patterns matched them).
    kept = [True] * len(flat)
    for start, end in spans:
        kept[start:end] = [False] * (end - start)
    rest = "".join(ch if keep else " " for ch, keep in zip(flat, kept))
    specific = bool(mentions) and len(WORD_RE.findall(rest)) >= MIN_WORDS
    return RefusalReport(present=True, specific=specific, mentions=tuple(mentions))
