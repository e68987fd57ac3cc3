"""Is ``artifacts/red.log`` a real pytest failure from this tree?

The rule for ``genuine`` (all must hold):

1. ``failed``: the log shows a failure: a closing line counting one or more
   failed tests, or the word FAILED (the gate's own test).
2. pytest's closing summary line counts ``N failed`` (N >= 1), in any of the
   shapes pytest has printed: ``1 failed in 0.03s``, ``=== 1 failed, 2 passed,
   1 warning in 1.23s (0:00:01) ===``, old ``in 0.12 seconds``. ``pytest -qq``
   prints no closing line: a log with none passes this point when it has a
   progress line with F and a short test summary naming the failures.
3. at least one more piece of pytest's structure: a progress line showing F
   (``test_x.py F.`` / ``F [100%]`` / ``-v``'s ``::test_a FAILED [ 50%]``),
   the FAILURES section, or the short test summary; and the run's start
   (the session header or a progress line) before its first report
   section: a pasted tail of a log is an excerpt, not a log.
4. the failing tests can be named (from the summary, ``-v`` lines or the
   FAILURES section headers) and, when ``known_test_ids`` is given, every one
   of them is a test of this submission: the original tree's tests or the
   candidate's own (the caller passes the union, since a candidate may write
   the failing test first). Doctest ids (``path::module.function``) count
   when that docstring holds ``>>>``.
5. nothing real pytest cannot print (each found is listed in ``missing``,
   starting "FAILED lines under..." / "pytest's order: ..." / "counts that
   agree: ..."):
   - ``FAILED <id>`` lines stand only under a ``short test summary info``
     header (xdist's ``[gw0] [ 50%] FAILED <id>`` aside);
   - the closing line comes after the report sections (unless another run
     follows it: two runs appended to one file are honest) and, within the
     last run, FAILURES comes before the short summary;
   - the last run's own lines agree with its closing counts: no more failed
     ids in the summary or ``-v`` lines than ``N failed``; the progress
     letters (read only above the first report section, and only when every
     progress-looking line there could be read and the counts hold only the
     usual words) show exactly ``N failed`` F and as many tests as passed,
     failed, skipped, xfailed and xpassed together.

6. with ``reproductions`` (the grader's real runs of this tree; the gate's
   own check has none and skips this point), the log prints what a real run
   prints: each failure section is compared with the same test's sections in
   those runs, tests the log does not show being ignored, and its separators
   and summary lines are held to what pytest writes. The rule, the
   normalisations and the sentences are in ``reproduction`` and
   ``pytestlog``; what no real run of this tree prints is listed in
   ``missing`` and decides, what an edit after the red run or the machine can
   explain is a note.

Signals versus verdicts: a point above decides ``genuine`` only when no
honest run of pytest can produce its absence. What an honest candidate can
produce stays a signal or a note in ``missing``: a missing session header
(``-q``), a missing FAILURES section (``--tb=no``) or summary (``-rN``),
failing differently from the original tree (a test edited or added first),
durations of ``0.00s``, other values in an assertion.

Agreement with the original tree's own run (``original_failures``) is
reported as a signal, or as a note in ``missing``, but does not decide
``genuine``: a candidate who extended or renamed the shipped test before the
red run is honest and fails differently. The sandbox reruns judge that.

Honest logs vary, so before any matching the text loses ANSI colour codes
and other terminal sequences (cursor moves, OSC titles and shell-integration
marks from ``script`` or an IDE terminal), NULs (UTF-16 read without its
byte-order mark), CR line ends and Windows path separators, and ids lose their parameters
(``test_a[1]`` matches ``test_a``) and a leading ``./``. A test id whose path
is a suffix of a known path on folder boundaries also matches, since running
pytest from the parent or a sub-folder prefixes or drops folders.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .pytestlog import read_failures, separator_findings, unwrapped
from .reproduction import Reproduction, compare_with_reproductions, summary_findings

# CSI (colours, cursor moves), OSC (window titles, links: ESC ] ... BEL or ST), other ESC pairs.
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")
# "1 failed", "3 failed, 2 passed, 1 warning" (pytest 9: "1 subtests passed"), then " in 0.12s", " in 12.34s
# (0:00:12)" or the pre-5.1 " in 0.12 seconds"; optionally framed by "=".
CLOSING_RE = re.compile(
    r"^=*\s*(?P<counts>\d+ [a-z]+(?: [a-z]+)?(?:, \d+ [a-z]+(?: [a-z]+)?)*) in \d+(?:\.\d+)?\s*s(?:econds)?"
    r"(?: \(\d+:\d\d:\d\d(?:\.\d+)?\))?\s*=*\s*$"
)
HEADER_RE = re.compile(r"^=+ test session starts =+$")
FAILURES_RE = re.compile(r"^=+ FAILURES =+$")
FRAMED_RE = re.compile(r"^=+ .+ =+$")
SUMMARY_RE = re.compile(r"^=+ short test summary info =+$")
# "test_x.py F.s" (default), "F.F [ 60%]" (-q), classic style without percent; u: pytest 9 subtests.
PROGRESS_RE = re.compile(r"^(?:\S+\.py ?)?[.FEsxXu]+(?:\s+\[\s*\d+%\])?$")
NODE = r"(?P<id>[^\s:]+\.py(?:::[\w.]+)+(?:\[.*?\])?)"
# -v: "test_x.py::test_a FAILED [ 50%]"; xdist -v: "[gw0] [ 50%] FAILED test_x.py::test_a"
VERBOSE_FAILED_RE = re.compile(rf"^{NODE} FAILED(?:\s+\[\s*\d+%\])?$")
SUMMARY_FAILED_RE = re.compile(rf"^(?:\[gw\d+\] \[\s*\d+%\] )?FAILED {NODE}(?: - .*)?$")
SECTION_HEAD_RE = re.compile(r"^_{3,} (?P<name>[\w.]+(?:\[.*\])?) _{3,}$")
SKIP_DIRS = {".git", ".hg", ".venv", "venv", "env", "node_modules", "__pycache__", ".tox", ".pytest_cache"}
MAX_TEST_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class RedLogReport:
    present: bool
    failed: bool
    genuine: bool
    signals: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    failing_ids: tuple[str, ...] = ()
    captured_by: str = "candidate"  # "server": a hosted session's log, run by the server itself

    def to_dict(self) -> dict:
        return {
            "present": self.present,
            "failed": self.failed,
            "genuine": self.genuine,
            "signals": list(self.signals),
            "missing": list(self.missing),
            "failing_ids": list(self.failing_ids),
            "captured_by": self.captured_by,
        }


def clean_log(text: str) -> str:
    """Strip colour codes and CRs so honest logs from any terminal look alike.

    NULs go too: UTF-16 text read without its byte-order mark shows every
    ASCII character followed by one.
    """
    text = ANSI_RE.sub("", text.replace("\x00", ""))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def normalise_id(test_id: str) -> str:
    """``.\\tests\\test_x.py::TestC::test_m[1]`` -> ``tests/test_x.py::TestC::test_m``."""
    path, sep, rest = test_id.strip().partition("::")
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    rest = rest.split("[", 1)[0].replace(".", "::") if sep else ""
    return f"{path}::{rest}" if sep else path


def _suffix_match(log_id: str, known: str) -> bool:
    """Same test, allowing a path prefixed or shortened by folders."""
    log_path, _, log_name = log_id.partition("::")
    known_path, _, known_name = known.partition("::")
    if log_name != known_name:
        return False
    a, b = log_path.split("/"), known_path.split("/")
    shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
    return longer[-len(shorter) :] == shorter


def _doctest_match(log_id: str, known: str) -> bool:
    """A doctest id (``path::module.qualname``, normalised with ``::``) whose module
    part is named with its packages (``tests.test_x.f``) where we wrote ``test_x.f``."""
    log_path, _, log_name = log_id.partition("::")
    known_path, _, known_name = known.partition("::")
    stem = PurePosixPath(known_path).stem
    if not known_name.startswith(stem + "::") and known_name != stem:
        return False
    return log_name.endswith("::" + known_name) and _suffix_match(f"{log_path}::{known_name}", known)


def _id_known(log_id: str, known: set[str], full: bool = True) -> bool:
    if not full:  # only a name from a FAILURES header: match its tail
        return any(k.endswith("::" + log_id) for k in known)
    return log_id in known or any(_suffix_match(log_id, k) or _doctest_match(log_id, k) for k in known)


def _failing_ids(lines: list[str]) -> tuple[list[str], bool]:
    """Failing ids in order of first sight, and whether they are full node ids."""
    ids: list[str] = []
    for line in lines:
        m = SUMMARY_FAILED_RE.match(line) or VERBOSE_FAILED_RE.match(line)
        if m:
            ids.append(normalise_id(m["id"]))
    if ids:
        return list(dict.fromkeys(ids)), True
    # Old pytest (< 6) printed no short summary by default: fall back on the
    # FAILURES section's "____ TestC.test_m ____" headers, which hold names only.
    names, in_failures = [], False
    for line in lines:
        if FAILURES_RE.match(line):
            in_failures = True
        elif line.startswith("=") and in_failures:
            in_failures = False
        elif in_failures and (m := SECTION_HEAD_RE.match(line)):
            names.append(normalise_id("x.py::" + m["name"]).split("::", 1)[1])
    return list(dict.fromkeys(names)), False


def _closing(lines: list[str]) -> tuple[str | None, int]:
    """The last closing summary line and its failed count."""
    for line in reversed(lines):
        m = CLOSING_RE.match(line)
        if m:
            counts = dict((word, int(n)) for n, word in (c.split(" ", 1) for c in m["counts"].split(", ")))
            return line.strip("= "), counts.get("failed", 0)
    return None, 0


def _summary_lines(lines: list[str]) -> tuple[set[int], list[int]]:
    """Indices of lines inside a short test summary section, and of ``FAILED <id>`` lines outside one.

    pytest prints ``FAILED <id> - message`` lines only under its ``short test
    summary info`` header (xdist's ``[gw0] [ 50%] FAILED <id>`` progress lines
    aside); a section ends at the next ``=== ... ===`` header or closing line.
    """
    inside: set[int] = set()
    orphans: list[int] = []
    in_summary = False
    for i, line in enumerate(lines):
        if SUMMARY_RE.match(line):
            in_summary = True
            continue
        if FRAMED_RE.match(line) or CLOSING_RE.match(line):
            in_summary = False
        if in_summary:
            inside.add(i)
        elif line.startswith("FAILED ") and SUMMARY_FAILED_RE.match(line):
            orphans.append(i)
    return inside, orphans


def _counts(line: str) -> dict[str, int]:
    m = CLOSING_RE.match(line)
    if not m:
        return {}
    return {word: int(n) for n, word in (c.split(" ", 1) for c in m["counts"].split(", "))}


OUTCOME_WORDS = {
    "passed",
    "failed",
    "skipped",
    "xfailed",
    "xpassed",
    "error",
    "errors",
    "warning",
    "warnings",
    "deselected",
}
PERCENT_TAIL_RE = re.compile(r"\[\s*\d+%\]$")


def _count_conflicts(run: list[str], counts: dict[str, int], summary_idx: set[int], offset: int) -> list[str]:
    """What in the last run's own lines contradicts its closing counts (impossible for pytest)."""
    problems: list[str] = []
    n_failed = counts.get("failed", 0)
    named = {
        m["id"]
        for i, l in enumerate(run)
        if i + offset in summary_idx and l.startswith("FAILED ") and (m := SUMMARY_FAILED_RE.match(l))
    }
    verbose = {m["id"] for l in run if (m := VERBOSE_FAILED_RE.match(l))}
    for what, ids in (("the short test summary", named), ("the -v lines", verbose)):
        if len(ids) > n_failed:
            problems.append(
                f"counts that agree: {what} names {len(ids)} failed tests, the closing line counts {n_failed}"
            )
    # Progress letters, read only before the first report section (captured
    # output further down may print anything).
    letters = ""
    for line in run:
        if FRAMED_RE.match(line) and not HEADER_RE.match(line):
            break
        if PROGRESS_RE.match(line):
            letters += PERCENT_TAIL_RE.sub("", line.split(".py")[-1] if ".py" in line else line).strip()
        elif PERCENT_TAIL_RE.search(line):
            return problems  # a progress line we cannot read (a space in a path, a plugin): no count
    if not letters or not set(counts) <= OUTCOME_WORDS:
        return problems
    ran = sum(counts.get(w, 0) for w in ("passed", "failed", "skipped", "xfailed", "xpassed"))
    shown = len(letters) - letters.count("E")
    if letters.count("F") != n_failed or shown != ran:
        problems.append(
            f"counts that agree: the progress line shows {letters.count('F')} F in "
            f"{shown} tests, the closing line counts {n_failed} failed of {ran}"
        )
    return problems


