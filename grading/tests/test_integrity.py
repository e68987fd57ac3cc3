"""Canaries and the judge of a run: honest pytest never reads as tampering; disagreements do.

The honest cases go through the real sandbox and the real pytest of the
runner: every feature that legitimately turns what a test raised into
another outcome (xfail, skips, unittest, teardown errors, subtests) must
stay a plain result.
"""

from __future__ import annotations

import ast
import json
import random

import pytest

from grading.engine.core import write_tree
from grading.engine.integrity import Planted, _canary_source, canary_args, judge_run, plant_canaries
from grading.engine.sandbox import RunResult, SandboxLimits, TestCase

PYTEST = ("python", "-m", "pytest", "-q")

HONEST_MIX = '''import unittest

import pytest


def test_plain():
    assert 1 + 1 == 2


@pytest.mark.xfail(reason="known")
def test_known_bug():
    assert 0


@pytest.mark.xfail(raises=KeyError)
def test_known_key_error():
    {}["x"]


@pytest.mark.xfail(strict=False)
def test_xpass_allowed():
    pass


@pytest.mark.skip(reason="later")
def test_skipped():
    assert 0


def test_skip_inside():
    pytest.skip("not here")


def test_imperative_xfail():
    pytest.xfail("not yet")


@pytest.mark.parametrize("n", [1, 2, 3])
def test_params(n):
    assert n > 0


class TestUnittestStyle(unittest.TestCase):
    def test_ok(self):
        self.assertEqual(2, 2)

    @unittest.skip("skipped the unittest way")
    def test_skip(self):
        pass

    @unittest.expectedFailure
    def test_expected_failure(self):
        self.assertEqual(1, 2)


def test_subtests(subtests):
    for i in range(2):
        with subtests.test(i=i):
            assert i < 5


@pytest.fixture
def noisy_teardown():
    yield 1
    print("teardown ran")


def test_with_teardown(noisy_teardown):
    assert noisy_teardown == 1
'''

HONEST_FAILURES = HONEST_MIX + '''

def test_real_failure():
    assert [1, 2] == [1, 3]


@pytest.mark.xfail(strict=True)
def test_strict_xpass():
    pass


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


def test_fixture_error(broken):
    pass


@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown broke")


def test_teardown_error(bad_teardown):
    pass


class TestUnexpected(unittest.TestCase):
    @unittest.expectedFailure
    def test_unexpected_success(self):
        pass


def test_failing_subtest(subtests):
    with subtests.test(i=1):
        assert False
'''


def judged(sandbox, tmp_path, files, command=PYTEST, rng=None, planted=None):
    """The tree run and judged as the grader does; ``planted`` (files, Planted) places the canaries by hand."""
    planted_files, planted = planted or plant_canaries(files, rng)
    folder = tmp_path / f"tree-{len(list(tmp_path.glob('tree-*')))}"
    write_tree(planted_files, folder)
    return judge_run(sandbox.run(folder, (*command, *canary_args(planted))), planted, sandbox.limits)


@pytest.mark.parametrize("files, command, outcome", [
    ({"test_mix.py": HONEST_MIX}, PYTEST, "passed"),
    ({"test_mix.py": HONEST_FAILURES}, PYTEST, "failed"),
    ({"test_mix.py": HONEST_MIX}, ("python", "-m", "pytest", "-v", "-rA"), "passed"),
    ({"test_mix.py": HONEST_MIX}, ("python", "-m", "pytest", "-qq"), "passed"),
    ({"test_mix.py": HONEST_FAILURES, "pytest.ini": "[pytest]\naddopts = -x\n"}, PYTEST, "failed"),
    ({"tests/__init__.py": "", "tests/test_a.py": "def test_a():\n    assert True\n",
      "tests/conftest.py": "import pytest\n\n@pytest.fixture(autouse=True)\ndef env():\n    yield\n\n"
                           "def pytest_configure(config):\n    config.addinivalue_line('markers', 'slow: slow')\n"},
     PYTEST, "passed"),
    ({"test_doc.py": '"""\n>>> 1 + 1\n2\n"""\n\ndef test_a():\n    pass\n'},
     ("python", "-m", "pytest", "-q", "--doctest-modules"), "passed"),
    ({"test_crlf.py": "def test_a():\r\n    assert True\r\n"}, PYTEST, "passed"),
    ({"test_no_newline.py": "def test_a():\n    assert True"}, PYTEST, "passed"),
], ids=["mix", "mix-with-failures", "verbose", "qq-no-closing-line", "addopts-x", "package-conftest",
        "doctest", "crlf", "no-final-newline"])
