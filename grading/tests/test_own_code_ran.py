"""A candidate's test is believed only when its own code gave the verdict, through the real sandbox.

Each attack sits in the candidate's own test file or conftest, where the
diff's scan used to look away, and targets only the candidate's tests by
name, so the planted canaries still fail as they must. Some make the
candidate's test pass on the buggy code without running it; others make it
fail on every wrong fix (decoy) without running it, so the evidence would say
it rejects them all. Every one first shows that it fools a plain pytest run
(the control); then grading must call each run it touched ``tampered``.
"""

from __future__ import annotations

import hashlib

import pytest

from grading.engine.core import GradeOptions, grade_archive, write_tree
from grading.engine.integrity import judge_run, plant_canaries
from grading.engine.spec import sample_spec

from . import corpus

SPEC = sample_spec()
BUGGY = SPEC.fixture["invoices.py"]
NAME = "test_refund_rows_subtract_their_negative_cents"
PYTEST = ("python", "-m", "pytest", "-q")

RUNTEST = f'''import _pytest.python as _p

_plain = _p.Function.runtest


def _runtest(self):
    if self.name == "{NAME}":
        return None
    return _plain(self)


_p.Function.runtest = _runtest
'''.encode()

CALLINFO = f'''import os

import _pytest.runner as _r

_plain = _r.CallInfo.from_call.__func__


def _from_call(cls, func, when, reraise=None):
    if when == "call" and "{NAME}" in os.environ.get("PYTEST_CURRENT_TEST", ""):
        func = lambda: None  # noqa: E731
    return _plain(cls, func, when, reraise)


_r.CallInfo.from_call = classmethod(_from_call)
'''.encode()

PYFUNC_TRUE = f'''import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if pyfuncitem.name == "{NAME}":
        return True
'''.encode()

SWAP_OBJ = f'''def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "{NAME}":
            item.obj = lambda: None
'''.encode()

SWALLOW = f'''import pytest


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    try:
        return (yield)
    except AssertionError:
        if pyfuncitem.name != "{NAME}":
            raise
        return True
'''.encode()

# Knows the witness watches for the test's code being entered: takes its tracer
# out, and its own check, then skips the test as RUNTEST does.
WITNESS_SILENCED = b'''import sys

import takehome_witness

takehome_witness._check = lambda item=None: []
takehome_witness._settrace = lambda fn: None
''' + RUNTEST

# Calls the tracer itself with a frame of the test's code that never ran.
FAKE_FRAME = f'''import sys

import _pytest.python as _p

_plain = _p.Function.runtest


def _runtest(self):
    if self.name != "{NAME}":
        return _plain(self)
    tracer = sys.gettrace()

    def fake():
        frame = sys._getframe()
        if tracer is not None:
            tracer(frame, "call", None)
    fake.__code__ = fake.__code__.replace(co_name="{NAME}")
    fake()


_p.Function.runtest = _runtest
'''.encode()

CLOSED_PIPE = b'''import os

os.close(int(os.environ["TAKEHOME_WITNESS_FD"]))
''' + RUNTEST

ATTACKS = {
    "Function.runtest replaced in the test module": ({"test_invoices.py": RUNTEST + b"\n\n" + corpus.HONEST_TEST},
                                                     "runtest"),
    "CallInfo.from_call replaced in the test module": ({"test_invoices.py": CALLINFO + b"\n\n" + corpus.HONEST_TEST},
                                                       "from_call"),
    "pyfunc_call hook returning True": ({"conftest.py": PYFUNC_TRUE}, "own code never ran"),
    "the item's function swapped": ({"conftest.py": SWAP_OBJ}, "own code never ran"),
    "a wrapper swallowing the test's error": ({"conftest.py": SWALLOW}, "swallowed"),
    "the witness's own checks replaced": ({"test_invoices.py": WITNESS_SILENCED + b"\n\n" + corpus.HONEST_TEST},
                                          "own code never ran"),
    "the tracer called with a borrowed frame": ({"test_invoices.py": FAKE_FRAME + b"\n\n" + corpus.HONEST_TEST},
                                                "own code never ran"),
    "the witness's pipe closed": ({"test_invoices.py": CLOSED_PIPE + b"\n\n" + corpus.HONEST_TEST},
                                  "the witness saw"),
}