def analyse_red_log(
    text: str | None,
    *,
    known_test_ids: set[str] | None,
    original_failures: set[str] | None,
    reproductions: Iterable[Reproduction | tuple] | None = None,
) -> RedLogReport:
    """Read a red log and say what of pytest's own output it shows, and why.

    ``known_test_ids``: ids this submission can fail (original tree and the
    candidate's tests, as from ``collect_test_ids``); None skips that check.
    ``original_failures``: ids failing in the original tree's own run; None
    skips the comparison. ``reproductions``: real sandboxed runs of this tree
    (``Reproduction`` or ``(label, log)``); with them (even none) the log's
    separators and its summary are checked and each failure is compared with
    the same test's failure in those runs (point 6); None (the gate's own
    check, before any rerun) skips all of point 6. The rule for ``genuine`` is
    in the module docstring.
    """
    if text is None or not text.strip():
        what = "red.log" if text is None else "any text in red.log"
        return RedLogReport(present=False, failed=False, genuine=False, missing=(what,))
    lines = [line.rstrip() for line in clean_log(text).split("\n")]
    if reproductions is not None:
        lines = unwrapped(lines)  # separators an editor or a terminal wrapped onto two lines, whole
    signals: list[str] = []
    missing: list[str] = []

    def note(found: bool, label: str) -> bool:
        (signals if found else missing).append(label)
        return found

    # A header is a signal when there; never "missing": `pytest -q` (the
    # gate's own command) prints none, and honest work must not look odd.
    if any(HEADER_RE.match(l) for l in lines):
        signals.append("pytest session header")
    progress = note(
        any(PROGRESS_RE.match(l) and "F" in l.split(".py")[-1] for l in lines)
        or any(VERBOSE_FAILED_RE.match(l) for l in lines),
        "progress line with F",
    )
    failures = note(any(FAILURES_RE.match(l) for l in lines), "FAILURES section")
    summary = note(any(SUMMARY_RE.match(l) for l in lines), "short test summary info")
    closing, n_failed = _closing(lines)
    summary_idx, orphans = _summary_lines(lines)
    summary_named = any(i in summary_idx and SUMMARY_FAILED_RE.match(lines[i]) for i in summary_idx)
    # `pytest -qq` prints no closing line at all; its honest shape is a
    # progress line with F and a short summary naming the failures.
    quiet_shape = not closing and progress and summary_named and not orphans
    if closing and n_failed:
        signals.append(f"closing line '{closing}'")
    elif closing:
        missing.append(f"a failure in the closing line (it says '{closing}')")
    elif quiet_shape:
        signals.append("no closing line, as `pytest -qq` prints")
    else:
        missing.append("closing line 'N failed in X s'")
    failed = n_failed > 0 or "FAILED" in text

    # Consistency: what real pytest cannot print. Each is a verdict.
    conflicts: list[str] = []
    if orphans:
        conflicts.append(f"FAILED lines under a 'short test summary info' header (line {orphans[0] + 1} stands alone)")
    last = max((i for i, l in enumerate(lines) if CLOSING_RE.match(l)), default=None)
    if last is not None:
        previous = max((i for i, l in enumerate(lines[:last]) if CLOSING_RE.match(l)), default=-1)
        run = lines[previous + 1 : last + 1]
        after = lines[last + 1 :]
        if any(FAILURES_RE.match(l) or SUMMARY_RE.match(l) for l in after) and not any(
            PROGRESS_RE.match(l) for l in after
        ):
            conflicts.append("pytest's order: the closing line comes after the report sections")
        f_at = max((i for i, l in enumerate(run) if FAILURES_RE.match(l)), default=-1)
        s_at = max((i for i, l in enumerate(run) if SUMMARY_RE.match(l)), default=-1)
        if s_at >= 0 and f_at > s_at:
            conflicts.append("pytest's order: the FAILURES section comes before the short test summary")
        conflicts += _count_conflicts(run, _counts(lines[last]), summary_idx, previous + 1)
    if reproductions is not None:
        conflicts += separator_findings(lines, CLOSING_RE, coloured="\x1b[" in text)
        conflicts += summary_findings(lines, read_failures(lines), summary_idx)
        compared = compare_with_reproductions(lines, reproductions, clean=clean_log)
        conflicts += compared.verdicts
        signals.extend(compared.signals)
        missing.extend(compared.notes)
    missing.extend(conflicts)

    ids, full = _failing_ids(lines)
    ids_ok = note(bool(ids), "names of the failing tests") if failed else False
    if ids and known_test_ids is not None:
        known = {normalise_id(k) for k in known_test_ids}
        for test_id in ids:
            shown = test_id if full else f"named {test_id}"
            if _id_known(test_id, known, full):
                signals.append(f"failing test {shown} exists in the tree")
            else:
                missing.append(f"failing test {shown} is not a test in this tree")
                ids_ok = False
    if ids and original_failures is not None:
        theirs = {normalise_id(o) for o in original_failures}
        same = all(_id_known(i, theirs, full) for i in ids) and all(
            any(_id_known(i, {o}, full) for i in ids) for o in theirs
        )
        if same:
            signals.append("same failures as the original tree's own run")
        else:
            missing.append(
                "same failures as the original tree's own run (fine when the candidate changed or added tests first)"
            )

    # why a verdict: pytest prints the session header or its progress lines
    # before any report section, in every mode (-q, -qq, -v, xdist); a log
    # that starts at its FAILURES section or its summary is a cut excerpt,
    # and the cut part is where the run's real course would show.
    started = _shows_start(lines)
    if not started:
        missing.append(
            "the run's start: neither pytest's session header nor a progress line comes before its "
            "report sections (an excerpt of a log, not a log)"
        )

    genuine = bool(
        failed
        and ((closing and n_failed) or quiet_shape)
        and (progress or failures or summary)
        and ids_ok
        and not conflicts
        and started
    )
    return RedLogReport(
        present=True,
        failed=failed,
        genuine=genuine,
        signals=tuple(signals),
        missing=tuple(missing),
        failing_ids=tuple(ids),
    )