def test_honest_pytest_is_never_tampered(grading_sandbox, tmp_path, files, command, outcome):
    files = {p: d.encode() for p, d in files.items()}
    result, record = judged(grading_sandbox, tmp_path, files, command)
    assert record["tampered"] == [] and record["unconfirmed"] == [], (record, result.log)
    assert result.outcome == outcome, (result.notes, result.log)
    assert record["canaries_failed"] == len(record["canaries"]) == 3
    assert not any("canary" in t.nodeid or t.nodeid in record["canaries"] for t in result.tests)


def test_addopts_x_does_not_let_a_canary_stop_the_real_tests(grading_sandbox, tmp_path):
    files = {"test_a.py": b"def test_one():\n    pass\n\n\ndef test_two():\n    pass\n",
             "pytest.ini": b"[pytest]\naddopts = -x\n"}
    result, record = judged(grading_sandbox, tmp_path, files)
    assert (result.outcome, result.passed) == ("passed", 2)


def test_a_tree_without_tests_gets_a_canary_file_and_reports_no_tests(grading_sandbox, tmp_path):
    result, record = judged(grading_sandbox, tmp_path, {"calc.py": b"X = 1\n"})
    assert result.outcome == "no_tests"
    assert record["tampered"] == []


def test_a_conftest_removing_the_canaries_cannot_be_a_pass(grading_sandbox, tmp_path):
    # What the candidate's configuration deselects comes back (see below); a hook that takes the
    # canaries out after every other one leaves a run that cannot be confirmed.
    conftest = (b"import pytest\n\n@pytest.hookimpl(wrapper=True, tryfirst=True)\n"
                b"def pytest_collection_modifyitems(items):\n    result = yield\n"
                b"    items[:] = [i for i in items if i.name == 'test_refund_case']\n    return result\n")
    files = {"test_a.py": b"def test_refund_case():\n    pass\n", "conftest.py": conftest}
    result, record = judged(grading_sandbox, tmp_path, files)
    assert result.outcome == "error"
    assert record["unconfirmed"] and "were not run" in record["unconfirmed"][0]


# --- canaries run whatever the candidate's configuration collects (step 12, item 9) ------------

REAL = b"def test_refund_rows_lower_the_total():\n    assert 1 + 1 == 2\n\n\ndef test_network_timeout_retries():\n    pass\n"
LEGACY = b"import a_library_not_installed_here\n\n\ndef test_old_rows():\n    pass\n"
FAST = b"import pytest\n\n\n@pytest.mark.fast\ndef test_refund_rows_lower_the_total():\n    assert True\n"
CHECKS = b"def check_refund_rows_lower_the_total():\n    assert True\n"

