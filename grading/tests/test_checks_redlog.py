"""Red log check: honest logs of every shape pass, forgeries do not.

The logs under ``logs/`` are real pytest output (see ``logs/README.md``);
Windows, CRLF, UTF-16 and old-pytest variants are derived from them here.
"""

import re
from pathlib import Path

import pytest

from grading.engine.checks.artifacts import decode_text
from grading.engine.checks.pytestlog import section_title
from grading.engine.checks.redlog import analyse_red_log, clean_log, collect_test_ids, normalise_id
from grading.engine.checks.reproduction import Reproduction, normalise_text
from grading.engine.spec import sample_spec

LOGS = Path(__file__).parent / "logs"
ORIGINAL_FAILURES = {"test_invoices.py::test_charges_only"}

# The test file the "cand" logs were captured with: a candidate who wrote a
# failing test first, in a sub-folder, with a class and a parametrised test.
CANDIDATE_TEST = '''
import sys, warnings
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent.parent))
import invoices
import pytest

FIXTURE = Path(__file__).parent.parent / "sample.csv"


class TestRefunds:
    def test_refund_negative_cents_reduce_total(self):
        warnings.warn("demo warning", UserWarning)
        assert invoices.total(FIXTURE) == 1300

    @pytest.mark.parametrize("rows,expected", [("1\\n", 1), ("-5\\n", -5)])
    def test_rows(self, tmp_path, rows, expected):
        p = tmp_path / "x.csv"
        p.write_text("cents\\n" + rows)
        assert invoices.total(p) == expected


def test_positive_only(tmp_path):
    p = tmp_path / "y.csv"
    p.write_text("cents\\n10\\n20\\n")
    assert invoices.total(p) == 30
'''


@pytest.fixture
def original_tree(tmp_path):
    root = tmp_path / "orig"
    for path, data in sample_spec().fixture.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


@pytest.fixture
def candidate_tree(original_tree):
    (original_tree / "tests").mkdir()
    (original_tree / "tests" / "test_refunds.py").write_text(CANDIDATE_TEST)
    return original_tree


def real(name: str) -> str:
    return decode_text((LOGS / name).read_bytes())


# Derived variants ----------------------------------------------------------

def windows(text: str) -> str:
    """What the same run prints on Windows: backslash paths, CRLF, win32 header."""
    text = text.replace("platform linux", "platform win32")
    text = re.sub(r"rootdir: /tmp/logsrc/(\w+)", r"rootdir: C:\\Users\\ana\\takehome", text)
    text = re.sub(r"^tests/", r"tests\\", text, flags=re.M)  # progress and file:line
    return text.replace("\n", "\r\n")


def windows_backslash_ids(text: str) -> str:
    return windows(text).replace("tests/test_refunds.py::", "tests\\test_refunds.py::")


def utf16_powershell(text: str) -> str:
    """PowerShell 5's ``pytest > red.log`` writes UTF-16LE with a BOM."""
    return decode_text(b"\xff\xfe" + text.replace("\n", "\r\n").encode("utf-16-le"))