# Lines pytest prints as a run starts: "collected 3 items", "-v"'s "tests/test_x.py::test_a PASSED",
# xdist's "gw0 [3] / gw1 [3]" and "[gw0] [ 50%] PASSED ...".
START_RE = re.compile(
    r"^(?:collected \d+ items?\b|collecting \.\.\.|\S+::\S+ (?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b"
    r"|(?:gw\d+ \[\d+\]\s*/?\s*)+$|\[gw\d+\] )"
)


def _shows_start(lines: list[str]) -> bool:
    """Whether the log holds what pytest prints before its report sections (header, collection, progress)."""
    for line in lines:
        if FAILURES_RE.match(line) or SUMMARY_RE.match(line) or re.match(r"^=+ ERRORS =+$", line):
            return False
        if HEADER_RE.match(line) or PROGRESS_RE.match(line) or START_RE.match(line) or PERCENT_TAIL_RE.search(line):
            return True
    return False


def _is_test_module(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name[:-3].endswith("_test"))


def _class_ids(prefix: str, cls: ast.ClassDef) -> set[str]:
    ids: set[str] = set()
    if any(isinstance(n, ast.FunctionDef) and n.name == "__init__" for n in cls.body):
        return ids  # pytest does not collect classes with __init__
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            ids.add(f"{prefix}::{cls.name}::{node.name}")
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            ids |= _class_ids(f"{prefix}::{cls.name}", node)
    return ids


