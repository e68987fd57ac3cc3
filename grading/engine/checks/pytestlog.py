"""Reading pytest's terminal output: its separators and each failure's frames and error lines.

Plain text in, plain data out; ``reproduction`` compares what this reads. A
failure (a ``____ title ____`` section under FAILURES or ERRORS) is read in
any traceback style pytest prints (``--tb=auto``, ``long``, ``short``,
``native``) as the same parts: frames (``file:line`` and the failing line of
code), then the error lines, split into pytest's ``assert ...`` head, its
``+ where`` lines and the diff lines under them. Frames inside libraries
(pytest, pluggy, the standard library) are left out: their line numbers change
with every version. Python 3.11's ``^^^^`` position lines, captured output and
``-l`` locals are skipped.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import TypeGuard

# Separator lines: pytest centres "=== title ===" to the terminal width.
SEP_RE = re.compile(r"^(?P<left>([=_!-])\2*) (?P<title>\S(?:.*\S)?) (?P<right>\2+)$")
PLAIN_SEP_RE = re.compile(r"^[=_-]{3,}$|^(?:_ )+_?$")
# pytest's own titles; anything else framed (a plugin's table, captured output) is left alone.
EQ_TITLES_RE = re.compile(
    r"^(?:test session starts|FAILURES|ERRORS|short test summary info|warnings summary|PASSES|"
    r"XFAILURES|XPASSES|slowest (?:\d+ )?durations|rerun test summary info|"
    r"(?:\d+ [a-z]+(?: [a-z]+)?(?:, \d+ [a-z]+(?: [a-z]+)?)*|no tests ran) in \d.*)$"
)
DASH_TITLES_RE = re.compile(
    r"^(?:Captured (?:stdout|stderr|log) (?:setup|call|teardown)|live log \w+|"
    r"generated xml file: .*)$"
)
TEST_TITLE_RE = re.compile(r"^(?:ERROR at (?:setup|teardown) of |ERROR collecting |\[doctest\] )?\S.*$")
BLOCK_TITLES = ("FAILURES", "ERRORS")
MIN_WIDTH = 39  # pytest uses 80 columns below 40; Windows keeps one column free

LOCATION_RE = re.compile(r"^(?P<path>\S.*?\.py):(?P<line>\d+):(?: (?P<rest>.*))?$")
NATIVE_FRAME_RE = re.compile(r'^\s+File "(?P<path>.+?)", line (?P<line>\d+)(?:, in (?P<func>.+))?$')
CARET_RE = re.compile(r"^\s*[\^~]+\s*$")
E_RE = re.compile(r"^E(?: |$)")
DEF_RE = re.compile(r"^[> ]\s*(?:async\s+)?def\s+(?P<name>\w+)\s*\(")
WHERE_RE = re.compile(r"^\+(?P<pad>\s+)(?:where|and)\b\s*(?P<rest>.*)$")
CHAINED = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
LIBRARY_RE = re.compile(r"(?:^|/)(?:site-packages|dist-packages|_pytest|pluggy|lib/python\d[\d.]*|Lib)/|^<")
SUMMARY_FAILED_RE = re.compile(r"^FAILED (?P<id>\S+?\.py::\S.*?)(?: - (?P<msg>.*))?$")

TRUNCATED = "Full output truncated"
ASSERTION_PREFIX = "AssertionError: "


@dataclass(frozen=True)
class Frame:
    """One frame of a traceback: where it is, and the code pytest shows for it."""

    path: str
    line: int
    statement: str  # the failing line's code, stripped ('' when not printed)
    listing: tuple[str, ...]  # --tb=long: the function's source as printed; () in other styles
    at: int  # index of the frame's location line
    statement_at: int = -1  # index of the failing line of code, -1 when not printed
    function: str = ""  # the frame's function, when the style shows it


@dataclass(frozen=True)
class Failure:
    """One test's section under FAILURES or ERRORS, read into comparable parts."""

    title: str
    at: int
    frames: tuple[Frame, ...] = ()
    statement: str = ""  # the last frame's whole failing statement, dedented
    head: tuple[tuple[int, str], ...] = ()  # error lines at the error's own indent: (index, text)
    wheres: tuple[tuple[int, int, str], ...] = ()  # (index, level, text) of "+ where" / "+ and"
    error_text: str = ""  # every error line, joined, for containment checks
    details: bool = False  # diff lines under the assertion (pytest's own comparison)
    truncated: bool = False

    @property
    def last(self) -> Frame | None:
        return self.frames[-1] if self.frames else None

    @property
    def last_statement(self) -> str:
        """The last frame's failing line of code, stripped ('' when there is none)."""
        return self.frames[-1].statement if self.frames else ""

    @property
    def explained(self) -> bool:
        """The error is pytest's rewritten ``assert ...`` explanation."""
        return any(unprefixed(t).startswith("assert ") for _, t in self.head)


