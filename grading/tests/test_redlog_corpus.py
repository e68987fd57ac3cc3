"""Red logs against real runs: real pytest 7, 8 and 9 output stays genuine, counterfeits do not.

The honest logs are made here by real pytest versions from PyPI (see
``realpytest.py``: the venvs and the logs are kept under the var folder, so
only the first run pays for them); the real runs they are compared with are
made by the grader's own sandbox, with a planted failing test in each rerun of
the candidate's tests, as the grader plants them.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from conftest import require
from grading.engine.checks.artifacts import decode_text
from grading.engine.checks.pytestlog import read_failures
from grading.engine.checks.redlog import Reproduction, analyse_red_log, clean_log, collect_test_ids
from grading.engine.checks.reproduction import steady_failures
from grading.engine.spec import sample_spec

from . import realpytest
from .realpytest import MAIN, OTHER_PYTHON_PYTEST, PYTEST_VERSIONS, VenvUnavailable, build_venv, trees, write_files

# The tree a log was made on -> the tree the grader reruns (the candidate's tree
# as uploaded): the same, or the same work at a later moment.
FINAL = {"orig": "orig", "cand": "cand", "deep": "deep", "cand_first_guess": "cand"}
RERUN_TREES = ("orig", "cand", "deep", "cand_docstring")
ORIGINAL_FAILURES = {"test_invoices.py::test_charges_only"}
VERDICTS = ("separator widths:", "lines a real run prints:", "the assertion's own lines:",
            "summary and traceback:", "line numbers:", "the traceback's own lines:")
CORPUS = realpytest.corpus_entries()


def verdicts(report) -> list[str]:
    return [m for m in report.missing if m.startswith(VERDICTS)]


@pytest.fixture(scope="session")
def pythons(tmp_path_factory) -> dict[str, Path]:
    """pytest 7.4, 8.3 and 9.2 venvs (required), and pytest 8.3 on other Pythons found here (optional).

    Built once under <var>/test-pytest (a few seconds each, from PyPI);
    later test runs reuse them. Which ones there are is found once per test run, by whichever test process
    asks first (why: the other Pythons are tried afresh each time, and one whose venv cannot be built fails
    again in every process that tries it).
    """
    from django.conf import settings

    def make() -> dict[str, str]:
        folder = Path(settings.VAR_DIR) / "test-pytest"
        found: dict[str, Path] = {}
        start = time.monotonic()
        try:
            for label, version in zip(MAIN, PYTEST_VERSIONS):
                found[label] = build_venv(folder / f"py-{version}", sys.executable, version)
        except VenvUnavailable as exc:
            require(False, f"cannot build the pytest venvs from PyPI: {exc}")
        for label, exe in realpytest.other_pythons().items():
            try:
                found[label] = build_venv(folder / f"{label}-{OTHER_PYTHON_PYTEST}", exe, OTHER_PYTHON_PYTEST)
            except VenvUnavailable:
                continue  # another interpreter is a bonus; the three pytest versions are not
        print(f"pytest venvs ready in {time.monotonic() - start:.1f} s: {', '.join(found)}")
        return {label: str(exe) for label, exe in found.items()}

    return {label: Path(exe) for label, exe in realpytest.once_per_run(tmp_path_factory, "pytest-venvs", make).items()}


@pytest.fixture(scope="session")
def real_logs(pythons) -> dict[tuple[str, str, str], str]:
    """Every log of the corpus, made once and kept under <var>/test-pytest."""
    from django.conf import settings

    other = [label for label in pythons if label not in MAIN]
    start = time.monotonic()
    logs = realpytest.make_logs(pythons, realpytest.corpus_entries(other), Path(settings.VAR_DIR) / "test-pytest")
    print(f"{len(logs)} real pytest logs ready in {time.monotonic() - start:.1f} s")
    return logs


@pytest.fixture(scope="session")
def real_runs(grading_sandbox, tmp_path_factory) -> dict[str, str]:
    """The grader's real runs: the original tree, and each rerun tree with a planted failing test.

    Each is run a second time (``<name>:again``), as grade_tree does, so that
    the failures that print the same values every time decide (``steady``).
    Made once per test run, whichever test process asks first.
    """

    def make() -> dict[str, str]:
        spec = sample_spec()
        folder = write_files(spec.fixture, tmp_path_factory.mktemp("original"))
        runs = {"original": grading_sandbox.run(folder, spec.test_command).log,
                "original:again": grading_sandbox.run(folder, spec.test_command).log}
        for name in RERUN_TREES:
            folder = write_files(realpytest.with_canary(trees()[name]), tmp_path_factory.mktemp(f"rerun-{name}"))
            runs[name] = grading_sandbox.run(folder, spec.test_command).log
            runs[f"{name}:again"] = grading_sandbox.run(write_files(trees()[name], tmp_path_factory.mktemp(
                f"again-{name}")), spec.test_command).log
        return runs

    runs = realpytest.once_per_run(tmp_path_factory, "redlog-real-runs", make)
    assert "test_q7zk3_canary" in runs["cand"]
    return runs


def reproductions(real_runs: dict[str, str], final: str) -> list[Reproduction]:
    """What grade_tree passes: the original run, and the candidate's tests over the original code."""
    spec = sample_spec()
    return [Reproduction("original", real_runs["original"], tuple(spec.fixture),
                         steady_failures(real_runs["original"], real_runs["original:again"], clean=clean_log)),
            Reproduction("tests_vs_original", real_runs[final], spec.production_paths,
                         steady_failures(real_runs[final], real_runs[f"{final}:again"], clean=clean_log))]


