"""A file's unified diff as rows a reviewer can read and comment on: unified, or side by side.

Pure: no Django. The grader stores each changed file's unified diff as text
(checks.diff); this reads it back into lines that know their number before
and after the change, so that a comment can name a line (``old:7`` for a
removed line, ``new:12`` for any other) and the same line is found in either
view. The text is returned as written; the template escapes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")

# What each kind of line is called, for people reading it without colour (screen readers, print).
KIND_WORDS = {"add": "added", "del": "removed", "ctx": "unchanged"}
SIDES = ("old", "new")


@dataclass(frozen=True)
class DiffLine:
    """One line of a diff. ``kind``: "hunk" (an @@ header), "add", "del" or "ctx" (unchanged)."""

    kind: str
    text: str
    old: int | None = None  # its number in the file before the change (None: not there before)
    new: int | None = None  # its number after the change (None: removed)

    @property
    def anchor(self) -> str:
        """The line as a comment names it: ``old:N`` for a removed line, ``new:N`` for the others."""
        if self.kind == "del":
            return f"old:{self.old}"
        return f"new:{self.new}" if self.new is not None else ""

    @property
    def number(self) -> int | None:
        """The number a person calls it by: before the change for a removed line, after it for the others."""
        return self.old if self.kind == "del" else self.new

    @property
    def sign(self) -> str:
        return {"add": "+", "del": "-", "ctx": " "}.get(self.kind, "")

    @property
    def words(self) -> str:
        return KIND_WORDS.get(self.kind, "")


@dataclass(frozen=True)
class SplitRow:
    """One row of the side-by-side view: the line before (left) and after (right); either may be None."""

    left: DiffLine | None
    right: DiffLine | None
    hunk: str = ""  # set on a hunk header's row, which spans both sides


def parse_unified(diff: str) -> list[DiffLine]:
    """The lines of a unified diff after its ``---``/``+++`` header; [] when it holds no hunk.

    Not a diff (a binary file, one too large, "only line endings differ"): [],
    and the page shows the text as it is. Lines after a broken hunk count are
    kept as unchanged, so nothing the grader stored is hidden.
    """
    rows: list[DiffLine] = []
    old = new = 0
    seen_hunk = False
    for raw in diff.splitlines():
        match = _HUNK.match(raw)
        if match:
            seen_hunk = True
            old, new = int(match.group(1)), int(match.group(3))
            rows.append(DiffLine("hunk", raw))
            continue
        if not seen_hunk:
            continue  # the --- a/x, +++ b/x header lines
        if raw.startswith("+"):
            rows.append(DiffLine("add", raw[1:], None, new))
            new += 1
        elif raw.startswith("-"):
            rows.append(DiffLine("del", raw[1:], old, None))
            old += 1
        elif raw.startswith("\\"):
            rows.append(DiffLine("hunk", raw))  # "\ No newline at end of file"
        else:
            rows.append(DiffLine("ctx", raw[1:] if raw.startswith(" ") else raw, old, new))
            old += 1
            new += 1
    return rows


def side_by_side(lines: list[DiffLine]) -> list[SplitRow]:
    """The lines paired for a two-column view: each run of removed lines beside the added lines after it."""
    rows: list[SplitRow] = []
    removed: list[DiffLine] = []
    added: list[DiffLine] = []

    def flush() -> None:
        for i in range(max(len(removed), len(added))):
            rows.append(SplitRow(removed[i] if i < len(removed) else None, added[i] if i < len(added) else None))
        removed.clear()
        added.clear()

    for line in lines:
        if line.kind == "del":
            if added:  # a removal after additions starts a new run
                flush()
            removed.append(line)
        elif line.kind == "add":
            added.append(line)
        else:
            flush()
            if line.kind == "hunk":
                rows.append(SplitRow(None, None, line.text))
            else:
                rows.append(SplitRow(line, line))
    flush()
    return rows


def find_line(lines: list[DiffLine], anchor: str) -> DiffLine | None:
    """The line a comment's anchor (``old:N`` or ``new:N``) names, or None when the diff has no such line."""
    for line in lines:
        if line.kind in KIND_WORDS and line.anchor == anchor:
            return line
    return None


def parse_anchor(text: str) -> tuple[str, int] | None:
    """``"new:12"`` -> ("new", 12); None for anything else."""
    side, _, number = (text or "").partition(":")
    if side not in SIDES or not number.isdigit() or len(number) > 9:
        return None
    return side, int(number)