def unprefixed(text: str) -> str:
    """``text`` without a leading ``AssertionError: `` (pytest prints it or not, depending on quotes)."""
    return text[len(ASSERTION_PREFIX) :] if text.startswith(ASSERTION_PREFIX) else text


def basename(path: str) -> str:
    """The last part of a POSIX or Windows path."""
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _is_library(path: str) -> bool:
    """A frame in pytest, pluggy, an installed package or the standard library."""
    return bool(LIBRARY_RE.search(path.replace("\\", "/")))


def excerpt(line: str, limit: int = 100) -> str:
    """``line`` with its spacing collapsed, cut to ``limit`` characters, for a sentence."""
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def failure_sections(lines: list[str]) -> list[tuple[str, int, list[tuple[int, str]]]]:
    """Each ``____ title ____`` section under FAILURES or ERRORS: (title, index, its lines).

    A section ends at the next header, at any ``===`` line, and its captured
    output (``--- Captured stdout call ---`` and below) is left out: a test may
    print anything there.
    """
    sections: list[tuple[str, int, list[tuple[int, str]]]] = []
    in_block = captured = False
    for i, line in enumerate(lines):
        m = SEP_RE.match(line)
        char = m.group(2) if m else ""
        if char in ("=", "!") or (not m and line.startswith("===")):
            in_block = m is not None and m["title"] in BLOCK_TITLES
            captured = True
            continue
        if not in_block:
            continue
        if m and char == "_" and set(m["title"]) - {"_", " "}:
            sections.append((m["title"], i, []))
            captured = False
        elif char == "-":
            captured = True
        elif sections and not captured:
            sections[-1][2].append((i, line))
    return sections