@pytest.fixture(scope="session")
def known_ids(tmp_path_factory) -> dict[str, set[str]]:
    return {name: collect_test_ids(write_files(files, tmp_path_factory.mktemp(f"ids-{name}")))
            for name, files in trees().items()}


def analyse(text: str, tree: str, known_ids, real_runs, final: str | None = None):
    final = final or FINAL[tree]
    return analyse_red_log(text, known_test_ids=known_ids[final], original_failures=ORIGINAL_FAILURES,
                           reproductions=reproductions(real_runs, final))


def titles(text: str) -> list[str]:
    return [f.title for f in read_failures([l.rstrip() for l in clean_log(text).split("\n")])]


# --- honest logs ------------------------------------------------------------------------------


@pytest.mark.parametrize("tree,python,mode", CORPUS, ids=["-".join(e) for e in CORPUS])
def test_a_real_pytest_log_is_genuine_and_matches_the_real_runs(real_logs, real_runs, known_ids, tree, python, mode):
    text = real_logs[(tree, python, mode)]
    report = analyse(text, tree, known_ids, real_runs)
    assert report.genuine, report.missing
    assert not verdicts(report)
    for title in titles(text):
        if tree == "cand_first_guess" and title == "TestRefunds.test_refund_lowers_the_total":
            # Red before the expectation was corrected: a note says so, nothing more.
            assert any(m.startswith(f"the failing line of {title} in a real run") for m in report.missing)
        elif mode == "assert_plain":
            # No assertion rewriting: a plain AssertionError, noted; the where lines are not asked for.
            assert any(m.startswith(f"pytest's explanation of {title}'s assertion") for m in report.missing), \
                report.missing
        else:
            assert any(s.startswith(f"the failure of {title} matches the ") for s in report.signals), \
                (title, report.signals, report.missing)
    # The checks that need no real run (the gate's shape, separators, the assertion's own lines) hold too.
    alone = analyse_red_log(text, known_test_ids=None, original_failures=None, reproductions=[])
    assert alone.genuine and not verdicts(alone), alone.missing


def test_real_logs_of_other_python_versions_are_genuine(pythons, real_logs, real_runs, known_ids):
    other = sorted({python for _, python, _ in real_logs} - set(MAIN))
    require(bool(other), "no other Python version on this machine (python3.10, python3.13)")
    for (tree, python, mode), text in real_logs.items():
        if python in other:
            report = analyse(text, tree, known_ids, real_runs)
            assert report.genuine and not verdicts(report), ((tree, python, mode), report.missing)
            assert any(s.startswith("the failure of test_charges_only matches") for s in report.signals)