def centred(title: str, char: str = "=", width: int = 80) -> str:
    """A separator as pytest's terminal writer centres it (``TerminalWriter.sep``)."""
    fill = char * max((width - len(title) - 2) // 2, 1)
    line = f"{fill} {title} {fill}"
    return line + char if len(line) + 1 <= width else line


def pytest5(text: str) -> str:
    """pytest < 6: no short summary by default, 'in 0.02 seconds' (the closing line centred anew)."""
    text = re.sub(r"=+ short test summary info =+\n(FAILED .*\n)+", "", text)
    text = re.sub(r"^=+ (.+ in \d+\.\d+)s =+$", lambda m: centred(f"{m[1]} seconds"), text, flags=re.M)
    return re.sub(r" in (\d+\.\d+)s$", r" in \1 seconds", text, flags=re.M)


def long_run(text: str) -> str:
    return re.sub(r" in \d+\.\d+s", " in 72.34s (0:01:12)", text)


def from_parent_folder(text: str) -> str:
    return text.replace("FAILED test_invoices.py", "FAILED takehome/test_invoices.py")


def with_trailing_stderr(text: str) -> str:
    return text + "Exception ignored in: <function _after_fork at 0x7f>\n"


def xdist_verbose(_: str) -> str:
    return (
        "============================= test session starts ==============================\n"
        "platform linux -- Python 3.12.1, pytest-8.1.1, pluggy-1.4.0\n"
        "created: 2/2 workers\n2 workers [1 item]\n\n"
        "[gw0] [100%] FAILED test_invoices.py::test_charges_only \n\n"
        "=================================== FAILURES ===================================\n"
        "______________________________ test_charges_only _______________________________\n"
        "[gw0] linux -- Python 3.12.1 /usr/bin/python3\n"
        "E       AssertionError: assert 1700 == 1500\n"
        "=========================== short test summary info ============================\n"
        "FAILED test_invoices.py::test_charges_only - AssertionError: assert 1700 == 1500\n"
        "============================== 1 failed in 0.45s ===============================\n"
    )


def same(text: str) -> str:
    return text


VERSIONS = ("6", "7", "8", "9")
HONEST_ORIGINAL = [
    *((f"pytest{v}_orig_{mode}.log", same) for v in VERSIONS for mode in ("q", "default", "v", "rA", "color")),
    ("pytest9_gate_red.log", same),
    *((f"pytest{v}_orig_q.log", f) for v in ("7", "9") for f in (windows, utf16_powershell, pytest5, long_run,
                                                                 from_parent_folder, with_trailing_stderr)),
    ("pytest8_orig_default.log", pytest5),
    ("pytest9_orig_color.log", windows),
    ("pytest8_orig_default.log", xdist_verbose),
]


@pytest.mark.parametrize("name,variant", HONEST_ORIGINAL,
                         ids=[f"{n}-{f.__name__}" for n, f in HONEST_ORIGINAL])
def test_honest_red_log_of_original_tree_is_genuine(original_tree, name, variant):
    report = analyse_red_log(variant(real(name)), known_test_ids=collect_test_ids(original_tree),
                             original_failures=ORIGINAL_FAILURES)
    assert report.genuine, report.missing
    assert report.present and report.failed
    assert report.failing_ids in (("test_invoices.py::test_charges_only",), ("test_charges_only",),
                                  ("takehome/test_invoices.py::test_charges_only",))
    assert "same failures as the original tree's own run" in report.signals
    assert any(s.startswith("closing line '") for s in report.signals)


HONEST_CANDIDATE = [
    *((f"pytest{v}_cand_{mode}.log", same) for v in VERSIONS for mode in ("q", "default")),
    ("pytest9_cand_rA.log", same),
    ("pytest9_cand_v.log", same),
    ("pytest7_cand_v.log", same),
    ("pytest9_cand_default.log", windows),
    ("pytest8_cand_q.log", windows_backslash_ids),
    ("pytest8_cand_default.log", pytest5),
    ("pytest7_cand_q.log", utf16_powershell),
]


@pytest.mark.parametrize("name,variant", HONEST_CANDIDATE,
                         ids=[f"{n}-{f.__name__}" for n, f in HONEST_CANDIDATE])
def test_candidate_who_wrote_the_failing_test_first_is_genuine(candidate_tree, name, variant):
    report = analyse_red_log(variant(real(name)), known_test_ids=collect_test_ids(candidate_tree),
                             original_failures=ORIGINAL_FAILURES)
    assert report.genuine, report.missing
    assert len(report.failing_ids) == 3
    # Failing differently from the shipped tree is reported, not held against them.
    assert any(m.startswith("same failures as the original") for m in report.missing)


HAIKU = "FAILED test_invoices.py - total was wrong\n"
FORGERIES = [
    ("haiku", HAIKU, True, "closing line 'N failed in X s'"),
    ("haiku with a count", "test_invoices.py F\n\nFAILED test_invoices.py::test_charges_only\n1 failed\n",
     True, "closing line 'N failed in X s'"),
    ("bare -q without names", "F                                  [100%]\n1 failed in 0.01s\n",
     True, "names of the failing tests"),
    ("closing line alone", "============ 1 failed in 0.02s ============\n", True, "FAILURES section"),
    ("real structure, renamed test",
     real("pytest9_orig_q.log").replace("test_charges_only", "test_total_of_invoices"), True,
     "failing test test_invoices.py::test_total_of_invoices is not a test in this tree"),
    *((f"another project, pytest {v} -q", real(f"pytest{v}_other_q.log"), True,
       "failing test test_dates.py::test_parse_date is not a test in this tree") for v in VERSIONS),
    ("another project, pytest 9", real("pytest9_other_default.log"), True,
     "failing test test_dates.py::test_parse_date is not a test in this tree"),
    *((f"green renamed, pytest {v}", real(f"pytest{v}_green_{m}.log"), False,
       "a failure in the closing line (it says '1 passed in") for v in VERSIONS for m in ("q", "default")),
    ("collection error only", real("pytest9_collecterror_q.log"), False, "FAILURES section"),
]


@pytest.mark.parametrize("case,text,failed,expected_missing", FORGERIES, ids=[c[0] for c in FORGERIES])
def test_forged_or_wrong_red_log_is_not_genuine(original_tree, case, text, failed, expected_missing):
    report = analyse_red_log(text, known_test_ids=collect_test_ids(original_tree),
                             original_failures=ORIGINAL_FAILURES)
    assert not report.genuine
    assert report.present
    assert report.failed is failed
    assert any(m.startswith(expected_missing) for m in report.missing), report.missing


@pytest.mark.parametrize("text,missing", [(None, "red.log"), ("", "red.log"), ("  \n\r\n", "any text in red.log")])
def test_missing_or_empty_red_log(text, missing):
    report = analyse_red_log(text, known_test_ids=None, original_failures=None)
    assert (report.present, report.failed, report.genuine) == (False, False, False)
    assert report.to_dict()["missing"] in (["red.log"], ["any text in red.log"])


def test_without_known_ids_structure_alone_decides():
    report = analyse_red_log(real("pytest9_other_q.log"), known_test_ids=None, original_failures=None)
    assert report.genuine
    data = report.to_dict()
    assert data["signals"][3].startswith("closing line '1 failed, 1 passed in ")
    del data["signals"][3]
    assert data == {
        "present": True, "failed": True, "genuine": True,
        "signals": ["progress line with F", "FAILURES section", "short test summary info",
                    "names of the failing tests"],
        "missing": [],
        "failing_ids": ["test_dates.py::test_parse_date"],
        "captured_by": "candidate",
    }


@pytest.mark.parametrize("raw,expected", [
    ("test_invoices.py::test_charges_only", "test_invoices.py::test_charges_only"),
    ("./tests/test_x.py::TestC::test_m[1-2]", "tests/test_x.py::TestC::test_m"),
    ("tests\\test_x.py::test_a[a b]", "tests/test_x.py::test_a"),
    (".\\test_x.py::test_a", "test_x.py::test_a"),
])
def test_normalise_id(raw, expected):
    assert normalise_id(raw) == expected


def test_collect_test_ids_parses_without_running(tmp_path, candidate_tree):
    (candidate_tree / "tests" / "helpers_test.py").write_text(
        "import os\nos.system('touch /tmp/never')\n"
        "class TestWithInit:\n    def __init__(self): pass\n    def test_x(self): pass\n"
        "class TestOuter:\n    class TestInner:\n        def test_deep(self): pass\n"
        "async def test_async(): pass\n")
    (candidate_tree / "tests" / "test_broken.py").write_text("def test_(:\n")
    (candidate_tree / ".venv").mkdir()
    (candidate_tree / ".venv" / "test_site.py").write_text("def test_vendored(): pass\n")
    assert collect_test_ids(candidate_tree) == {
        "test_invoices.py::test_charges_only",
        "tests/test_refunds.py::TestRefunds::test_refund_negative_cents_reduce_total",
        "tests/test_refunds.py::TestRefunds::test_rows",
        "tests/test_refunds.py::test_positive_only",
        "tests/helpers_test.py::TestOuter::TestInner::test_deep",
        "tests/helpers_test.py::test_async",
    }
    assert not Path("/tmp/never").exists()


# Shapes found in review ------------------------------------------------------

# The file the "cand2"/"cand3" logs were captured with: an error and failures
# together, ids with spaces, unicode, brackets and "::", a unittest class and a
# doctest (run with --doctest-modules). cand3 makes tests/ a package.
CANDIDATE2_TEST = '''import sys, unittest
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent.parent))
import invoices
import pytest

FIXTURE = Path(__file__).parent.parent / "sample.csv"


@pytest.fixture
def broken():
    raise RuntimeError("fixture boom")


def test_error_in_fixture(broken):
    pass


@pytest.mark.parametrize("label,expected", [("refund -200 \\u00fcn\\u00efcode", 1300), ("a b [c]", 1300), ("x::y", 1300)])
def test_refund_labels(label, expected):
    assert invoices.total(FIXTURE) == expected


class TestCase(unittest.TestCase):
    def test_refund_unittest(self):
        self.assertEqual(invoices.total(FIXTURE), 1300)


def helper():
    """
    >>> 1 + 1
    3
    """
'''


@pytest.fixture
def candidate2_tree(original_tree):
    (original_tree / "tests").mkdir()
    (original_tree / "tests" / "test_more.py").write_text(CANDIDATE2_TEST)
    return original_tree


def utf16_without_bom(text: str) -> str:
    """UTF-16LE bytes read as UTF-8 (no byte-order mark to say otherwise)."""
    return decode_text(text.replace("\n", "\r\n").encode("utf-16-le"))


REVIEW_HONEST = [
    # `pytest -qq` (or addopts = -q with -q) prints no closing line at all.
    ("pytest9_orig_qq.log", "orig", same),
    ("pytest9_cand2_qq.log", "cand2", same),
    # a doctest among the failures: pytest names it path::module.function
    ("pytest9_cand2_doctest.log", "cand2", same),
    ("pytest9_cand3_doctest_pkg.log", "cand3", same),
    ("pytest9_orig_q.log", "orig", utf16_without_bom),
    # these passed already; kept as real captures of their shapes
    ("pytest9_cand2_v.log", "cand2", same),
    ("pytest7_cand2_xdist_v.log", "cand2", same),
    ("pytest7_orig_xdist.log", "orig", same),
    ("pytest9_orig_tbno.log", "orig", same),
    ("pytest9_orig_x.log", "orig", same),
]


@pytest.mark.parametrize("name,tree,variant", REVIEW_HONEST,
                         ids=[f"{n}-{f.__name__}" for n, _, f in REVIEW_HONEST])
def test_more_honest_shapes_are_genuine(candidate2_tree, name, tree, variant):
    if tree == "cand3":
        (candidate2_tree / "tests" / "__init__.py").write_text("")
    known = collect_test_ids(candidate2_tree) if tree != "orig" else {"test_invoices.py::test_charges_only"}
    report = analyse_red_log(variant(real(name)), known_test_ids=known, original_failures=ORIGINAL_FAILURES)
    assert report.genuine, report.missing
    assert "test_invoices.py::test_charges_only" in report.failing_ids


def test_collect_test_ids_finds_doctests_in_any_module(original_tree):
    (original_tree / "money.py").write_text('"""\n>>> 1\n1\n"""\nclass C:\n    def f(self):\n'
                                            '        """>>> C().f()"""\ndef g():\n    "no example"\n')
    ids = collect_test_ids(original_tree)
    assert {"money.py::money", "money.py::money.C.f"} <= ids
    assert not any("money.g" in i for i in ids)


@pytest.mark.parametrize("raw,expected", [
    ("\x1b]0;ana@box: ~/takehome\x07F   [100%]", "F   [100%]"),  # window title (OSC, BEL)
    ("\x1b]633;C\x1b\\1 failed in 0.1s", "1 failed in 0.1s"),      # shell integration (OSC, ST)
    ("\x1b[2K\x1b[1G\x1b[31mF\x1b[0m", "F"),                         # cursor moves and colour
])
def test_clean_log_drops_terminal_sequences(raw, expected):
    assert clean_log(raw) == expected


GREEN_Q = real("pytest9_green_q.log")
ORIG_Q = real("pytest9_orig_q.log")
CAND_Q = real("pytest9_cand_q.log")
REVIEW_FORGERIES = [
    ("green -q log edited to fail",
     GREEN_Q.replace(".   ", "F   ", 1).replace("1 passed", "1 failed").replace(
         "1 failed", "FAILED test_invoices.py::test_charges_only - assert 1700 == 1500\n1 failed"),
     "FAILED lines under a 'short test summary info' header"),
    ("closing line counts a pass that the progress line lacks",
     ORIG_Q.replace("1 failed in", "1 failed, 1 passed in"), "counts that agree: the progress line"),
    ("progress line shows two failures, closing counts one",
     ORIG_Q.replace("F     ", "FF    ", 1), "counts that agree: the progress line"),
    ("summary names three failures, closing counts one",
     CAND_Q.replace("3 failed, 2 passed", "1 failed").replace("FF.F.", "F", 1),
     "counts that agree: the short test summary names 3"),
    ("summary printed before the FAILURES section",
     "=== short test summary info ===\nFAILED test_invoices.py::test_charges_only\n=== FAILURES ===\n"
     "____ test_charges_only ____\nE  assert 1700 == 1500\n=== 1 failed in 0.01s ===\n",
     "pytest's order: the FAILURES section comes before"),
    ("closing line pasted above the report",
     "test_invoices.py F [100%]\n=== 1 failed in 0.01s ===\n=== FAILURES ===\n____ test_charges_only ____\n"
     "E  assert 1700 == 1500\n=== short test summary info ===\nFAILED test_invoices.py::test_charges_only\n",
     "pytest's order: the closing line comes after"),
]


@pytest.mark.parametrize("case,text,expected_missing", REVIEW_FORGERIES, ids=[c[0] for c in REVIEW_FORGERIES])
def test_impossible_pytest_output_is_not_genuine(candidate_tree, case, text, expected_missing):
    report = analyse_red_log(text, known_test_ids=collect_test_ids(candidate_tree),
                             original_failures=ORIGINAL_FAILURES)
    assert not report.genuine
    assert any(m.startswith(expected_missing) for m in report.missing), report.missing


def test_two_honest_runs_appended_to_one_log(original_tree):
    """`pytest >> red.log` twice: the last run counts; nothing is out of order."""
    text = real("pytest9_orig_default.log") + real("pytest9_orig_q.log")
    report = analyse_red_log(text, known_test_ids=collect_test_ids(original_tree),
                             original_failures=ORIGINAL_FAILURES)
    assert report.genuine, report.missing


def test_captured_output_with_dots_does_not_upset_the_counts(original_tree):
    text = ORIG_Q.replace("test_invoices.py:9: AssertionError",
                          "test_invoices.py:9: AssertionError\n"
                          "----------------------------- Captured stdout call -----------------------------\n"
                          "...\nF\n")
    report = analyse_red_log(text, known_test_ids=collect_test_ids(original_tree),
                             original_failures=ORIGINAL_FAILURES)
    assert report.genuine, report.missing


def test_pytest9_subtests_log_is_genuine(tmp_path):
    """pytest 9's built-in subtests: 'uuuF' progress, '3 failed, 1 subtests passed'."""
    (tmp_path / "test_sub.py").write_text(
        "def test_a(subtests):\n    for i in range(3):\n        with subtests.test(i=i):\n            assert i == 0\n")
    report = analyse_red_log(real("pytest9_subtests_q.log"), known_test_ids=collect_test_ids(tmp_path),
                             original_failures=None)
    assert report.genuine, report.missing
    assert report.failing_ids == ("test_sub.py::test_a",)


# Matched to a reproduction ------------------------------------------------------
#
# The grader compares the red log with its own real runs of the tree. Here the
# real runs are the sandbox's captures in logs/ (see its README); the many-
# versions corpus and the end-to-end case are in test_redlog_corpus.py and
# test_grade_corpus.py.

SANDBOX_ORIGINAL = Reproduction("original", real("sandbox_orig_q.log"), tuple(sample_spec().fixture))
SANDBOX_CANDIDATE = Reproduction("tests_vs_original", real("sandbox_cand_q.log"), sample_spec().production_paths)
VERDICTS = ("separator widths:", "lines a real run prints:", "the assertion's own lines:",
            "summary and traceback:", "line numbers:")


def verdicts(report) -> list[str]:
    return [m for m in report.missing if m.startswith(VERDICTS)]


@pytest.mark.parametrize("name,variant", HONEST_ORIGINAL, ids=[f"{n}-{f.__name__}" for n, f in HONEST_ORIGINAL])
def test_honest_red_log_of_original_tree_matches_the_original_run(original_tree, name, variant):
    report = analyse_red_log(variant(real(name)), known_test_ids=collect_test_ids(original_tree),
                             original_failures=ORIGINAL_FAILURES, reproductions=[SANDBOX_ORIGINAL])
    assert report.genuine, report.missing
    assert not verdicts(report)
    if "FAILURES" in report.signals and variant is not xdist_verbose:
        assert "the failure of test_charges_only matches the original run" in report.signals, report.signals


@pytest.mark.parametrize("name,variant", HONEST_CANDIDATE, ids=[f"{n}-{f.__name__}" for n, f in HONEST_CANDIDATE])
def test_candidate_who_wrote_the_failing_test_first_matches_their_tests_run(candidate_tree, name, variant):
    """The "cand" logs were captured one line higher than the tree now has the tests: notes, not verdicts."""
    report = analyse_red_log(variant(real(name)), known_test_ids=collect_test_ids(candidate_tree),
                             original_failures=ORIGINAL_FAILURES,
                             reproductions=[SANDBOX_ORIGINAL, SANDBOX_CANDIDATE])
    assert report.genuine, report.missing
    assert not verdicts(report)
    if "FAILURES" in report.signals:
        assert ("the failure of test_charges_only matches the original and tests_vs_original run"
                in report.signals), report.signals
        moved = [m for m in report.missing if m.startswith("line numbers of a real run:")]
        assert [m.split("`")[1] for m in moved] == ["tests/test_refunds.py:13", "tests/test_refunds.py:19"], moved
        assert all("line 14" in m or "line 20" in m for m in moved)


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("pytest*.log")))
def test_every_committed_real_log_passes_the_checks_that_need_no_real_run(name):
    """Separators, summary lines and each assertion's own lines hold in every real log."""
    report = analyse_red_log(real(name), known_test_ids=None, original_failures=None, reproductions=[])
    assert not verdicts(report), report.missing