def grade(sandbox, tmp_path, files, original_runs):
    return grade_archive(corpus.zip_with_times(tmp_path / "s.zip", files), SPEC, sandbox,
                         options=GradeOptions(cache_dir=original_runs))


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_test_that_passes_without_running_is_tampered(name, grading_sandbox, tmp_path, original_runs):
    overrides, reason = ATTACKS[name]
    files = corpus.honest_files(**{"invoices.py": BUGGY, **overrides})
    # The control: in a plain pytest run of the tree, the candidate's test passes over the bug.
    control = tmp_path / "control"
    write_tree({p: d for p, d in files.items() if not p.startswith("artifacts/")}, control)
    assert grading_sandbox.run(control, PYTEST).outcome == "passed", f"{name}: the attack no longer works"

    evidence = grade(grading_sandbox, tmp_path, files, original_runs)
    runs = evidence["runs"]
    run = runs["submitted"]
    assert run["outcome"] == "tampered", (name, run["outcome"], run["notes"], run["log"][-2000:])
    assert run["integrity"]["canaries_failed"] == 3, run["integrity"]
    assert any(reason in t for t in run["integrity"]["tampered"]), run["integrity"]["tampered"]
    assert runs["tests_vs_original"]["outcome"] == "tampered"
    # The diff's scan reads test files as it reads production files.
    if "test_invoices.py" in overrides:
        assert "tampering:test_invoices.py" in evidence["diff"]["flags"], evidence["diff"]["flags"]


SOLUTION_DIGEST = hashlib.sha256(SPEC.solution["invoices.py"]).hexdigest()

# On any production code but the candidate's own fix, the test fails without running.
DECOY_RUNTEST = f'''import hashlib
from pathlib import Path

import _pytest.python as _p

_plain = _p.Function.runtest


def _runtest(self):
    code = (Path(__file__).parent / "invoices.py").read_bytes()
    if self.name == "{NAME}" and hashlib.sha256(code).hexdigest() != "{SOLUTION_DIGEST}":
        raise AssertionError("assert 1500 == 1300")
    return _plain(self)


_p.Function.runtest = _runtest
'''.encode()

# The same, with no patch at all: a hook wrapper fails the test after its body passed.
DECOY_WRAPPER = f'''import hashlib
from pathlib import Path

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    result = yield
    code = (Path(__file__).parent / "invoices.py").read_bytes()
    if pyfuncitem.name == "{NAME}" and hashlib.sha256(code).hexdigest() != "{SOLUTION_DIGEST}":
        raise AssertionError("assert 1500 == 1300")
    return result
'''.encode()


@pytest.mark.parametrize("overrides", [
    {"test_invoices.py": DECOY_RUNTEST + b"\n\n" + corpus.HONEST_TEST},
    {"conftest.py": DECOY_WRAPPER},
], ids=["runtest-replaced", "hook-wrapper"])
def test_a_test_that_fails_every_wrong_fix_without_running_is_tampered(overrides, grading_sandbox, tmp_path,
                                                                          original_runs):
    files = corpus.honest_files(**overrides)
    # The control: the honest test rejects only the decoy that drops the refund row; with the attack, a plain
    # pytest run over every decoy fails.
    for decoy, decoy_files in SPEC.decoys.items():
        tree = tmp_path / f"control-{decoy}"
        write_tree({**{p: d for p, d in files.items() if not p.startswith("artifacts/")}, **decoy_files}, tree)
        assert grading_sandbox.run(tree, PYTEST).outcome == "failed", decoy

    evidence = grade(grading_sandbox, tmp_path, files, original_runs)
    decoys = evidence["runs"]["tests_vs_decoys"]
    assert decoys["outcome"] == "tampered", (decoys["notes"], [(d["name"], d["outcome"]) for d in decoys["decoys"]])
    for decoy in decoys["decoys"]:
        # Only the decoy the honest test rejects may stay rejected, when its own code failed there.
        if decoy["outcome"] != "tampered":
            assert (decoy["name"], decoy["outcome"]) == ("drop-refund-rows", "failed"), decoy["notes"]
        else:
            assert not decoy["caught"]
    assert decoys["caught"] <= 1
    assert evidence["runs"]["submitted"]["outcome"] in ("passed", "tampered")


# --- honest plugins and layouts stay clean ------------------------------------------------------------

ASYNC_CONFTEST = b'''import asyncio
import inspect

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(pyfuncitem.obj(**args))
        return True
'''

ASYNC_TESTS = b'''import asyncio


async def test_sleeps():
    await asyncio.sleep(0)
    assert True


async def test_fails_after_await():
    await asyncio.sleep(0)
    assert 1 == 2
'''

# A Function subclass that runs its test through a wrapper, as pytest-asyncio 0.23 does.
SUBCLASS_CONFTEST = b'''import functools
import inspect

import pytest
from _pytest.python import Function


class Wrapped(Function):
    def runtest(self):
        plain = self.obj

        @functools.wraps(plain)
        def wrapper(**kwargs):
            return plain(**kwargs)
        self.obj = wrapper
        try:
            super().runtest()
        finally:
            self.obj = plain


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    if name.startswith("test_wrapped") and inspect.isfunction(obj):
        return [Wrapped.from_parent(collector, name=name, callobj=obj)]
'''