def _doctest_ids(rel: str, module: ast.Module) -> set[str]:
    """``--doctest-modules`` ids (``path::module.qualname``) of docstrings holding ``>>>``."""
    stem = PurePosixPath(rel).stem
    ids: set[str] = set()

    def visit(node: ast.AST, qual: str) -> None:
        doc = (
            ast.get_docstring(node, clean=False)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            else None
        )
        if doc and ">>>" in doc:
            ids.add(f"{rel}::{qual}")
        for child in getattr(node, "body", ()):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, f"{qual}.{child.name}")

    visit(module, stem)
    return ids


def collect_test_ids(tree: Path | Mapping[str, bytes]) -> set[str]:
    """Test ids (``path/test_x.py::test_a``, ``...::TestC::test_m``) found by parsing.

    ``tree`` is a folder or its files, {posix path: bytes}. Uses pytest's
    default discovery names (``test_*.py``/``*_test.py`` files, ``test*``
    functions, ``Test*`` classes) and ``ast`` only: nothing from the
    candidate runs. Files that do not parse are skipped. Docstrings holding
    ``>>>`` in any module give ``--doctest-modules`` ids
    (``invoices.py::invoices.total``), since a candidate may write a doctest.
    """
    ids: set[str] = set()
    for rel, read in _python_files(tree):
        try:
            module = ast.parse(read())
        except (SyntaxError, ValueError):
            continue
        ids |= _doctest_ids(rel, module)  # any module: `--doctest-modules` reads them all
        if not _is_test_module(rel.rsplit("/", 1)[-1]):
            continue
        for node in module.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                ids.add(f"{rel}::{node.name}")
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                ids |= _class_ids(rel, node)
    return ids


def _returning(data: bytes) -> Callable[[], bytes]:
    return lambda: data


def _python_files(tree: Path | Mapping[str, bytes]) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """(posix path, a function reading it) for each .py file pytest would look at, small enough to parse."""
    if isinstance(tree, Mapping):
        for rel in sorted(tree):
            parts = rel.split("/")
            if (
                rel.endswith(".py")
                and not any(d in SKIP_DIRS or d.startswith(".") for d in parts[:-1])
                and len(tree[rel]) <= MAX_TEST_FILE_BYTES
            ):
                yield rel, _returning(tree[rel])
        return
    root = Path(tree)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if not name.endswith(".py") or path.is_symlink():
                continue
            if path.stat().st_size > MAX_TEST_FILE_BYTES:
                continue
            yield PurePosixPath(path.relative_to(root)).as_posix(), path.read_bytes