ORIG9 = real("pytest9_orig_default.log")
ORIG9_Q = real("pytest9_orig_q.log")
HAND_TYPED = """F                                                                        [100%]
=================================== FAILURES ===================================
____________ TestRefunds.test_refund_negative_cents_reduce_total ______________

    def test_refund_negative_cents_reduce_total(self):
        warnings.warn("demo warning", UserWarning)
>       assert invoices.total(FIXTURE) == 1300
E       AssertionError: assert 1700 == 1300

tests/test_refunds.py:14: AssertionError
=========================== short test summary info ============================
FAILED tests/test_refunds.py::TestRefunds::test_refund_negative_cents_reduce_total - assert 1700 == 1300
1 failed in 0.03s
"""
HAND_TYPED_SHORT = """============================= test session starts ==============================
collected 1 item

test_invoices.py F                                                       [100%]

=================================== FAILURES ===================================
______________________________ test_charges_only _______________________________
test_invoices.py:9: in test_charges_only
    assert invoices.total(FIXTURE) == 1500
E   AssertionError: assert 1700 == 1500
=========================== short test summary info ============================
FAILED test_invoices.py::test_charges_only - AssertionError: assert 1700 == 1500
============================== 1 failed in 0.02s ===============================
"""
WHERE_1700 = "E        +  where 1700 = "
COUNTERFEITS = [
    # (case, text, what the first finding starts with, the red.log line it names)
    ("hand-typed, no + where lines", HAND_TYPED,
     "lines a real run prints: under the same failing line `> assert invoices.total(FIXTURE) == 1300` "
     "the tests_vs_original run prints `E + where 1700 =", "line 8"),
    ("hand-typed --tb=short, no + where lines", HAND_TYPED_SHORT,
     "lines a real run prints: under the same failing line `> assert invoices.total(FIXTURE) == 1500` "
     "the original run prints `E + where 1700 =", "line 10"),
    ("copied, the computed value changed", ORIG9_Q.replace("assert 1700 == 1500", "assert 1300 == 1500"),
     "the assertion's own lines: for test_charges_only, red.log's line 8 `E + where 1700 =", "line 7"),
    ("copied, the literal changed in the error line",
     ORIG9_Q.replace("E       AssertionError: assert 1700 == 1500", "E       AssertionError: assert 1700 == 1300"),
     "summary and traceback: red.log's line 13 `FAILED test_invoices.py::test_charges_only", "line 7"),
    ("copied, a + where value changed", ORIG9_Q.replace(WHERE_1700, "E        +  where 1300 = "),
     "the assertion's own lines: for test_charges_only, red.log's line 8 `E + where 1300 =", "line 7"),
    ("copied, the line number changed", ORIG9.replace("test_invoices.py:9:", "test_invoices.py:12:"),
     "line numbers: red.log's line 18 `test_invoices.py:12` for `assert invoices.total(FIXTURE) == 1500`",
     "at line 9 in every real run"),
    ("copied, another test's name put in", ORIG9_Q.replace("test_charges_only", "test_refund_negative_cents"),
     "separator widths: red.log's line 3 `______________________________ test_refund_negative_cents",
     "is 89 columns wide where line 2"),
    ("separators typed short", ORIG9_Q.replace("=" * 35 + " FAILURES " + "=" * 35, "=" * 10 + " FAILURES " + "=" * 10),
     "separator widths: red.log's line 3 `____", "where line 2 `========== FAILURES ==========` is 30"),
    ("a header not centred", ORIG9_Q.replace("_" * 30 + " test_charges_only " + "_" * 31,
                                             "_" * 10 + " test_charges_only " + "_" * 51),
     "separator widths: red.log's line 3", "has 10 '_' on the left and 51 on the right"),
    ("every separator 30 wide", re.sub(r"^(=+|_+) (.+?) (=+|_+)$", lambda m: m[1][:6] + f" {m[2]} " + m[3][:6],
                                       ORIG9, flags=re.M),
     "separator widths: red.log's line 1", "narrower than 39"),
]