SUBCLASS_TESTS = b'''def test_wrapped_passes():
    assert sum([1, 2]) == 3


def test_wrapped_fails():
    assert sum([1, 2]) == 4
'''

MOCK_TESTS = b'''import json
import unittest
from unittest import mock

import pytest


@mock.patch("json.dumps", return_value="x")
def test_patched(dumps):
    assert json.dumps({}) == "x"


class TestWithSetUp(unittest.TestCase):
    def setUp(self):
        self.value = 2

    def test_value(self):
        self.assertEqual(self.value, 2)


class TestBrokenSetUp(unittest.TestCase):
    def setUp(self):
        raise RuntimeError("setUp broke")

    def test_never_reached(self):
        pass


class TestPlainClass:
    @staticmethod
    def test_static():
        assert True

    def test_method(self):
        assert [1] == [1]


async def test_async_without_a_plugin():
    pass


def test_warns_and_passes():
    with pytest.warns(UserWarning):
        import warnings
        warnings.warn("w", UserWarning)


def test_raises_inside():
    with pytest.raises(ZeroDivisionError):
        1 / 0
'''

TRACING_TEST = b'''import sys


def test_a_tracer_of_its_own():
    seen = []

    def tracer(frame, event, arg):
        seen.append(event)
        return None

    def work():
        return 1

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(old)
    assert "call" in seen
'''


@pytest.mark.parametrize("files, outcome", [
    ({"conftest.py": ASYNC_CONFTEST, "test_async.py": ASYNC_TESTS}, "failed"),
    ({"conftest.py": SUBCLASS_CONFTEST, "test_sub.py": SUBCLASS_TESTS}, "failed"),
    ({"test_mock.py": MOCK_TESTS}, "failed"),
    ({"test_trace.py": TRACING_TEST}, "passed"),
], ids=["async-pyfunc-hook", "function-subclass", "mock-unittest-classes-async", "own-tracer"])
def test_honest_plugins_and_tests_are_not_tampered(grading_sandbox, tmp_path, files, outcome):
    planted_files, planted = plant_canaries(files)
    write_tree(planted_files, tmp_path / "tree")
    result, record = judge_run(grading_sandbox.run(tmp_path / "tree", PYTEST), planted, grading_sandbox.limits)
    assert record["tampered"] == [] and record["unconfirmed"] == [], (record, result.log[-3000:])
    assert result.outcome == outcome, (result.notes, result.log[-3000:])


# --- attacks on trees of their own: unittest tests, a report made up without a run ---------------------

UNITTEST_TESTS = b'''import unittest


class TestRefunds(unittest.TestCase):
    def setUp(self):
        self.total = 1700

    def test_refunds_lower_the_total(self):
        self.assertEqual(self.total, 1300)
'''

# Empties the failure unittest parked on the item, before pytest reads it.
UNITTEST_CLEARED = b'''import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    finally:
        if item.name == "test_refunds_lower_the_total":
            item._excinfo = None
'''

# Logs a passing report for the test and never runs it.
MADE_UP_REPORT = b'''import pytest
from _pytest.reports import TestReport


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if item.name != "test_refunds_lower_the_total":
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for when in ("setup", "call", "teardown"):
        report = TestReport(item.nodeid, item.location, {}, "passed", None, when)
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
'''

FUNCTION_TEST = b'''def test_refunds_lower_the_total():
    assert 1700 == 1300
'''


@pytest.mark.parametrize("files, reason", [
    ({"test_refunds.py": UNITTEST_TESTS, "conftest.py": UNITTEST_CLEARED}, "swallowed"),
    ({"test_refunds.py": FUNCTION_TEST, "conftest.py": MADE_UP_REPORT}, "no run of the test produced"),
], ids=["unittest-failure-cleared", "made-up-report"])
def test_a_unittest_or_made_up_pass_is_tampered(grading_sandbox, tmp_path, files, reason):
    control = tmp_path / "control"
    write_tree(files, control)
    assert grading_sandbox.run(control, PYTEST).outcome == "passed", "the attack no longer works"

    planted_files, planted = plant_canaries(files)
    write_tree(planted_files, tmp_path / "tree")
    result, record = judge_run(grading_sandbox.run(tmp_path / "tree", PYTEST), planted, grading_sandbox.limits)
    assert result.outcome == "tampered", (result.notes, result.log[-3000:])
    assert any(reason in t for t in record["tampered"]), record["tampered"]
