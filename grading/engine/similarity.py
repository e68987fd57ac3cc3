"""Near-identical submissions: normalised text, winnowed k-gram fingerprints, and a Jaccard score.

The measure is the one MOSS uses (Schleimer, Wilkerson and Aiken, "Winnowing:
local algorithms for document fingerprinting", SIGMOD 2003):

1. Normalise. Code (the added lines of the production diff and of the test
   diff) is cut into tokens; comments and blank lines go, whitespace counts for
   nothing, every identifier that is not a Python keyword becomes the same
   placeholder ``V`` (so renamed variables, functions and tests match), and a
   comma right before a closing bracket goes (a formatter's trailing comma).
   Prose (``refuse.md``, ``prompt.txt``) is cut into lower-case words;
   punctuation and whitespace count for nothing.
2. Hash every run of k consecutive tokens (a k-gram).
3. Winnow: in every window of w consecutive k-gram hashes keep the smallest
   (the rightmost on a tie). The kept hashes are the fingerprints: any run of
   at least k + w - 1 tokens that two texts share gives both at least one
   fingerprint in common, and the density is about 2 / (w + 1).
4. Leave out what everyone shares: the packet's own files (fixture and
   reference solution) and its prompt are fingerprinted the same way, like
   MOSS's base file, and those fingerprints are dropped; from ``prompt.txt`` the
   candidate's own red log is dropped too (a pasted pytest run is the same for
   everyone).
5. Score two submissions per channel with the Jaccard index of their
   fingerprint sets, |A ∩ B| / |A ∪ B|: 1.0 for texts the same after
   normalising, near 0 for unrelated ones. A channel counts as similar at
   THRESHOLD or above, and only when both sides keep at least
   MIN_FINGERPRINTS fingerprints (too short a text proves nothing).

Plain Python: no Django. grading/similarity.py stores the fingerprints and
finds the matches through an index.
"""

from __future__ import annotations

import hashlib
import keyword
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# The four channels, in the order the pages list them, with what a reviewer calls each.
PRODUCTION = "production"
TESTS = "tests"
REFUSAL = "refusal"
PROMPT = "prompt"
CHANNELS = (PRODUCTION, TESTS, REFUSAL, PROMPT)
CHANNEL_LABELS = {
    PRODUCTION: "production diff",
    TESTS: "test diff",
    REFUSAL: "refuse.md",
    PROMPT: "prompt.txt",
}
CODE_CHANNELS = (PRODUCTION, TESTS)

# Tokens per k-gram: code tokens are short (a bracket, a placeholder), words carry more.
CODE_K = 8
TEXT_K = 5
WINDOW = 4
THRESHOLD = 0.5
MIN_FINGERPRINTS = 4
# Stored with the fingerprints: fingerprints made under another measure are made again.
MEASURE_VERSION = "1"

Fingerprints = frozenset[int]

_CODE_TOKEN = re.compile(
    r"""
    (?P<comment>\#[^\n]*)
  | (?P<string>[rRbBuUfF]{0,2}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"
                               |'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<name>[^\W\d]\w*)
  | (?P<number>\d[\w.]*)
  | (?P<op>\*\*=?|//=?|<<=?|>>=?|[-+*/%&|^@=<>!:]=|->|:=|\.\.\.|\S)
    """,
    re.VERBOSE,
)
_WORD = re.compile(r"[^\W_]+")
_CLOSING = frozenset(")]}")
PLACEHOLDER = "V"


def code_tokens(text: str) -> list[str]:
    """The tokens of a piece of code, normalised: no comments or whitespace, names made one placeholder."""
    tokens: list[str] = []
    for match in _CODE_TOKEN.finditer(text):
        kind = match.lastgroup
        token = match.group()
        if kind == "comment":
            continue
        if kind == "name":
            token = token if keyword.iskeyword(token) else PLACEHOLDER
        elif kind == "string":
            # why: a string's quotes and inner spacing are a formatter's choice, not the author's
            token = "S:" + " ".join(token.strip("rRbBuUfF").strip("'\"").split())
        elif token in _CLOSING and tokens and tokens[-1] == ",":
            tokens.pop()  # a trailing comma, as a formatter adds it
        tokens.append(token)
    return tokens


def text_tokens(text: str) -> list[str]:
    """The words of a piece of prose, lower-case, without punctuation."""
    return [word.casefold() for word in _WORD.findall(text)]


