"""What a sandboxed run came to: its tests from pytest's JUnit report (read with defusedxml, capped), its
counts from the log where there is no report, and its outcome.
"""

from __future__ import annotations

import io
import logging
import re
import signal
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

import defusedxml.ElementTree as DefusedET
from defusedxml.common import DefusedXmlException

logger = logging.getLogger(__name__)


class SandboxUnavailable(Exception):
    """Our side failed (no bwrap, bwrap cannot start, no free uid): retry later, don't blame the candidate."""


JUNIT_MAX_BYTES = 16 << 20


# pytest writes a handful of elements per test: this is tens of thousands of tests.
JUNIT_MAX_ELEMENTS = 200_000


OUTCOMES = ("passed", "failed", "error", "timeout", "killed", "no_tests")


@dataclass(frozen=True)
class TestCase:
    __test__ = False  # not a pytest class, despite the name
    nodeid: str
    outcome: str  # passed|failed|error|skipped|xfailed|xpassed


@dataclass(frozen=True)
class RunResult:
    outcome: str  # one of OUTCOMES
    exit_code: int | None
    passed: int
    failed: int
    errors: int
    skipped: int
    xfailed: int
    xpassed: int
    duration_s: float
    log: str
    tests: tuple[TestCase, ...] = ()
    notes: tuple[str, ...] = ()
    decided_by: tuple[str, ...] = ()  # the notes of ``notes`` that explain the outcome (a re-decision replaces them)
    witness: str = ""  # the witness plugin's JSON lines (pytest runs), read by grading.engine.integrity
    server_log: str = ""  # what the candidate's side printed, for a run across the process boundary


class Counts(TypedDict):
    """A run's six counts, as RunResult's fields of the same names."""

    passed: int
    failed: int
    errors: int
    skipped: int
    xfailed: int
    xpassed: int


def run_counts(counts: Mapping[str, int]) -> Counts:
    """The six counts of ``counts`` (counted by outcome name), to be passed on as RunResult's fields."""
    return Counts(
        passed=counts["passed"],
        failed=counts["failed"],
        errors=counts["errors"],
        skipped=counts["skipped"],
        xfailed=counts["xfailed"],
        xpassed=counts["xpassed"],
    )


def _nodeid(case: ET.Element) -> str:
    file, classname, name = case.get("file", ""), case.get("classname", ""), case.get("name", "")
    if file.endswith(".py"):
        module = file[:-3].replace("/", ".")
        rest = classname[len(module) + 1 :] if classname.startswith(module) else ""
        return "::".join(p for p in (file, *rest.split("."), name) if p)
    return "::".join(p for p in (classname, name) if p)


def parse_junit(data: bytes) -> list[TestCase]:
    """Test cases from pytest's JUnit XML; raises ValueError when it is not usable.

    The report is written inside the sandbox, where candidate code can
    replace it, so it is read as hostile: by defusedxml with no DTD, entity
    or external reference allowed (whatever the encoding hides them in), in
    strict UTF-8 as pytest writes it, as a stream that stops past
    ``JUNIT_MAX_ELEMENTS`` elements, so that a report of millions of tiny
    elements cannot fill the worker's memory (its bytes are capped by
    ``JUNIT_MAX_BYTES`` as they are read).
    """
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("report is not UTF-8") from None
    cases = []
    elements = 0
    try:
        for event, element in DefusedET.iterparse(io.BytesIO(data), events=("start", "end"), forbid_dtd=True):
            if event == "start":
                elements += 1
                if elements > JUNIT_MAX_ELEMENTS:
                    raise ValueError(f"report holds more than {JUNIT_MAX_ELEMENTS} elements")
                continue
            if element.tag != "testcase":
                continue
            kinds = {child.tag: child.get("type") for child in element}
            # fmt: off
            outcome = ("failed" if "failure" in kinds else "error" if "error" in kinds
                       else "passed" if "skipped" not in kinds
                       else "xfailed" if kinds["skipped"] == "pytest.xfail" else "skipped")
            # fmt: on
            cases.append(TestCase(_nodeid(element), outcome))
            element.clear()  # its captured output is read; keep only what the count needs
    except DefusedXmlException as exc:
        raise ValueError(f"report holds a DTD, an entity or an external reference ({type(exc).__name__})") from None
    except ET.ParseError as exc:
        raise ValueError(f"unreadable JUnit XML: {exc}") from None
    return cases


_SUMMARY_RE = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+).* in [\d.]+s", re.M)


_COUNT_RE = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


_XPASS_RE = re.compile(r"^XPASS (\S+)", re.M)


_MEMORY_RE = re.compile(r"^E\s+MemoryError\b|^MemoryError\b", re.M)  # a traceback's last line, not any mention


def counts_from_text(log: str) -> dict[str, int]:
    """pytest's counts as its closing summary line prints them (zeros where it has none)."""
    counts = dict.fromkeys(("passed", "failed", "errors", "skipped", "xfailed", "xpassed"), 0)
    found = _SUMMARY_RE.findall(log)
    if found:
        for n, word in _COUNT_RE.findall(found[-1]):
            counts["errors" if word.startswith("error") else word] = int(n)
    return counts


def decide_outcome(
    exit_code, counts, tests_known, timed_out, duration, limits, log, pytest_run: bool = False, report_ok: bool = True
) -> tuple[str, list[str]]:
    """A run's outcome and the notes that explain it (docs/evidence.md, "How the outcome is decided")."""
    notes: list[str] = []
    if timed_out:
        return "timeout", [f"stopped at the wall-clock limit ({limits.wall_s:g} s)"]
    if exit_code is not None and (exit_code < 0 or exit_code > 128):
        sig = -exit_code if exit_code < 0 else exit_code - 128
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and duration >= limits.cpu_s * 0.9):
            notes.append(f"killed by the CPU limit ({limits.cpu_s} s)")
        else:
            notes.append(f"killed by {name} (a limit such as memory, or a crash)")
        return "killed", notes
    if exit_code not in (0, 5) and _MEMORY_RE.search(log):
        return "killed", [f"hit the memory limit ({limits.address_space_bytes >> 20} MiB): MemoryError"]
    if exit_code == 5:
        return "no_tests", ["pytest collected no tests (exit 5)"]
    if exit_code == 0:
        if pytest_run and not report_ok:
            # why: pytest always writes the report we ask for; a run that exits 0
            # without one had it suppressed (-p no:junitxml) or exited early
            # (os._exit(0) on import), and its text summary may be forged.
            return "error", ["exit 0 without pytest's JUnit report: the pass cannot be confirmed"]
        if tests_known and counts["passed"] == 0 and counts["xpassed"] == 0:
            return "no_tests", ["nothing passed: every test was skipped or xfailed"]
        if pytest_run and counts["passed"] == 0 and counts["xpassed"] == 0:
            # why: exit 0 with no test reported (--co, --collect-only, an early exit) is not a pass
            return "no_tests", ["pytest exited 0 but reported no test at all"]
        if skips := counts["skipped"] + counts["xfailed"]:
            notes.append(f"{skips} tests were skipped or xfailed: a skip or xfail is not a pass")
        if counts["xpassed"]:
            notes.append(f"{counts['xpassed']} tests marked xfail passed unexpectedly (xpassed)")
        return "passed", notes
    if exit_code == 1 and counts["failed"]:
        if counts["errors"]:
            notes.append(f"also {counts['errors']} errors")
        return "failed", notes
    if counts["errors"] or exit_code in (2, 3, 4):
        return "error", notes
    return "failed", notes