def test_lines_added_above_the_candidates_tests_after_the_red_run_are_notes(real_logs, real_runs, known_ids):
    """The red run, then a docstring added at the top of the test file: every line number moved by 3."""
    for (tree, python, mode), text in real_logs.items():
        if tree != "cand" or python not in MAIN or mode not in ("q", "tb_short", "tty"):
            continue
        report = analyse(text, "cand", known_ids, real_runs, final="cand_docstring")
        assert report.genuine and not verdicts(report), report.missing
        moved = [m for m in report.missing if m.startswith("line numbers of a real run:")]
        assert len(moved) == 3 and all("fine when lines above it were edited after the red run" in m for m in moved)
        assert any(s.startswith("the failure of test_charges_only matches the original") for s in report.signals)


def test_tests_the_red_log_does_not_name_are_ignored(real_logs, real_runs, known_ids):
    """The rerun holds a planted failing test the candidate never wrote: nothing is said of it."""
    report = analyse(real_logs[("cand", "pytest9", "q")], "cand", known_ids, real_runs)
    said = " ".join(report.signals + report.missing)
    assert report.genuine and "canary" not in said and "q7zk3" not in said


def windows_console(text: str) -> str:
    """What pytest on Windows prints for the same run: separators one column narrower (pytest keeps the
    last column free on win32), backslashed paths, a drive, WindowsPath, CRLF."""
    def recentre(m: re.Match) -> str:
        char, title = m[1][0], m[2]
        fill = char * max((79 - len(title) - 2) // 2, 1)
        line = f"{fill} {title} {fill}"
        return line + char if len(line) + 1 <= 79 else line

    text = clean_log(text)
    text = re.sub(r"^([=_-]{2,}) (.+?) [=_-]{2,}$", recentre, text, flags=re.M)
    text = re.sub(r"PosixPath\('/tmp/[^']*?/takehome/", "WindowsPath('C:/Users/ana/takehome/", text)
    text = re.sub(r"PosixPath\('/tmp/pytest-of-root/", "WindowsPath('C:/Users/ana/AppData/Local/Temp/pytest-of-ana/",
                  text)
    text = re.sub(r"^tests/", r"tests\\", text, flags=re.M)
    return text.replace("\n", "\r\n")


def utf16(text: str) -> str:
    return decode_text(b"\xff\xfe" + text.replace("\n", "\r\n").encode("utf-16-le"))


def pasted_twice(text: str) -> str:
    return text + "\n" + text


HONEST_VARIANTS = [(tree, python, mode, variant) for tree, python, mode in
                   [("orig", "pytest9", "default"), ("cand", "pytest7", "q"), ("deep", "pytest8", "tb_short"),
                    ("cand", "pytest9", "tty")]
                   for variant in (windows_console, utf16, pasted_twice)]


@pytest.mark.parametrize("tree,python,mode,variant", HONEST_VARIANTS,
                         ids=[f"{t}-{p}-{m}-{v.__name__}" for t, p, m, v in HONEST_VARIANTS])
def test_honest_variants_of_real_logs_are_genuine(real_logs, real_runs, known_ids, tree, python, mode, variant):
    text = variant(real_logs[(tree, python, mode)])
    report = analyse(text, tree, known_ids, real_runs)
    assert report.genuine and not verdicts(report), report.missing
    assert any(s.startswith("the failure of test_charges_only matches") for s in report.signals)


def wrapped(text: str, width: int) -> str:
    """Every line cut at ``width`` columns, as a narrow editor or terminal pastes it."""
    out = []
    for line in clean_log(text).split("\n"):
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out)


@pytest.mark.parametrize("tree,mode", [("cand", "q"), ("cand", "tb_short"), ("deep", "tb_native")])
def test_a_log_wrapped_by_an_editor_gets_no_verdict_from_the_comparison(real_logs, real_runs, known_ids, tree, mode):
    """Wrapped lines are read whole again; whatever else a wrapped log loses, these checks stay quiet."""
    for width in (60, 100):
        report = analyse(wrapped(real_logs[(tree, "pytest9", mode)], width), tree, known_ids, real_runs)
        assert not verdicts(report), (width, report.missing)


