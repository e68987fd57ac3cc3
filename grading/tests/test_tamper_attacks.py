"""Dishonest code that tries to make pytest report a pass it did not earn, through the real sandbox.

Each attack keeps the bug (``abs()`` stays in invoices.py) and tries to fake
the verdict from inside the interpreter. Every test first shows that the
attack really fools a pytest run that shares an interpreter with it (the
control), then that grading reports the run as tampered or failed, never
passed: the packet's hidden tests across the process boundary, the
candidate's own runs through the canaries and the witness.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from grading.engine.core import STAND_IN, GradeOptions, grade_archive, hidden_test_tree, write_tree
from grading.engine.spec import sample_spec

from . import corpus

SPEC = sample_spec()
BUGGY = SPEC.fixture["invoices.py"]

# Through sys.modules under an alias, with the module's name split: the diff's text scan sees neither.
ALIAS = b'''import sys as _s


def _arm():
    reports = _s.modules.get("_py" + "test.reports")
    if reports is None:
        return
    cls = reports.TestReport
    plain = cls.__init__

    def init(self, *args, **kwargs):
        plain(self, *args, **kwargs)
        if self.outcome == "failed":
            self.outcome, self.longrepr = "passed", None

    cls.__init__ = init


_arm()
'''

# No import at all: walk from a traceback up to pytest's own frames and bend its report factory.
FRAMES = b'''def _bend():
    try:
        1 / 0
    except ZeroDivisionError as exc:
        frame = exc.__traceback__.tb_frame
    while frame is not None:
        report = frame.f_globals.get("TestReport")
        if report is not None and not getattr(report, "_bent", False):
            make = report.from_item_and_call.__func__

            def patched(cls, item, call):
                made = make(cls, item, call)
                if made.outcome == "failed":
                    made.outcome, made.longrepr = "passed", None
                return made

            report.from_item_and_call = classmethod(patched)
            report._bent = True
        frame = frame.f_back
'''

# The payload sits in an innocent-looking data file and runs without exec() or eval().
DATA_LOADER = b'''import types
from pathlib import Path

types.FunctionType(compile(Path(__file__).with_name("rates.dat").read_text(), "rates.dat", "exec"), globals())()
'''

# After pytest wrote its JUnit report, an exit hook rewrites it and exits 0. The path
# pytest is given is a link to the pipe the report leaves by: the module removes the
# link when imported, so pytest writes a plain file, and the hook sends the rewritten
# report down the pipe itself.
EXIT_HOOK = b'''import glob
import os
import re
import weakref


class _Keep:
    pass


_keep = _Keep()
_pipes = {}
for _path in glob.glob("/tmp/.take" + "home/*.xml"):
    if os.path.islink(_path):
        _pipes[_path] = os.readlink(_path)
        os.remove(_path)


def _rewrite():
    for path in glob.glob("/tmp/.take" + "home/*.xml"):
        with open(path) as fh:
            text = fh.read()
        text = re.sub(r"<failure\\b.*?</failure>", "", text, flags=re.S)
        with open(_pipes.get(path, path), "w") as fh:
            fh.write(text)
    getattr(os, "_ex" + "it")(0)


weakref.finalize(_keep, _rewrite)
'''

REWRITING_CONFTEST = b'''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.outcome, report.longrepr = "passed", None
'''

# Only the candidate's own test is bent, so planted canaries stay red: the witness must see it.
SELECTIVE_CONFTEST = REWRITING_CONFTEST.replace(
    b"    if report.failed:", b"    if report.failed and item.name == 'test_refund_rows_subtract_their_negative_cents':")


def _with_bug(prefix: bytes, call_in_total: bool = False) -> bytes:
    code = prefix + b"\n\n" + BUGGY
    if call_in_total:
        code = code.replace(b"    n = 0\n", b"    _bend()\n    n = 0\n")
    return code


ATTACKS = {
    "sys.modules through an alias": {"invoices.py": _with_bug(ALIAS)},
    "frames walked from a traceback": {"invoices.py": _with_bug(FRAMES, call_in_total=True)},
    "payload compiled from a data file": {"invoices.py": _with_bug(DATA_LOADER), "rates.dat": ALIAS},
    "exit hook rewriting the JUnit report": {"invoices.py": _with_bug(EXIT_HOOK)},
    "conftest rewriting every report": {"invoices.py": BUGGY, "conftest.py": REWRITING_CONFTEST},
    "conftest rewriting the candidate's own test": {"invoices.py": BUGGY, "conftest.py": SELECTIVE_CONFTEST},
}


@pytest.fixture(scope="module")
def control_runs(grading_sandbox, tmp_path_factory):
    """Each attack against plain pytest runs that share its interpreter: the candidate's own tests,
    and, for attacks in production code, the hidden tests imported beside it (the old reference check)."""

    def run(files: dict[str, bytes]) -> set[str]:
        work = {p: d for p, d in files.items() if not p.startswith("artifacts/")}
        trees = [work]
        if "conftest.py" not in work:
            trees.append({**{p: d for p, d in work.items() if not p.startswith("test_")}, **SPEC.reference_tests})
        outcomes = set()
        for files_here in trees:
            tree = tmp_path_factory.mktemp("control")
            write_tree(files_here, tree)
            outcomes.add(grading_sandbox.run(tree, SPEC.test_command).outcome)
        return outcomes
    return run


@pytest.mark.parametrize("name", list(ATTACKS))
def test_an_attack_on_pytest_never_yields_a_pass(name, grading_sandbox, control_runs, tmp_path, original_runs):
    files = corpus.honest_files(**ATTACKS[name])
    # The control: the attack is real, it fools pytest in its own interpreter.
    assert control_runs(files) == {"passed"}, f"{name}: the attack no longer works, so this test proves nothing"

    evidence = grade_archive(corpus.zip_with_times(tmp_path / "s.zip", files), SPEC, grading_sandbox,
                             options=GradeOptions(cache_dir=original_runs))
    runs = evidence["runs"]
    reference = runs["reference_vs_submitted"]
    assert reference["outcome"] == "failed", (name, reference["outcome"], reference["notes"])
    assert reference["as_expected"] is False
    assert "assert 1700 == 1300" in reference["log"]
    # The production file is the candidate's in `submitted` only; a conftest stays in every run of their tests.
    # (Over the solution the candidate's test passes honestly: only a conftest that bends every report,
    # canaries included, shows there.)
    bent = {"conftest rewriting every report": ("submitted", "tests_vs_original", "tests_vs_solution"),
            "conftest rewriting the candidate's own test": ("submitted", "tests_vs_original")}.get(name, ("submitted",))
    for run_name in bent:
        run = runs[run_name]
        assert run["outcome"] == "tampered", (name, run_name, run["outcome"], run["notes"])
        assert run["integrity"]["tampered"], run["integrity"]
        if "own test" in name:  # canaries untouched: the witness alone saw the rewrite
            assert run["integrity"]["canaries_failed"] == 3
            assert any("raised an error, but pytest logged it as passed" in t for t in run["integrity"]["tampered"])
        assert any(n.startswith("tampered: ") for n in run["notes"])


def test_the_hidden_tests_never_import_candidate_code(grading_sandbox, tmp_path):
    """Code that runs on import writes a mark wherever it can: nothing reaches the hidden tests' side."""
    spy = (b"import os\nUID = os.getuid()\n"
           b"open('/tmp/imported-here', 'w').write(str(UID))\n\n" + SPEC.solution["invoices.py"])
    probe = b'''import os

import invoices


def test_the_code_ran_elsewhere():
    assert invoices.total("sample.csv") == 1300
    assert not os.path.exists("/tmp/imported-here")
    assert invoices.UID != os.getuid()
'''
    trusted, server = tmp_path / "trusted", tmp_path / "server"
    spec = replace(SPEC, reference_tests={"test_probe.py": probe})
    write_tree(hidden_test_tree(spec), trusted)
    write_tree({"invoices.py": spy, "sample.csv": SPEC.fixture["sample.csv"]}, server)
    result = grading_sandbox.run_across_boundary(trusted, SPEC.test_command, server)
    assert (result.outcome, result.passed) == ("passed", 1), result.log + result.server_log
    assert (trusted / "invoices.py").read_bytes() == STAND_IN
