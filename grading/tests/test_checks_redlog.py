"""Red log check: honest logs of every shape pass, forgeries do not.

The logs under ``logs/`` are real pytest output (see ``logs/README.md``);
Windows, CRLF, UTF-16 and old-pytest variants are derived from them here.
"""

import re
from pathlib import Path

import pytest

from grading.checks.artifacts import decode_text
from grading.checks.redlog import analyse_red_log, collect_test_ids, normalise_id
from grading.spec import sample_spec

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


def pytest5(text: str) -> str:
    """pytest < 6: no short summary by default, 'in 0.02 seconds'."""
    text = re.sub(r"=+ short test summary info =+\n(FAILED .*\n)+", "", text)
    return re.sub(r" in (\d+\.\d+)s", r" in \1 seconds", text)


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