@pytest.mark.parametrize("style", ["q", "tb_short", "tb_long", "tb_native"])
def test_every_traceback_style_reads_into_the_same_frames(real_logs, style):
    """A failure three frames down, and a chained one, read alike from --tb=auto, short, long and native."""
    auto = {f.title: f for f in read_failures(clean_log(real_logs[("deep", "pytest9", "q")]).split("\n"))}
    other = {f.title: f for f in read_failures(clean_log(real_logs[("deep", "pytest9", style)]).split("\n"))}
    for title in ("test_bad_cents_are_reported", "test_chained_error"):
        key = [(Path(f.path).name, f.line, f.statement, f.function) for f in other[title].frames]
        assert key == [(Path(f.path).name, f.line, f.statement, f.function) for f in auto[title].frames]
        assert other[title].head[-1][1].startswith("RuntimeError" if "chained" in title else "ValueError")
    paths = [Path(f.path).name for f in other["test_bad_cents_are_reported"].frames]
    assert paths == ["test_parsing.py", "test_parsing.py", "invoices.py"]


# --- counterfeits ---------------------------------------------------------------------------------

HAND_TYPED = """============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.3.5, pluggy-1.5.0
rootdir: /home/ana/takehome
collected 6 items

test_invoices.py F                                                       [ 16%]
tests/test_refunds.py F.FF.                                              [100%]

=================================== FAILURES ===================================
______________________________ test_charges_only _______________________________

    def test_charges_only():
>       assert invoices.total(FIXTURE) == 1500
E       AssertionError: assert 1700 == 1500
E        +  where 1700 = <function total at 0x7f2a1c3e5d30>(PosixPath('/home/ana/takehome/sample.csv'))
E        +    where <function total at 0x7f2a1c3e5d30> = invoices.total

test_invoices.py:9: AssertionError
___________________ TestRefunds.test_refund_lowers_the_total ___________________

self = <test_refunds.TestRefunds object at 0x7f2a1c40e2d0>

    def test_refund_lowers_the_total(self):
        warnings.warn("refunds are negative", UserWarning)
>       assert total(FIXTURE) == 1300
E       AssertionError: assert 1700 == 1300

tests/test_refunds.py:22: AssertionError
_______________________ TestRefunds.test_rows[cents1-60] _______________________

    def test_rows(self, tmp_path, cents, expected):
>       assert invoices.total(write(tmp_path, *cents)) == expected
E       AssertionError: assert 140 == 60

tests/test_refunds.py:26: AssertionError
______________________________ test_only_refunds _______________________________

    def test_only_refunds(tmp_path):
        total = invoices.total(write(tmp_path, -5, -10))
        print("total was", total)
>       assert total == -15, "refunds only must sum below zero"
E       AssertionError: refunds only must sum below zero
E       assert 15 == -15

tests/test_refunds.py:32: AssertionError
=========================== short test summary info ============================
FAILED test_invoices.py::test_charges_only - AssertionError: assert 1700 == 1500
FAILED tests/test_refunds.py::TestRefunds::test_refund_lowers_the_total - AssertionError: assert 1700 == 1300
FAILED tests/test_refunds.py::TestRefunds::test_rows[cents1-60] - AssertionError: assert 140 == 60
FAILED tests/test_refunds.py::test_only_refunds - AssertionError: refunds only must sum below zero
========================= 4 failed, 2 passed in 0.05s ==========================
"""


def swap_sections(text: str, take: str, into: str) -> str:
    """``into``'s traceback replaced by ``take``'s, under ``into``'s own, correctly centred header."""
    blocks = re.split(r"(?m)^(?=_{3,} \S.* _{3,}$|={3,} short test summary info)", clean_log(text))
    body = {b.split("\n", 1)[0].strip("_ "): b.split("\n", 1)[1] for b in blocks if b.startswith("___")}
    return "".join(b.split("\n", 1)[0] + "\n" + body[take] if b.startswith("___") and b.split("\n", 1)[0]
                   .strip("_ ") == into else b for b in blocks)