def _last_chunk(body: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The last exception's traceback of a chain ("The above exception was the direct cause...")."""
    starts = [k for k, (_, line) in enumerate(body) if line.strip() in CHAINED]
    return body[starts[-1] + 1 :] if starts else body


def _native(body: list[tuple[int, str]]) -> tuple[list[Frame], list[tuple[int, str]]]:
    """``--tb=native``: Python's own traceback; its error lines are returned as ``E`` lines."""
    frames: list[Frame] = []
    last = -1
    for k, (i, line) in enumerate(body):
        m = NATIVE_FRAME_RE.match(line)
        if m:
            nxt = next((l for _, l in body[k + 1 : k + 2] if l.startswith("    ")), "")
            frames.append(
                Frame(m["path"], int(m["line"]), nxt.strip(), (), i, i + 1 if nxt else -1, (m["func"] or "").strip())
            )
            last = k + (2 if nxt else 1)
    error = (
        [
            (i, "E " + line)
            for i, line in body[last:]
            if line.strip()
            and not CARET_RE.match(line)
            and not line.startswith("    ")
            and not line.startswith("Traceback ")
        ]
        if last >= 0
        else []
    )
    return [f for f in frames if not _is_library(f.path)], error


def _pytest_frames(body: list[tuple[int, str]]) -> tuple[list[Frame], list[tuple[int, str]], str]:
    """``--tb=auto/long/short``: frames ``file:line``, the ``>`` statement, the ``E`` lines."""
    frames: list[Frame] = []
    errors: list[tuple[int, str]] = []
    listing: list[str] = []
    statement: list[str] = []
    statement_at = -1
    in_statement = False
    short_pending = False
    for i, line in body:
        if CARET_RE.match(line):
            continue
        if E_RE.match(line):
            errors.append((i, line))
            in_statement = False
            continue
        loc = LOCATION_RE.match(line)
        if loc:
            rest = loc["rest"] or ""
            if rest.startswith("in "):  # short style: the failing line follows
                frames.append(Frame(loc["path"], int(loc["line"]), "", (), i, -1, rest[3:].strip()))
                short_pending = True
            else:
                stmt = statement[0].strip() if statement else ""
                defined = next((d["name"] for d in map(DEF_RE.match, listing) if d), "")
                frames.append(
                    Frame(
                        loc["path"],
                        int(loc["line"]),
                        stmt,
                        tuple(listing),
                        i,
                        statement_at if statement else -1,
                        defined,
                    )
                )
            listing, in_statement = [], False
            continue
        if short_pending and line.startswith("    "):
            frames[-1] = Frame(
                frames[-1].path, frames[-1].line, line.strip(), (), frames[-1].at, i, frames[-1].function
            )
            statement = [line[4:]]
            short_pending = False
            continue
        short_pending = False
        if PLAIN_SEP_RE.match(line):  # "_ _ _ _" between frames
            listing, statement, in_statement = [], [], False
        elif line.startswith(">"):
            listing.append(line.rstrip())
            statement, statement_at, in_statement = [" " + line[1:]], i, True
        elif line.startswith("    "):
            listing.append(line.rstrip())
            if in_statement:
                statement.append(line)
        else:
            in_statement = False
    full = textwrap.dedent("\n".join(statement)) if statement else ""
    return [f for f in frames if not _is_library(f.path)], errors, full


def _rejoined(errors: list[tuple[int, str]], body: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The ``E`` lines without their ``E``; a line between two of them that is not one is the
    rest of the line above, cut where a terminal or an editor wrapped it."""
    if not errors:
        return []
    given = dict(errors)
    first, end = errors[0][0], errors[-1][0]
    texts: list[list] = []
    for i, line in body:
        if i in given:
            texts.append([i, given[i][1:]])
        elif texts and first < i < end and line and not CARET_RE.match(line):
            texts[-1][1] += line
    return [(i, text) for i, text in texts if text.strip()]


def read_failure(title: str, at: int, body: list[tuple[int, str]]) -> Failure:
    """A section's frames and error lines, in any traceback style."""
    chunk = _last_chunk(body)
    if any(line.startswith("Traceback (most recent call last)") for _, line in chunk):
        frames, errors = _native(chunk)
        statement = frames[-1].statement if frames else ""
    else:
        frames, errors, statement = _pytest_frames(chunk)
    texts = _rejoined(errors, body)
    if not texts:
        return Failure(title, at, tuple(frames), statement)
    indent = len(texts[0][1]) - len(texts[0][1].lstrip())
    head: list[tuple[int, str]] = []
    wheres: list[tuple[int, int, str]] = []
    details = truncated = False
    for i, text in texts:
        own = len(text) - len(text.lstrip())
        body_text = text.strip()
        truncated = truncated or TRUNCATED in body_text
        w = WHERE_RE.match(body_text)
        if w and own > indent:
            wheres.append((i, len(w["pad"]) // 2, body_text))
        elif own <= indent and not wheres and not details:
            head.append((i, body_text))
        else:
            details = True
    error_text = " ".join(" ".join(t for _, t in texts).split())
    return Failure(title, at, tuple(frames), statement, tuple(head), tuple(wheres), error_text, details, truncated)


def read_failures(lines: list[str]) -> list[Failure]:
    """Every failure and error section of a log, read."""
    return [read_failure(title, at, body) for title, at, body in failure_sections(unwrapped(lines))]


def _runs(lines: list[str], closing_re: re.Pattern) -> list[tuple[int, int]]:
    """(start, end) of each pytest run in the log: a run ends at its closing line."""
    runs, start = [], 0
    for i, line in enumerate(lines):
        m = SEP_RE.match(line)
        if m and m["title"] == "test session starts" and i > start and any(SEP_RE.match(l) for l in lines[start:i]):
            runs.append((start, i))
            start = i
        elif closing_re.match(line):
            runs.append((start, i + 1))
            start = i + 1
    if start < len(lines):
        runs.append((start, len(lines)))
    return runs


def _balanced(m: re.Match[str] | None) -> TypeGuard[re.Match[str]]:
    return m is not None and len(m["right"]) - len(m["left"]) in (0, 1)


def unwrapped(lines: list[str]) -> list[str]:
    """``lines`` with each separator that a terminal or an editor wrapped onto two lines made whole.

    The joined line takes the first line's place and the second is left empty,
    so line numbers stay those of the file.
    """
    out = list(lines)
    for i in range(len(out) - 1):
        line = out[i]
        if line[:3] in ("===", "___", "---", "!!!") and not _balanced(SEP_RE.match(line)) and out[i + 1]:
            joined = line + out[i + 1]
            m = SEP_RE.match(joined)
            if _balanced(m) and m.group(2) == line[0]:
                out[i], out[i + 1] = joined, ""
    return out


def separator_findings(lines: list[str], closing_re: re.Pattern, coloured: bool) -> list[str]:
    """What in pytest's own separator lines no terminal width gives (verdicts).

    pytest centres each separator to the terminal width W: ``N`` fill characters,
    the title, ``N`` more (one more on the right when the parity needs it), the
    whole exactly W long; W is the same for every separator of a run and never
    below 40 (39 on Windows). A title too long for the width (fill of one) says
    nothing about W. With colour the closing line's length is not checked.
    Only pytest's own titles count (a plugin's table or a test's output may
    frame anything), and a separator wrapped onto two lines is read whole.
    """
    lines = unwrapped(lines)
    findings: list[str] = []
    for start, end in _runs(lines, closing_re):
        in_block = False
        seps: list[tuple[int, str]] = []
        for i in range(start, end):
            line = lines[i]
            m = SEP_RE.match(line)
            if not m:
                continue
            char, title = m.group(2), m["title"]
            if char in ("=", "!"):
                in_block = title in BLOCK_TITLES or title == "PASSES"
                ours = char == "!" or bool(EQ_TITLES_RE.match(title))
                if ours and coloured and closing_re.match(line):
                    continue
            elif char == "_":
                ours = in_block and bool(TEST_TITLE_RE.match(title)) and bool(set(title) - {"_", " "})
            else:
                ours = bool(DASH_TITLES_RE.match(title))
            if not ours:
                continue
            left, right = len(m["left"]), len(m["right"])
            if not _balanced(m):
                findings.append(
                    f"separator widths: red.log's line {i + 1} `{excerpt(line, 60)}` has {left} "
                    f"'{char}' on the left and {right} on the right; pytest centres its "
                    "separators, with at most one more on the right"
                )
            elif left > 1:
                seps.append((i, line))
        if not seps:
            continue
        first_i, first = seps[0]
        for i, line in seps[1:]:
            if len(line) != len(first):
                findings.append(
                    f"separator widths: red.log's line {i + 1} `{excerpt(line, 60)}` is {len(line)} "
                    f"columns wide where line {first_i + 1} `{excerpt(first, 60)}` is "
                    f"{len(first)}; pytest centres every separator of a run to the same terminal width"
                )
                break
        narrow = [(i, line) for i, line in seps if len(line) < MIN_WIDTH]
        if narrow:
            i, line = narrow[0]
            findings.append(
                f"separator widths: red.log's line {i + 1} `{excerpt(line, 60)}` is {len(line)} "
                f"columns wide; pytest never prints separators narrower than {MIN_WIDTH} "
                "(it uses 80 columns for a narrower terminal)"
            )
    return findings


def section_title(node_id: str) -> str:
    """The FAILURES header pytest prints for a node id: ``path::C::test_a[x]`` -> ``C.test_a[x]``."""
    base, bracket, params = node_id.partition("[")
    parts = base.replace("\\", "/").split("::")[1:]
    return ".".join(parts) + bracket + params