# Honest layouts in which pytest would not collect, or would deselect, a canary planted in
# legacy/test_old.py or named with the word "network"; (files, where the canaries go, their name words).
LAYOUTS = {
    "testpaths": ({"tests/test_a.py": REAL, "legacy/test_old.py": LEGACY,
                   "pytest.ini": b"[pytest]\ntestpaths = tests\n"}, "legacy/test_old.py", "rows"),
    "testpaths-pyproject": ({"tests/test_a.py": REAL, "legacy/test_old.py": LEGACY,
                             "pyproject.toml": b"[tool.pytest.ini_options]\ntestpaths = ['tests']\n"},
                            "legacy/test_old.py", "rows"),
    "norecursedirs-setup-cfg": ({"tests/test_a.py": REAL, "legacy/test_old.py": LEGACY,
                                 "setup.cfg": b"[tool:pytest]\nnorecursedirs = legacy\n"}, "legacy/test_old.py", "rows"),
    "addopts-ignore-tox-ini": ({"tests/test_a.py": REAL, "legacy/test_old.py": LEGACY,
                                "tox.ini": b"[pytest]\naddopts = --ignore=legacy\n"}, "legacy/test_old.py", "rows"),
    "collect-ignore": ({"tests/test_a.py": REAL, "legacy/test_old.py": LEGACY,
                        "conftest.py": b"collect_ignore = ['legacy']\n"}, "legacy/test_old.py", "rows"),
    "python-files": ({"checks/check_a.py": CHECKS, "tests/test_a.py": REAL,
                      "pytest.ini": b"[pytest]\npython_files = check_*.py\npython_functions = check_*\n"},
                     "tests/test_a.py", "rows"),
    "python-functions": ({"tests/test_a.py": REAL + b"\n\n" + CHECKS,
                          "pytest.ini": b"[pytest]\npython_functions = check_*\n"}, "tests/test_a.py", "rows"),
    "addopts-k": ({"tests/test_a.py": REAL, "pytest.ini": b'[pytest]\naddopts = -k "not network"\n'},
                  "tests/test_a.py", "network"),
    "addopts-m": ({"tests/test_a.py": FAST, "pytest.ini": b'[pytest]\nmarkers = fast\naddopts = -m fast\n'},
                  "tests/test_a.py", "rows"),
    "conftest-keeps-the-fast-ones": ({"tests/test_a.py": FAST, "conftest.py": (
        b"def pytest_configure(config):\n    config.addinivalue_line('markers', 'fast: quick')\n\n\n"
        b"def pytest_collection_modifyitems(config, items):\n"
        b"    items[:] = [i for i in items if i.get_closest_marker('fast')]\n")}, "tests/test_a.py", "rows"),
    "rootdir": ({"tests/test_a.py": REAL, "pytest.ini": b"[pytest]\naddopts = --rootdir=tests\n"},
                "tests/test_a.py", "rows"),
}


def planted_in(files: dict[str, bytes], path: str, word: str) -> tuple[dict[str, bytes], Planted]:
    """Three canaries put into ``path`` by hand, each named with ``word``: the worst draw plant_canaries can make."""
    rng, out, ids = random.Random(3), dict(files), []
    for n in range(3):
        name = f"test_{word}_value_case{n}"
        out[path] = out.get(path, b"").rstrip() + _canary_source(name, rng).encode() + b"\n"
        ids.append(f"{path}::{name}")
    return out, Planted(tuple(ids), (path,))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_canaries_run_in_every_honest_layout_wherever_they_went(grading_sandbox, tmp_path, layout):
    files, path, word = LAYOUTS[layout]
    verdicts = set()
    for planted in (planted_in(files, path, word), None, None):  # the worst placement, then two random ones
        result, record = judged(grading_sandbox, tmp_path, files, planted=planted)
        assert record["tampered"] == [] and record["unconfirmed"] == [], (layout, record, result.log)
        assert record["canaries_failed"] == 3, (layout, record, result.log)
        verdicts.add((result.outcome, result.passed, result.failed))
    assert len(verdicts) == 1 and verdicts.pop()[0] == "passed", (layout, verdicts)


def test_silencing_the_witness_cannot_be_a_pass(grading_sandbox, tmp_path):
    conftest = (b"import sys\n\ndef pytest_configure(config):\n"
                b"    plugin = config.pluginmanager.get_plugin('takehome_witness')\n"
                b"    config.pluginmanager.unregister(plugin)\n")
    files = {"test_a.py": b"def test_a():\n    pass\n", "conftest.py": conftest}
    result, record = judged(grading_sandbox, tmp_path, files)
    assert result.outcome in ("error", "tampered"), (result.outcome, record)


