"""The grader on submissions to business-days, a packet shaped like a real project.

A src/ package on python-dateutil, tests under tests/ with conftest.py
fixtures, pytest configured in pyproject.toml: every rerun, the hidden tests
across the boundary, the decoys, the red log, canaries and diff must work
for it as they do for refund-sum (test_grade_corpus.py). Real bubblewrap,
a runner that holds the packet's requirements, real pytest.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from grading.engine.core import RUN_NAMES, STAND_IN, GradeOptions, grade_archive, hidden_test_tree, rerun_trees
from takehome.selfcheck import check_packet

from . import corpus

PACKET = corpus.BUSINESS_DAYS
SPEC = PACKET.spec()
TERMS = "src/payterms/terms.py"
HOLIDAYS = "src/payterms/holidays.txt"
ALL_RIGHT = {
    "submitted": ("passed", True),
    "tests_vs_original": ("failed", True),
    "tests_vs_solution": ("passed", True),
    "reference_vs_submitted": ("passed", True),
}


@pytest.fixture
def grade(business_days_sandbox, tmp_path, original_runs):
    def run(files: dict[str, bytes], spec=SPEC) -> dict:
        path = corpus.zip_with_times(tmp_path / "s.zip", files, packet=PACKET)
        return grade_archive(path, spec, business_days_sandbox, options=GradeOptions(cache_dir=original_runs))
    return run


def outcomes(evidence: dict) -> dict[str, tuple[str, bool]]:
    return {name: (run["outcome"], run["as_expected"]) for name, run in evidence["runs"].items() if name in RUN_NAMES}


def decoys_caught(evidence: dict) -> dict[str, bool]:
    return {d["name"]: d["caught"] for d in evidence["runs"]["tests_vs_decoys"]["decoys"]}


def test_the_trees_of_a_package_project_keep_its_paths():
    hidden = hidden_test_tree(SPEC)
    # The packet's own package, data, configuration and fixtures; a stand-in for the production module.
    assert sorted(hidden) == ["pyproject.toml", "src/payterms/__init__.py", "src/payterms/holidays.py",
                              HOLIDAYS, TERMS, "tests/conftest.py", "tests/test_reference_due_dates.py"]
    assert hidden[TERMS] == STAND_IN
    files = corpus.honest_files(PACKET, **{HOLIDAYS: b"2026-12-28\n", "tests/test_more.py": b"def test_x():\n    pass\n"})
    trees = rerun_trees(files, SPEC)
    assert trees["tests_vs_original"][TERMS] == SPEC.fixture[TERMS]
    assert trees["tests_vs_solution"][TERMS] == SPEC.solution[TERMS]
    assert {trees[name][HOLIDAYS] for name in RUN_NAMES[1:]} == {SPEC.fixture[HOLIDAYS]}
    # The candidate's side of the reference run: their code under src/, none of their tests or configuration.
    assert sorted(trees["reference_vs_submitted"]) == ["src/payterms/__init__.py", "src/payterms/holidays.py",
                                                       HOLIDAYS, TERMS]


@pytest.mark.parametrize("tests_package", [False, True], ids=["tests-folder", "tests-package"])
def test_the_ideal_submission_grades_like_refund_sums(grade, tests_package):
    spec, files = SPEC, corpus.honest_files(PACKET)
    if tests_package:  # the same packet with tests/__init__.py: pytest imports tests.test_terms
        spec = replace(SPEC, fixture={**SPEC.fixture, "tests/__init__.py": b""})
        files["tests/__init__.py"] = b""
    evidence = grade(files, spec)
    assert evidence["archive"]["accepted"] is True
    assert evidence["red_log"]["genuine"] is True, evidence["red_log"]
    assert evidence["timeline"]["ok"] is True, evidence["timeline"]["problems"]
    assert outcomes(evidence) == ALL_RIGHT, {n: evidence["runs"][n]["log"][-2000:] for n in RUN_NAMES}
    reference = evidence["runs"]["reference_vs_submitted"]
    assert (reference["passed"], reference["missing_reference_tests"]) == (9, [])
    assert all(t["nodeid"].startswith("tests/test_reference_due_dates.py::") for t in reference["tests"])
    assert set(decoys_caught(evidence).values()) == {True}
    decoys = evidence["runs"]["tests_vs_decoys"]
    assert (decoys["outcome"], decoys["as_expected"], decoys["caught"], decoys["total"]) == ("failed", True, 3, 3)
    for name in ("submitted", "tests_vs_original", "tests_vs_solution"):
        integrity = evidence["runs"][name]["integrity"]
        assert (integrity["canaries_failed"], integrity["tampered"], integrity["unconfirmed"]) == (3, [], []), integrity
        assert all(c.startswith("tests/test_terms.py::") for c in integrity["canaries"])
    assert evidence["diff"]["flags"] == []
    assert [f["path"] for f in evidence["diff"]["files"]] == ["tests/test_terms.py", TERMS]
    assert evidence["refusal"] == {"present": True, "specific": True, "mentions": ["one more day"]}
    assert evidence["original_run"]["failing_ids"] == ["tests/test_terms.py::test_a_monday_invoice_on_net_1_is_due_tuesday"]
    # The same evidence as refund-sum's ideal submission gives, section by section and run by run.
    ideal = json.loads((Path(__file__).parent / "evidence_ideal.json").read_text())
    assert evidence.keys() == ideal.keys()
    for name, run in ideal["runs"].items():
        assert run.keys() <= evidence["runs"][name].keys(), name


@pytest.mark.parametrize("log", ["business-days/pytest7_orig_default.log", "business-days/pytest8_orig_v.log",
                                 "business-days/pytest8_cand_q.log"])
def test_a_red_log_from_an_older_pytest_is_genuine(grade, log):
    evidence = grade(corpus.honest_files(PACKET, **{"artifacts/red.log": corpus.red_log(log)}))
    assert evidence["red_log"]["genuine"] is True, evidence["red_log"]
    assert any(s.startswith("the failure of test_a_monday_invoice_on_net_1_is_due_tuesday matches the original")
               for s in evidence["red_log"]["signals"]), evidence["red_log"]["signals"]


def test_the_packet_checks_itself(business_days_sandbox):
    results = check_packet(SPEC, business_days_sandbox)
    assert [(r.check_id, r.passed) for r in results] == [
        ("fixture_red", True), ("hidden_red_on_fixture", True), ("hidden_green_on_solution", True),
        ("decoys_red", True)], [r.summary for r in results]


def test_a_fix_that_counts_one_more_day_fails_the_hidden_tests(grade):
    # The shipped Monday test alone: it catches the bug, and none of the decoys (each is right on it).
    files = corpus.honest_files(PACKET, **{TERMS: SPEC.decoys["count-one-more"][TERMS],
                                           "tests/test_terms.py": SPEC.fixture["tests/test_terms.py"]})
    evidence = grade(files)
    assert outcomes(evidence) == {**ALL_RIGHT, "reference_vs_submitted": ("failed", False)}
    assert "test_a_weekend_issue_counts_from_monday" in evidence["runs"]["reference_vs_submitted"]["log"]
    assert set(decoys_caught(evidence).values()) == {False}


def test_the_overfit_test_that_keeps_the_bug(grade):
    overfit = SPEC.fixture["tests/test_terms.py"].replace(b'"Net 1", holidays=()) == date(2026, 3, 3)',
                                                           b'"Net 1", holidays=()) == date(2026, 3, 2)')
    assert overfit != SPEC.fixture["tests/test_terms.py"]
    evidence = grade(corpus.honest_files(PACKET, **{TERMS: SPEC.fixture[TERMS], "tests/test_terms.py": overfit}))
    assert outcomes(evidence) == {
        "submitted": ("passed", True),  # green, and wrong
        "tests_vs_original": ("passed", False),  # the test does not catch the bug
        "tests_vs_solution": ("failed", False),  # and fails on correct code
        "reference_vs_submitted": ("failed", False),
    }


def test_a_conftest_that_forces_passes_is_caught(grade):
    cheat = SPEC.fixture["tests/conftest.py"] + b'''

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
'''
    evidence = grade(corpus.honest_files(PACKET, **{TERMS: SPEC.fixture[TERMS], "tests/conftest.py": cheat}))
    assert "conftest_hooks:tests/conftest.py" in evidence["diff"]["flags"]
    assert evidence["runs"]["submitted"]["outcome"] != "passed"
    assert evidence["runs"]["submitted"]["integrity"]["tampered"]
    assert outcomes(evidence)["reference_vs_submitted"] == ("failed", False)


def test_the_packets_closures_are_restored_for_the_hidden_tests(grade):
    # One more closure on 28 December moves the reference's Net 2 from 23 December to the 30th.
    edited = SPEC.fixture[HOLIDAYS] + b"2026-12-28  Staff day\n"
    evidence = grade(corpus.honest_files(PACKET, **{HOLIDAYS: edited}))
    assert f"protected_changed:{HOLIDAYS}" in evidence["diff"]["flags"]
    assert outcomes(evidence)["reference_vs_submitted"] == ("passed", True)