@pytest.mark.parametrize("case,text,finding,names", COUNTERFEITS, ids=[c[0] for c in COUNTERFEITS])
def test_counterfeit_red_log_is_not_genuine_and_says_which_lines_differ(candidate_tree, case, text, finding, names):
    report = analyse_red_log(text, known_test_ids=collect_test_ids(candidate_tree), original_failures=ORIGINAL_FAILURES,
                             reproductions=[SANDBOX_ORIGINAL, SANDBOX_CANDIDATE])
    assert not report.genuine
    found = [m for m in report.missing if m.startswith(finding)]
    assert found and names in found[0], report.missing


def test_the_gate_check_without_real_runs_is_unchanged(original_tree):
    """`log_refusal` passes no reproductions: the checks that need real runs are not made."""
    uncentred = ORIG9_Q.replace("_" * 30 + " test_charges_only " + "_" * 31,
                                "_" * 10 + " test_charges_only " + "_" * 51)
    at_gate = analyse_red_log(uncentred, known_test_ids=None, original_failures=None)
    assert at_gate.genuine and not verdicts(at_gate)
    graded = analyse_red_log(uncentred, known_test_ids=None, original_failures=None, reproductions=[])
    assert not graded.genuine and verdicts(graded)


def test_a_log_the_real_runs_do_not_reproduce_is_a_note_when_a_person_can_explain_it(candidate_tree):
    """An expectation corrected after the red run: its failing line is in no real run; a note, not a verdict."""
    text = real("pytest9_cand_q.log").replace("== 1300\nE       AssertionError: assert 1700 == 1300",
                                              "== 1200\nE       AssertionError: assert 1700 == 1200")
    report = analyse_red_log(text, known_test_ids=collect_test_ids(candidate_tree), original_failures=None,
                             reproductions=[SANDBOX_ORIGINAL, SANDBOX_CANDIDATE])
    assert report.genuine, report.missing
    note = next(m for m in report.missing if m.startswith("the failing line of TestRefunds.test_refund_negative"))
    assert "`> assert invoices.total(FIXTURE) == 1200` (red.log's line 18)" in note
    assert "`> assert invoices.total(FIXTURE) == 1300` (tests_vs_original)" in note
    assert "fine when the test was edited after the red run" in note