def counterfeits(logs) -> list[tuple[str, str, str, str]]:
    """(case, red.log, tree, the start of the finding that must name the differing lines)."""
    cand_q = clean_log(logs[("cand", "pytest9", "q")])
    cand_v = clean_log(logs[("cand", "pytest8", "v")])
    orig_default = clean_log(logs[("orig", "pytest7", "default")])
    deep_q = clean_log(logs[("deep", "pytest9", "q")])
    return [
        ("hand-typed with every section, two assertions without + where", HAND_TYPED, "cand",
         "lines a real run prints: under the same failing line `> assert invoices.total(write(tmp_path, *cents)) == "
         "expected` the tests_vs_original run prints `E + where 140 ="),
        ("hand-typed: a call typed differently, still without + where", HAND_TYPED, "cand",
         "lines a real run prints: for TestRefunds.test_refund_lowers_the_total, the failing line "
         "`> assert total(FIXTURE) == 1300` calls a function"),
        ("a + where line added to an assertion on a local name",
         cand_q.replace("E       assert 15 == -15", "E       assert 15 == -15\nE        +  where 15 = total"), "cand",
         "lines a real run prints: red.log's line"),
        ("copied, the computed value changed everywhere but the + where line",
         cand_v.replace("assert 140 == 60", "assert 60 == 60"), "cand",
         "the assertion's own lines: for TestRefunds.test_rows[cents1-60], red.log's line"),
        ("copied, the expectation changed in the error line only",
         cand_q.replace("E       AssertionError: assert 1700 == 1300", "E       AssertionError: assert 1700 == 1200"),
         "cand", "the assertion's own lines: for TestRefunds.test_refund_lowers_the_total, the failing line"),
        ("copied, the line number of the packet's own test changed",
         orig_default.replace("test_invoices.py:9: AssertionError", "test_invoices.py:11: AssertionError"), "orig",
         "line numbers: red.log's line"),
        ("copied, another test's traceback under this test's header",
         swap_sections(cand_q, "test_charges_only", "TestRefunds.test_rows[cents1-60]"), "cand",
         "the traceback's own lines: the section of TestRefunds.test_rows[cents1-60] starts in `test_charges_only`"),
        ("copied, the test renamed without re-centring its header",
         cand_q.replace("test_only_refunds", "test_positive_rows_are_kept"), "cand",
         "separator widths: red.log's line"),
        ("another project's pytest run", decode_text((Path(__file__).parent / "logs" / "pytest8_other_q.log")
                                                       .read_bytes()), "orig",
         "failing test test_dates.py::test_parse_date is not a test in this tree"),
        ("the summary line edited, the traceback left",
         deep_q.replace("FAILED tests/test_parsing.py::test_totals_as_a_list - assert [1700] == [1300]",
                        "FAILED tests/test_parsing.py::test_totals_as_a_list - assert [1300] == [1300]"), "deep",
         "summary and traceback: red.log's line"),
    ]


COUNTERFEIT_CASES = [c[0] for c in counterfeits({k: "" for k in CORPUS})]


@pytest.mark.parametrize("case", COUNTERFEIT_CASES)
def test_a_counterfeit_is_not_genuine_and_names_the_lines_that_differ(real_logs, real_runs, known_ids, case):
    _, text, tree, finding = next(c for c in counterfeits(real_logs) if c[0] == case)
    report = analyse(text, tree, known_ids, real_runs)
    assert not report.genuine
    found = [m for m in report.missing if m.startswith(finding)]
    assert found, report.missing
    if case != "another project's pytest run":
        assert re.search(r"line \d+ `", found[0]), found  # a reviewer can find the line
    if "line number" in case:
        assert "`test_invoices.py:11` for `assert invoices.total(FIXTURE) == 1500`" in found[0], found
        assert "is at line 9 in every real run" in found[0]