# --- canaries, pure ------------------------------------------------------------------------


def test_canaries_go_into_the_trees_test_files_and_fail():
    files = {"test_invoices.py": b"import os\n\n\ndef test_refund_rows_lower_the_total():\n    assert True\n",
             "invoices.py": b"X = 1\n"}
    out, planted = plant_canaries(files, random.Random(7))
    assert len(planted.ids) == 3 and planted.paths == ("test_invoices.py",)
    assert out["invoices.py"] == files["invoices.py"]
    module = ast.parse(out["test_invoices.py"])
    names = [n.name for n in module.body if isinstance(n, ast.FunctionDef)]
    assert names[0] == "test_refund_rows_lower_the_total"
    assert {f"test_invoices.py::{n}" for n in names[1:]} == set(planted.ids)
    namespace: dict = {}
    exec(compile(module, "t", "exec"), namespace)  # noqa: S102
    for name in names[1:]:
        with pytest.raises(AssertionError):
            namespace[name]()


def test_canary_names_are_drawn_afresh_and_never_collide():
    files = {"test_a.py": b"def test_alpha_beta():\n    pass\n\n\ndef test_gamma_delta():\n    pass\n"}
    seen = set()
    for seed in range(30):
        _, planted = plant_canaries(files, random.Random(seed))
        assert len(set(planted.ids)) == 3
        assert "test_a.py::test_alpha_beta" not in planted.ids
        seen |= set(planted.ids)
    assert len(seen) > 20


def test_a_test_file_that_does_not_parse_gets_no_canary():
    files = {"test_broken.py": b"def test_a(:\n", "test_ok.py": b"def test_b():\n    pass\n"}
    out, planted = plant_canaries(files, random.Random(1))
    assert out["test_broken.py"] == files["test_broken.py"]
    assert planted.paths == ("test_ok.py",)


# --- the judge, pure -----------------------------------------------------------------------


def call_record(nodeid, outcome, **fields):
    """The witness's line for a test's call that its own code decided."""
    return {"id": nodeid, "when": "call", "raw": outcome, "final": outcome, "report": "TestReport", "seen": True,
            "kind": "function", "entered": True, "ended": "raised" if outcome == "failed" else "returned",
            "cause": "body" if outcome == "failed" else None, "replaced": [], **fields}


def run_result(tests, exit_code=1, log="", witness=None):
    counts = {k: sum(t.outcome == k for t in tests) for k in ("passed", "failed", "skipped", "xfailed", "xpassed")}
    if witness is None:
        witness = [{"start": True}]
        witness += [call_record(t.nodeid, "failed" if t.outcome == "failed" else "passed") for t in tests]
        witness += [{"exitstatus": exit_code}, {"end": True}]
    return RunResult(outcome="failed", exit_code=exit_code, errors=sum(t.outcome == "error" for t in tests),
                     duration_s=0.1, log=log, tests=tuple(tests),
                     witness="\n".join(json.dumps(w) for w in witness), **counts)


CANARY = Planted(("test_a.py::test_canary",), ("test_a.py",))
REAL_PASS = TestCase("test_a.py::test_real", "passed")
CANARY_FAIL = TestCase("test_a.py::test_canary", "failed")


def test_the_judge_passes_an_honest_run_without_its_canaries():
    result, record = judge_run(run_result([REAL_PASS, CANARY_FAIL], log="1 failed, 1 passed in 0.01s\n"),
                               CANARY, SandboxLimits())
    assert (result.outcome, result.passed, result.failed) == ("passed", 1, 0)
    assert record == {"canaries": ["test_a.py::test_canary"], "canaries_failed": 1, "tampered": [], "unconfirmed": []}