@pytest.mark.parametrize("raw,expected", [
    ("E  +  where 1700 = <function total at 0x7f5974ada020>(PosixPath('/tmp/logsrc/orig/sample.csv'))",
     "E + where 1700 = <function total at 0x…>(Path('sample.csv'))"),
    ("+  where 1700 = <function total at 0x000001F2A3B4C5D0>(WindowsPath('C:/Users/ana/takehome/sample.csv'))",
     "+ where 1700 = <function total at 0x…>(Path('sample.csv'))"),
    ("AssertionError: assert 'C:\\\\Users\\\\ana\\\\x.csv' == '/tree/x.csv'", "assert 'x.csv' == 'x.csv'"),
    ("assert 1 / 2 == 0.5", "assert 1 / 2 == 0.5"),
])
def test_normalise_text_keeps_what_pytest_decides_and_drops_what_the_machine_does(raw, expected):
    assert normalise_text(raw) == expected


@pytest.mark.parametrize("node_id,title", [
    ("test_invoices.py::test_charges_only", "test_charges_only"),
    ("tests/test_refunds.py::TestRefunds::test_rows[-5\\n--5]", "TestRefunds.test_rows[-5\\n--5]"),
    ("tests\\test_more.py::test_refund_labels[x::y-1300]", "test_refund_labels[x::y-1300]"),
])
def test_section_title_is_the_header_pytest_prints(node_id, title):
    assert section_title(node_id) == title


def test_thousands_of_failures_under_one_name_are_compared_in_bounded_work(monkeypatch):
    """A tree made to fail one test name thousands of times must not make grading quadratic: each failure of
    red.log is held against at most MAX_REAL_PER_TEST of the real runs' (counted, not timed)."""
    from grading.engine.checks import reproduction

    compared = []
    real_same = reproduction._same
    monkeypatch.setattr(reproduction, "_same", lambda red, real: compared.append(1) or real_same(red, real))
    section = "{sep}\n>   assert f(x) == {n}\nE   assert 2 == {n}\nt.py:1: AssertionError\n"
    header = "_" * 38 + " t " + "_" * 39
    red = "=" * 35 + " FAILURES " + "=" * 35 + "\n" + section.format(sep=header, n=1) * 3000
    real = "=" * 35 + " FAILURES " + "=" * 35 + "\n" + "".join(section.format(sep=header, n=k) for k in range(3000))
    report = analyse_red_log(red + "3000 failed in 0.1s\n", known_test_ids=None, original_failures=None,
                             reproductions=[("original", real + "3000 failed in 0.1s\n")])
    assert 0 < len(compared) <= 3000 * reproduction.MAX_REAL_PER_TEST
    assert report.signals.count("the failure of t matches the original run") == 1