def kgram_hashes(tokens: list[str], k: int) -> list[int]:
    """A 64-bit signed hash of every run of k consecutive tokens (one run for a shorter text, none for none)."""
    if not tokens:
        return []
    runs = [tokens[i : i + k] for i in range(max(1, len(tokens) - k + 1))]
    return [
        int.from_bytes(hashlib.blake2b("\x1f".join(run).encode(), digest_size=8).digest(), "big", signed=True)
        for run in runs
    ]


def winnow(hashes: list[int], window: int = WINDOW) -> Fingerprints:
    """The smallest hash of each window of ``window`` consecutive hashes (the rightmost on a tie)."""
    if len(hashes) <= window:
        return frozenset([min(hashes)]) if hashes else frozenset()
    kept = set()
    for start in range(len(hashes) - window + 1):
        part = hashes[start : start + window]
        smallest = min(part)
        # why the rightmost: robust winnowing keeps fewer fingerprints in runs of equal hashes
        kept.add(part[len(part) - 1 - part[::-1].index(smallest)])
    return frozenset(kept)


def code_fingerprints(text: str) -> Fingerprints:
    return winnow(kgram_hashes(code_tokens(text), CODE_K))


def text_fingerprints(text: str) -> Fingerprints:
    return winnow(kgram_hashes(text_tokens(text), TEXT_K))


def added_lines(diff: str) -> str:
    """The lines a unified diff adds (the candidate's own), without the file headers or context."""
    lines = []
    in_hunk = False
    for line in diff.splitlines():
        if line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line.startswith("+"):
            lines.append(line[1:])
    return "\n".join(lines)


@dataclass(frozen=True)
class Base:
    """What every submission of a packet version shares, to leave out: its files' and its prompt's fingerprints."""

    code: Fingerprints = frozenset()
    text: Fingerprints = frozenset()


def base_of(files: Mapping[str, bytes], prompt: str = "") -> Base:
    """The base of a packet version from its fixture and solution files and its prompt (text files only)."""
    code: set[int] = set()
    text: set[int] = set(text_fingerprints(prompt))
    for _path, data in sorted(files.items()):
        try:
            content = data.decode()
        except UnicodeDecodeError:
            continue
        code |= code_fingerprints(content)
        text |= text_fingerprints(content)
    return Base(frozenset(code), frozenset(text))


def _diff_text(files: Iterable[Mapping], tests: bool) -> str:
    chosen = sorted(
        (f for f in files if bool(f.get("is_test")) == tests and not f.get("binary")),
        key=lambda f: str(f.get("path", "")),
    )
    return "\n".join(added_lines(str(f.get("diff") or "")) for f in chosen)


def fingerprint_evidence(evidence: Mapping, base: Base = Base()) -> dict[str, Fingerprints]:
    """The fingerprints of each channel of one submission's evidence (the grade_zip JSON shape), base left out."""
    files = (evidence.get("diff") or {}).get("files") or []
    texts = evidence.get("texts") or {}
    own_log = text_fingerprints(str(texts.get("red.log") or ""))
    return {
        PRODUCTION: code_fingerprints(_diff_text(files, tests=False)) - base.code,
        TESTS: code_fingerprints(_diff_text(files, tests=True)) - base.code,
        REFUSAL: text_fingerprints(str(texts.get("refuse.md") or "")) - base.text,
        PROMPT: text_fingerprints(str(texts.get("prompt.txt") or "")) - base.text - own_log,
    }


def jaccard(shared: int, size_a: int, size_b: int) -> float:
    """|A ∩ B| / |A ∪ B| from the sizes; 0 for two empty sets."""
    union = size_a + size_b - shared
    return shared / union if union else 0.0


def is_similar(shared: int, size_a: int, size_b: int) -> bool:
    """Whether one channel of two submissions counts as near-identical under the measure."""
    if min(size_a, size_b) < MIN_FINGERPRINTS:
        return False
    return jaccard(shared, size_a, size_b) >= THRESHOLD


def compare(a: Mapping[str, Fingerprints], b: Mapping[str, Fingerprints]) -> dict[str, float]:
    """The channels in which two submissions are near-identical, each with its score (empty: not similar)."""
    found = {}
    for channel in CHANNELS:
        left, right = a.get(channel, frozenset()), b.get(channel, frozenset())
        shared = len(left & right)
        if is_similar(shared, len(left), len(right)):
            found[channel] = round(jaccard(shared, len(left), len(right)), 3)
    return found