@pytest.mark.parametrize("tests, exit_code, log, witness_edit, reason", [
    ([REAL_PASS, TestCase("test_a.py::test_canary", "passed")], 0, "2 passed in 0.01s", None, "canary tests passed"),
    ([REAL_PASS, CANARY_FAIL], 0, "1 failed, 1 passed in 0.01s", None, "exited 0"),
    ([REAL_PASS, CANARY_FAIL], 1, "2 failed in 0.01s", None, "text summary counts 2 failed"),
    ([REAL_PASS, CANARY_FAIL], 1, "1 failed, 1 passed in 0.01s",
     lambda w: [dict(r, raw="failed") if r.get("id") == REAL_PASS.nodeid else r for r in w],
     "raised an error, but pytest logged it as passed"),
    ([REAL_PASS, CANARY_FAIL], 1, "1 failed, 1 passed in 0.01s",
     lambda w: [dict(r, final="failed") if r.get("id") == REAL_PASS.nodeid else r for r in w],
     "the JUnit report says test_a.py::test_real passed, pytest logged it as failed"),
    ([REAL_PASS, CANARY_FAIL], 1, "1 failed, 1 passed in 0.01s",
     lambda w: [dict(r, exitstatus=0) if "exitstatus" in r else r for r in w], "pytest decided exit status 0"),
], ids=["canary-passed", "exit-0", "text-vs-junit", "rewritten-report", "rewritten-junit", "exit-changed"])
def test_each_disagreement_is_tampering(tests, exit_code, log, witness_edit, reason):
    result = run_result(tests, exit_code, log)
    if witness_edit:
        lines = [json.loads(line) for line in result.witness.splitlines()]
        result = run_result(tests, exit_code, log, witness_edit(lines))
    judged_result, record = judge_run(result, CANARY, SandboxLimits())
    assert judged_result.outcome == "tampered"
    assert any(reason in t for t in record["tampered"]), record["tampered"]
    assert judged_result.notes[0].startswith("tampered: ")


def test_a_run_whose_witness_never_finished_is_not_a_pass():
    result = run_result([REAL_PASS, CANARY_FAIL], 1, "1 failed, 1 passed in 0.01s",
                        witness=[{"start": True}, call_record(REAL_PASS.nodeid, "passed"),
                                 call_record(CANARY_FAIL.nodeid, "failed")])
    judged_result, record = judge_run(result, CANARY, SandboxLimits())
    assert judged_result.outcome == "error"
    assert "did not see pytest finish" in record["unconfirmed"][0]


def test_a_run_cut_short_by_a_limit_keeps_its_outcome():
    result = RunResult(outcome="timeout", exit_code=None, passed=0, failed=0, errors=0, skipped=0, xfailed=0,
                       xpassed=0, duration_s=30, log="")
    assert judge_run(result, CANARY, SandboxLimits())[0].outcome == "timeout"


def test_a_packet_run_by_another_test_runner_is_not_judged_as_pytest(grading_sandbox, tmp_path, original_runs):
    from grading.engine.core import GradeOptions, grade_archive
    from grading.engine.spec import PacketSpec

    from .zips import make_zip

    test = b"import unittest\n\nimport calc\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n" \
           b"        self.assertEqual(calc.add(2, 2), 4)\n"
    spec = PacketSpec(slug="adding", version=1, test_command=("python", "-m", "unittest", "-v"),
                      fixture={"calc.py": b"def add(a, b):\n    return a - b\n", "test_calc.py": test},
                      solution={"calc.py": b"def add(a, b):\n    return a + b\n"},
                      reference_tests={"test_hidden.py": test.replace(b"class T", b"class Hidden")})
    archive = make_zip(tmp_path, {"calc.py": spec.solution["calc.py"], "test_calc.py": test})
    evidence = grade_archive(archive, spec, grading_sandbox, options=GradeOptions(cache_dir=original_runs))
    runs = evidence["runs"]
    assert runs["submitted"]["outcome"] == "passed" and "integrity" not in runs["submitted"]
    assert runs["tests_vs_original"]["outcome"] == "failed"
    assert runs["reference_vs_submitted"]["outcome"] == "passed", runs["reference_vs_submitted"]["log"]
