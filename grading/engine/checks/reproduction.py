"""Does red.log print what a real pytest run of this tree prints?

``analyse_red_log`` calls :func:`compare_with_reproductions` with the logs of
real runs made in the sandbox (the original tree's own run, and the
candidate's tests over the original production code). Only the tests the red
log names are compared: a real run may hold more failures (tests the
candidate deleted, or tests the grader planted), and those are ignored.

What varies in honest logs is normalised away before comparing: memory
addresses (``0x7f...``), absolute paths (the candidate's folder, ``/tree`` in
the sandbox, Windows drives and backslashes: a path keeps its last part),
``PosixPath``/``WindowsPath``, whitespace runs, Python 3.11's ``^^^^`` position
lines, frames inside libraries (pytest, pluggy, the standard library: their
line numbers change with every version), the optional ``AssertionError: ``
before pytest's ``assert ...`` line, the diff lines under it (their wording
changes between pytest 7, 8 and 9 and with ``-v``), blank ``E`` lines, the
traceback style (``--tb=long``, ``short``, ``auto``, ``native``: each failure
is read as frames ``file:line`` with their failing statement, then the error
lines), ``-l`` locals, captured output, headers, durations and counts.

Findings are of two kinds (see ``Comparison``):

- *verdicts*, which make the log not genuine: what no real pytest run of this
  tree prints. Separators of one run centred to different terminal widths, or
  not centred; ``+ where`` lines that a real run prints under the same failing
  statement and red.log lacks (or the reverse); an assertion line that does not
  show its own literal or the value its ``+ where`` line gives; a short-summary
  message that is not the first line of the same test's error; a test's
  section that starts in another test the log shows (a copied traceback); a
  line number of the packet's own, unchanged code that no real run prints;
  other values under the same failing line of the same test, where that
  test printed the same values in two real runs (``Reproduction.steady``):
  the red run ran other code.
- *notes*, which are reported but decide nothing, because an honest candidate
  can cause them: a failing statement no real run shows (the test was edited
  after the red run), other values where the real runs' values vary (code
  that depends on the clock, the machine or chance), another line number for
  the candidate's own test (lines added above it later), a plain
  ``AssertionError`` (``--assert=plain``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from .pytestlog import (
    ASSERTION_PREFIX,
    SUMMARY_FAILED_RE,
    WHERE_RE,
    Failure,
    Frame,
    basename,
    excerpt,
    read_failures,
    section_title,
    unprefixed,
)

ADDRESS_RE = re.compile(r"\b0x[0-9a-fA-F]{4,}\b")
PATHCLASS_RE = re.compile(r"\b(?:Posix|Windows|PurePosix|PureWindows)Path\(")
ABSPATH_RE = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?(?:/[^\s'\"/():,\[\]]+)+")
TOKEN_RE = re.compile(r"\w+|[^\w\s]")
SHORT_LITERAL = 25
# A real run holds a few failures per test name; a tree made to hold thousands
# under one name must not make the comparison quadratic.
MAX_REAL_PER_TEST = 20
MAX_FINDINGS = 20  # per kind, then one sentence counts the rest


class Reproduction(NamedTuple):
    """One real run of this tree: its name in sentences, its log, and the files
    of that run that are the packet's own (``path`` as pytest prints it, from
    the tree's root), whose line numbers a candidate's red run shares.

    ``steady``: the titles of the failures that printed the same values when
    the tree was run twice (``steady_failures``); None when it ran once. Only
    for those do other values in red.log decide (see ``_compare_error``).
    """

    label: str
    log: str
    packet_paths: tuple[str, ...] = ()
    steady: frozenset[str] | None = None


@dataclass
class Comparison:
    """What the comparison found: verdicts make the log not genuine, notes and signals inform."""

    verdicts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    signals: list[str] = field(default_factory=list)


@lru_cache(maxsize=1 << 15)
def normalise_text(text: str) -> str:
    """One line with what differs between honest machines taken out (addresses, paths, spacing)."""
    text = text.replace("\\\\", "/").replace("\\", "/")
    text = ADDRESS_RE.sub("0x…", text)
    text = PATHCLASS_RE.sub("Path(", text)
    text = ABSPATH_RE.sub(lambda m: m.group(0).rsplit("/", 1)[-1], text)
    return " ".join(unprefixed(text.strip()).split())


def _same_tokens(a: str, b: str) -> bool:
    """Equal up to order (a set's order changes with the hash seed)."""
    return sorted(TOKEN_RE.findall(a)) == sorted(TOKEN_RE.findall(b))


# --- what one failure must show by itself ----------------------------------------------


def _has_where_parts(node: ast.AST) -> bool:
    """Whether pytest's assertion rewriting prints a ``+ where`` line for this expression.

    Calls and attribute reads get one; binary and unary operators pass their
    operands' on; names, literals, subscripts and comprehensions get none.
    """
    if isinstance(node, ast.Call):
        return True
    if isinstance(node, ast.Attribute):
        return isinstance(node.ctx, ast.Load)
    if isinstance(node, ast.BinOp):
        return _has_where_parts(node.left) or _has_where_parts(node.right)
    if isinstance(node, ast.UnaryOp):
        return _has_where_parts(node.operand)
    return False


def _literal(node: ast.AST) -> str | None:
    """The repr pytest shows for a short literal operand, else None."""
    sign = ""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = "-", node.operand
    if not isinstance(node, ast.Constant) or (sign and not isinstance(node.value, (int, float))):
        return None
    text = sign + repr(node.value)
    return text if len(text) <= SHORT_LITERAL and "\n" not in text else None


def _contains(text: str, part: str) -> bool:
    """``part`` is in ``text``, whitespace aside (a terminal may have wrapped a copied line anywhere)."""
    return "".join(part.split()) in "".join(text.split())


def _assert_test(statement: str) -> ast.expr | None:
    """The tested expression when ``statement`` is one ``assert``, else None."""
    try:
        module = ast.parse(statement)
    except (SyntaxError, ValueError):
        return None
    if len(module.body) != 1 or not isinstance(module.body[0], ast.Assert):
        return None
    return module.body[0].test


def _function_of(title: str) -> str:
    """``TestC.test_a[1]`` -> ``test_a``; ``test_a (i=1)`` (a subtest) -> ``test_a``."""
    return title.split("[", 1)[0].split(" ", 1)[0].rsplit(".", 1)[-1]


def first_frame_findings(failure: Failure, name: str, tests: set[str]) -> list[str]:
    """A test's traceback starts in the test itself: a first frame in another shown test is a verdict.

    pytest cuts every failure's traceback at the test function (library frames
    aside), so the section of ``TestC.test_a[1]`` starts in ``test_a``. A first
    frame in ``test_b``, another test the log shows, is ``test_b``'s traceback
    copied under ``test_a``'s header. Any other first function is left alone
    (a helper marked ``__tracebackhide__``, a test made by a factory function).
    ``tests``: the functions of every section the log shows.
    """
    if not failure.frames or failure.title.startswith(("ERROR ", "[doctest]")):
        return []
    first = failure.frames[0]
    test = _function_of(failure.title)
    if first.function == test or first.function not in tests:
        return []
    shown = (
        f"line {first.statement_at + 1} `> {excerpt(first.statement)}`"
        if first.statement_at >= 0
        else f"line {first.at + 1} `{excerpt(first.path)}:{first.line}`"
    )
    return [
        f"the traceback's own lines: the section of {name} starts in `{first.function}` (red.log's {shown}); "
        f"pytest starts a test's traceback in the test itself, `{test}`"
    ]


def own_findings(failure: Failure, name: str, where_rule: bool = True) -> list[str]:
    """What this failure's own lines contradict (verdicts), without any real run.

    Only for pytest's rewritten ``assert`` explanation: each ``+ where V = ...``
    line's value V appears in another error line (the one above it); a short literal of the failing
    ``assert`` appears in the error lines; and an assertion on a call or an
    attribute with no diff under it has at least one ``+ where`` line.
    """
    if not failure.explained:
        return []
    findings: list[str] = []
    head_i, head = failure.head[-1]
    for i, _, text in failure.wheres:
        where = WHERE_RE.match(text)
        assert where is not None  # read_failure keeps only the lines WHERE_RE matches
        value = where["rest"].split(" = ", 1)[0].strip()
        others = failure.error_text.replace(" ".join(text.split()), "", 1)
        if value and not _contains(others, value):
            findings.append(
                f"the assertion's own lines: for {name}, red.log's line {i + 1} `E {excerpt(text)}` "
                f"gives the value {excerpt(value, 40)}, which its line {head_i + 1} `E {excerpt(head)}` "
                "does not show; pytest prints the same value in both"
            )
            break
    test = _assert_test(failure.statement)
    if test is None:
        return findings
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        operands = [test.left, *test.comparators]
        for literal in filter(None, map(_literal, operands)):
            if not _contains(failure.error_text, literal):
                findings.append(
                    f"the assertion's own lines: for {name}, the failing line "
                    f"`> {excerpt(failure.statement)}` "
                    f"compares with {literal}, but red.log's line {head_i + 1} `E {excerpt(head)}` "
                    "does not show it; pytest prints the literal as written"
                )
                break
        needs = any(map(_has_where_parts, operands))
    else:
        needs = _has_where_parts(test)
    if where_rule and needs and not failure.wheres and not failure.details and not failure.truncated:
        findings.append(
            f"lines a real run prints: for {name}, the failing line `> {excerpt(failure.statement)}` "
            "calls a function or reads an attribute, and pytest then prints `+ where ...` lines "
            f"under red.log's line {head_i + 1} `E {excerpt(head)}`; red.log has none"
        )
    return findings


# --- comparing with the real runs ----------------------------------------------------------


@lru_cache(maxsize=1 << 12)
def _frames_key(failure: Failure) -> tuple:
    """(file name, line, failing line) per frame: the parts every traceback style prints."""
    return tuple((basename(f.path), f.line, normalise_text(f.statement)) for f in failure.frames)


@lru_cache(maxsize=1 << 12)
def _error_key(failure: Failure) -> tuple:
    """The head and the ``+ where`` lines (with their levels), normalised; diff lines are left out."""
    return (
        tuple(normalise_text(t) for _, t in failure.head),
        tuple((level, normalise_text(t)) for _, level, t in failure.wheres),
    )


def _same(red: Failure, real: Failure) -> bool:
    """The same frames (file, line, failing line) and the same error lines, once normalised."""
    if _frames_key(red) != _frames_key(real):
        return False
    (rh, rw), (oh, ow) = _error_key(red), _error_key(real)
    return (
        len(rh) == len(oh)
        and _shape(red) == _shape(real)
        and all(_same_tokens(a, b) for a, b in zip((*rh, *(t for _, t in rw)), (*oh, *(t for _, t in ow))))
    )


def _shape(failure: Failure) -> tuple[int, ...]:
    """The nesting levels of the ``+ where`` lines: what the failing statement alone decides."""
    return tuple(level for _, level, _ in failure.wheres)


@lru_cache(maxsize=1 << 12)
def _listing(frame: Frame) -> tuple[str, ...]:
    """A --tb=long frame's source lines, normalised."""
    return tuple(normalise_text(line) for line in frame.listing)


def _compare_one(
    red: Failure, reals: list[tuple[Reproduction, Failure]], name: str, out: Comparison, tests: set[str]
) -> None:
    """One failure of red.log against the same test's failures in the real runs, into ``out``."""
    matched = [rep.label for rep, real in reals if _same(red, real)]
    if matched:
        out.signals.append(f"the failure of {name} matches the {' and '.join(dict.fromkeys(matched))} run")
        return
    last = red.last
    stmt = normalise_text(last.statement) if last and last.statement else ""
    same_stmt = [
        (rep, real) for rep, real in reals if stmt and real.last and normalise_text(real.last.statement) == stmt
    ]
    # Where a real run shows the same failing line, it says which "+ where" lines pytest prints.
    out.verdicts.extend(first_frame_findings(red, name, tests) + own_findings(red, name, where_rule=not same_stmt))
    if not reals:
        out.notes.append(
            f"a real run that fails {name}: no real run of this tree fails it, so its lines are "
            "not compared (fine when the test was changed after the red run)"
        )
        return
    if not same_stmt:
        shown = (
            f"`> {excerpt(last.statement)}` (red.log's line {last.statement_at + 1})" if last and stmt else "its frames"
        )
        theirs = sorted(
            {
                f"`> {excerpt(real.last.statement)}` ({rep.label})"
                for rep, real in reals
                if real.last and real.last.statement
            }
        )
        out.notes.append(
            f"the failing line of {name} in a real run: red.log shows {shown}, the real runs "
            f"{', '.join(theirs) or 'show no failing line'} (fine when the test was edited after "
            "the red run)"
        )
        return
    before = len(out.verdicts) + len(out.notes)
    _compare_error(red, same_stmt, name, out)
    _compare_lines(red, reals, name, out)
    if len(out.verdicts) + len(out.notes) == before:
        labels = " and ".join(dict.fromkeys(rep.label for rep, _ in same_stmt))
        out.signals.append(f"the failure of {name} agrees with the {labels} run in its failing line and its error")


def _compare_error(red: Failure, same_stmt: list[tuple[Reproduction, Failure]], name: str, out: Comparison) -> None:
    """The error lines under the same failing statement: ``+ where`` lines decide, values inform.

    ``+ where`` lines are compared only where both sides show pytest's plain
    explanation: a diff under the assertion (pytest's own comparison of
    strings, lists, or of numbers under pytest 6's ``-v``) replaces them.
    """
    explained = [(rep, real) for rep, real in same_stmt if real.explained and not real.truncated]
    if explained and not red.explained and red.head:
        rep, real = explained[0]
        out.notes.append(
            f"pytest's explanation of {name}'s assertion: red.log's line {red.head[0][0] + 1} "
            f"`E {excerpt(red.head[0][1])}` where the {rep.label} run prints "
            f"`E {excerpt(real.head[-1][1])}` (fine when run with --assert=plain)"
        )
        return
    plain = [(rep, real) for rep, real in explained if not real.details]
    if (
        red.explained
        and not red.details
        and not red.truncated
        and plain
        and all(_shape(real) != _shape(red) for _, real in plain)
    ):
        rep, real = plain[0]
        head_i = red.head[-1][0]
        if len(real.wheres) > len(red.wheres) and _shape(red) == _shape(real)[: len(red.wheres)]:
            extra = [t for _, _, t in real.wheres[len(red.wheres) :]]
            lines = " and ".join(f"`E {excerpt(t, 70)}`" for t in extra[:2])
            out.verdicts.append(
                f"lines a real run prints: under the same failing line "
                f"`> {excerpt(real.last_statement)}` "
                f"the {rep.label} run prints {lines}{' and more' if len(extra) > 2 else ''} for "
                f"{name}; red.log's error (line {head_i + 1} `E {excerpt(red.head[-1][1])}`) "
                f"has {len(red.wheres) or 'no'} `+ where` line{'s' if len(red.wheres) != 1 else ''}"
            )
        else:
            k = next((k for k, (a, b) in enumerate(zip(_shape(red), _shape(real))) if a != b), len(real.wheres))
            i, _, text = red.wheres[min(k, len(red.wheres) - 1)]
            out.verdicts.append(
                f"lines a real run prints: red.log's line {i + 1} `E {excerpt(text, 70)}` for {name} "
                f"is not among the {len(real.wheres)} `+ where` lines the {rep.label} run prints "
                f"under the same failing line `> {excerpt(real.last_statement)}`"
            )
        return
    if not any(_same_values(red, real) for _, real in same_stmt):
        steady = [(rep, real) for rep, real in same_stmt if _steady_twin(red, rep, real)]
        rep, real = (steady or same_stmt)[0]
        mine, theirs = _first_difference(red, real)
        shown = f"line {mine[0] + 1} `E {excerpt(mine[1])}`" if mine else "no such line"
        if steady:
            # why a verdict: this code printed these values every time it ran, and the
            # test is the one red.log shows, so other values come from other code: a
            # red run of a tree changed before it (code broken on purpose), not of this one.
            out.verdicts.append(
                f"values a real run prints: for {name}, red.log's {shown}, where the {rep.label} "
                f"run prints `E {excerpt(theirs)}` every time it runs (the same test, run twice, "
                "printed the same values); red.log's values come from other code"
            )
            return
        out.notes.append(
            f"the values of a real run for {name}: red.log's {shown}, the {rep.label} run "
            f"`E {excerpt(theirs)}` (fine when the code's values depend on the machine, the "
            "clock or chance)"
        )


def _steady_twin(red: Failure, rep: Reproduction, real: Failure) -> bool:
    """Whether ``real`` is the same test as red.log's, from a run whose values do not vary.

    Only pytest's own ``assert`` explanation, shown in full on both sides
    (a ``...`` in it is a repr cut to the verbosity, which differs with
    ``-v``), for a test whose failures printed the same values in two runs;
    where both sides print the test's source (``--tb=long``), it must be the
    same source (a test edited before the red run fails with its own values).
    """
    if rep.steady is None or real.title not in rep.steady:
        return False
    if not (red.explained and real.explained) or red.truncated or real.truncated:
        return False
    if any("..." in t for _, t in (*red.head, *real.head)):
        return False
    mine, theirs = red.frames[0] if red.frames else None, real.frames[0] if real.frames else None
    if mine is None or theirs is None or normalise_text(mine.statement) != normalise_text(theirs.statement):
        return mine is None and theirs is None
    return not (mine.listing and theirs.listing) or _listing(mine) == _listing(theirs)


def steady_failures(first: str, second: str, *, clean: Callable[[str], str]) -> frozenset[str]:
    """The titles of the failures two runs of the same tree printed alike (frames, error lines, values).

    A test whose values depend on the clock, the machine or chance prints
    them differently in one of the runs and is left out.
    """

    def read(log: str) -> dict[str, list[Failure]]:
        found: dict[str, list[Failure]] = {}
        for failure in read_failures([line.rstrip() for line in clean(log).split("\n")]):
            found.setdefault(failure.title, []).append(failure)
        return found

    a, b = read(first), read(second)
    return frozenset(
        title
        for title, failures in a.items()
        if len(failures) == len(b.get(title, ()))
        and all(_same(x, y) and _same_values(x, y) for x, y in zip(failures, b[title]))
    )


def _error_lines(failure: Failure) -> list[tuple[int, str]]:
    """The head and ``+ where`` lines with their indices."""
    return [*failure.head, *((i, t) for i, _, t in failure.wheres)]


def _first_difference(red: Failure, real: Failure) -> tuple[tuple[int, str] | None, str]:
    """The first of red.log's error lines that differs from the real run's, and the real run's line."""
    mine, theirs = _error_lines(red), [t for _, t in _error_lines(real)]
    for k, (i, text) in enumerate(mine):
        other = theirs[k] if k < len(theirs) else "no such line"
        if not _same_tokens(normalise_text(text), normalise_text(other)):
            return (i, text), other
    return None, theirs[len(mine)] if len(theirs) > len(mine) else "no such line"


def _same_values(red: Failure, real: Failure) -> bool:
    """The same error text up to order; ``+ where`` lines count only when both print them alike."""
    (rh, rw), (oh, ow) = _error_key(red), _error_key(real)
    mine, theirs = list(rh), list(oh)
    if _shape(red) == _shape(real):
        mine += [t for _, t in rw]
        theirs += [t for _, t in ow]
    return _same_tokens(" ".join(mine), " ".join(theirs))


def _compare_lines(red: Failure, reals: list[tuple[Reproduction, Failure]], name: str, out: Comparison) -> None:
    """Line numbers of each frame whose failing line a real run shows too.

    A verdict only for the packet's own code printed with the very same
    function (a --tb=long listing) by a real run, at a line no real run
    prints; any other moved line is a note. At most one of each per failure.
    """
    verdict = note = None
    for frame in red.frames:
        if not frame.statement:
            continue
        key = (basename(frame.path), normalise_text(frame.statement))
        twins = [
            (rep, f)
            for rep, real in reals
            for f in real.frames
            if (basename(f.path), normalise_text(f.statement)) == key
        ]
        if not twins or frame.line in {f.line for _, f in twins}:
            continue
        real_lines = " or ".join(map(str, sorted({f.line for _, f in twins})))
        packet = [
            (rep, f)
            for rep, f in twins
            if f.path.replace("\\", "/") in rep.packet_paths
            and frame.listing
            and f.listing
            and _listing(f) == _listing(frame)
        ]
        where = (
            f"red.log's line {frame.at + 1} `{excerpt(frame.path)}:{frame.line}` for `{excerpt(frame.statement, 60)}`"
        )
        if packet and verdict is None:
            verdict = (
                f"line numbers: {where} in {name}; the packet's own code, unchanged (the same function "
                f"as printed by the {packet[0][0].label} run), is at line {real_lines} in every real run"
            )
        elif not packet and note is None:
            note = (
                f"line numbers of a real run: {where} in {name}, line {real_lines} in the real runs (fine "
                "when lines above it were edited after the red run)"
            )
    if verdict:
        out.verdicts.append(verdict)
    if note:
        out.notes.append(note)


def summary_findings(lines: list[str], failures: list[Failure], summary_idx: set[int]) -> list[str]:
    """Each ``FAILED <id> - <message>`` line repeats the first error line of that test's section.

    pytest writes both from the same exception; a message cut with ``...`` to
    fit the terminal is compared on the part shown. Only assertion errors are
    compared, for tests whose section is found by its title.
    """
    by_title: dict[str, dict[str, Failure]] = {}
    for failure in failures:
        if failure.head and failure.head[0][1].startswith(("assert", "Assert")):
            by_title.setdefault(failure.title, {}).setdefault(" ".join(failure.head[0][1].split()), failure)
    findings: list[str] = []
    for i in sorted(summary_idx):
        m = SUMMARY_FAILED_RE.match(lines[i])
        if not m or not m["msg"]:
            continue
        candidates = list(by_title.get(section_title(m["id"]), {}).values())
        if not candidates or len(candidates) > MAX_REAL_PER_TEST:
            continue
        msg = " ".join(m["msg"].split())
        cut = msg.endswith("...")
        msg = msg[:-3] if cut else msg

        def agrees(failure: Failure, msg: str = msg, cut: bool = cut) -> bool:
            first = " ".join(failure.head[0][1].split())
            return any(
                first.startswith(x) or (not cut and x.startswith(first)) for x in (msg, unprefixed(msg))
            ) or first.startswith(ASSERTION_PREFIX + msg)

        if not any(agrees(f) for f in candidates):
            f = candidates[0]
            findings.append(
                f"summary and traceback: red.log's line {i + 1} `{excerpt(lines[i])}` does not repeat "
                f"line {f.head[0][0] + 1} `E {excerpt(f.head[0][1])}` of the same test's error; "
                "pytest writes both from one exception"
            )
    return findings


def compare_with_reproductions(
    lines: list[str], reproductions: Iterable[tuple], *, clean: Callable[[str], str]
) -> Comparison:
    """Compare each failure red.log shows with the same test's failure in the real runs.

    ``lines``: red.log's cleaned lines. ``reproductions``: ``Reproduction`` or
    ``(label, log)`` / ``(label, log, packet_paths)`` tuples of real sandboxed
    runs; ``clean`` turns a raw log into text (the red log's own cleaning).
    """
    out = Comparison()
    by_title: dict[str, dict[tuple, tuple[Reproduction, Failure]]] = {}
    for r in reproductions:
        rep = Reproduction(*r)
        if not rep.log:
            continue
        for real in read_failures([line.rstrip() for line in clean(rep.log).split("\n")]):
            same_content = (
                rep.label,
                _frames_key(real),
                _error_key(real),
                real.explained,
                real.details,
                real.truncated,
                tuple(map(_listing, real.frames)),
            )
            by_title.setdefault(real.title, {}).setdefault(same_content, (rep, real))
    failures = read_failures(lines)
    tests = {_function_of(f.title) for f in failures}
    for failure in failures:
        if failure.frames or failure.head:
            reals = list(by_title.get(failure.title, {}).values())[:MAX_REAL_PER_TEST]
            _compare_one(failure, reals, failure.title, out, tests)
    out.notes = _capped(list(dict.fromkeys(out.notes)), "notes")
    out.verdicts = _capped(list(dict.fromkeys(out.verdicts)), "findings")
    out.signals = _capped(list(dict.fromkeys(out.signals)), "signals")
    return out


def _capped(items: list[str], kind: str) -> list[str]:
    if len(items) <= MAX_FINDINGS:
        return items
    return items[:MAX_FINDINGS] + [
        f"{items[MAX_FINDINGS].split(':', 1)[0]}: and {len(items) - MAX_FINDINGS} more {kind} of the red log's failures"
    ]
