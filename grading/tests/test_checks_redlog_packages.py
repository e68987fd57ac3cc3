"""Red logs of a project laid out as a package (business-days: src/, tests/, pyproject.toml).

The logs under ``logs/business-days/`` are real: pytest 7.4.4, 8.3.5 and
9.2.0 (``-q``, no option, ``-v``) on the packet's fixture as shipped
(``orig``: its one failing test), on the fixture with the test
``corpus.BUSINESS_DAYS`` adds, written before the fix (``cand``), and after
the fix (``green``); ``sandbox_*`` are the grader's own runs of the first two
trees. A candidate runs whichever pytest they have installed.
"""

from pathlib import Path

import pytest

from grading.engine.checks.artifacts import decode_text
from grading.engine.checks.redlog import analyse_red_log, collect_test_ids
from grading.engine.checks.reproduction import Reproduction
from grading.engine.core import write_tree

from . import corpus

LOGS = Path(__file__).parent / "logs" / "business-days"
SPEC = corpus.BUSINESS_DAYS.spec()
ORIGINAL = "tests/test_terms.py::test_a_monday_invoice_on_net_1_is_due_tuesday"
ADDED = "tests/test_terms.py::test_due_date_counts_business_days_after_the_issue_day"
VERSIONS = ("7", "8", "9")


def real(name: str) -> str:
    return decode_text((LOGS / name).read_bytes())


REAL_RUNS = [Reproduction("original", real("sandbox_orig_q.log"), tuple(SPEC.fixture)),
             Reproduction("tests_vs_original", real("sandbox_cand_q.log"), SPEC.production_paths)]


@pytest.fixture
def candidate_tree(tmp_path):
    write_tree({**SPEC.fixture, corpus.BUSINESS_DAYS.test_path: corpus.BUSINESS_DAYS.honest_test}, tmp_path)
    return tmp_path


def analyse(text: str, tree: Path):
    return analyse_red_log(text, known_test_ids=collect_test_ids(tree), original_failures={ORIGINAL},
                           reproductions=REAL_RUNS)


def test_test_ids_are_found_under_tests(candidate_tree):
    ids = collect_test_ids(candidate_tree)
    assert {ORIGINAL, ADDED} <= ids
    assert "tests/test_terms.py::test_net_zero_is_due_the_day_it_is_issued" in ids


@pytest.mark.parametrize("name", [f"pytest{v}_orig_{mode}.log" for v in VERSIONS for mode in ("q", "default", "v")])
def test_a_red_log_of_the_shipped_tree_from_the_candidates_own_pytest_is_genuine(candidate_tree, name):
    report = analyse(real(name), candidate_tree)
    assert report.genuine, report.missing
    assert report.failing_ids == (ORIGINAL,)
    assert "same failures as the original tree's own run" in report.signals
    assert ("the failure of test_a_monday_invoice_on_net_1_is_due_tuesday matches the original "
            "and tests_vs_original run") in report.signals, report.signals


@pytest.mark.parametrize("name", [f"pytest{v}_cand_{mode}.log" for v in VERSIONS for mode in ("q", "default")])
def test_a_red_log_with_the_candidates_test_written_first_is_genuine(candidate_tree, name):
    report = analyse(real(name), candidate_tree)
    assert report.genuine, report.missing
    assert set(report.failing_ids) == {ORIGINAL, ADDED}
    assert ("the failure of test_due_date_counts_business_days_after_the_issue_day[issued0-Net 1-due0] "
            "matches the tests_vs_original run") in report.signals, report.signals


@pytest.mark.parametrize(("case", "text", "finding"), [
    ("the green run", real("pytest8_green_q.log"), "a failure in the closing line"),
    ("typed by hand", "FAILED tests/test_terms.py::test_due_date_counts_business_days_after_the_issue_day\n"
                      "1 failed in 0.03s\n", "FAILURES section"),
    ("an expected date changed", real("pytest7_cand_q.log").replace("datetime.date(2026, 4, 15) ==",
                                                                    "datetime.date(2026, 4, 14) =="),
     "the assertion's own lines"),
    ("the Monday test renamed", real("pytest8_orig_q.log").replace("on_net_1_is_due_tuesday", "is_due_on_tuesday"),
     "failing test tests/test_terms.py::test_a_monday_invoice_is_due_on_tuesday is not a test in this tree"),
    ("refund-sum's log", decode_text((LOGS.parent / "pytest9_orig_q.log").read_bytes()),
     "failing test test_invoices.py::test_charges_only is not a test in this tree"),
])
def test_a_forged_or_borrowed_red_log_is_not_genuine(candidate_tree, case, text, finding):
    report = analyse(text, candidate_tree)
    assert not report.genuine
    assert any(m.startswith(finding) for m in report.missing), report.missing
