"""A pytest plugin loaded first into every sandboxed pytest run (``-p takehome_witness``).

For each phase of each test it writes one JSON line to the inherited file
descriptor named by ``TAKEHOME_WITNESS_FD``: what the test really raised, read
before any other hook wrapper can change it, and the outcome of the report
pytest finally logged. At the end it writes pytest's own exit status. The
worker compares these lines with pytest's JUnit report, its text summary and
the process's exit code (grading/integrity.py): a report rewritten by a
conftest or a plugin, or an exit code changed after pytest decided, shows as
a disagreement.

It runs inside the candidate's interpreter, so it is one witness among
several, never proof on its own: code that silences it leaves a run that
cannot be confirmed, which is not a pass either.

PYTEST_DONT_REWRITE: every run imports this module before pytest reads
``-p takehome_witness`` (the sandbox's boot code and a warm sandbox's starter),
so that a file of the same name in the tree cannot replace it; it holds no
assert to rewrite, and without this word pytest would warn that it cannot,
which a run under ``-W error`` would turn into a failure of its own.
"""

import json
import os

import pytest

_fd = None
_raw = {}


def _write(record):
    if _fd is None:
        return
    try:
        os.write(_fd, (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8"))
    except (OSError, ValueError, TypeError):
        pass


def _kind(excinfo):
    if excinfo is None:
        return "passed"
    if excinfo.errisinstance(pytest.skip.Exception):
        return "skipped"
    if excinfo.errisinstance(pytest.xfail.Exception):
        return "xfailed"
    return "failed"


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    global _fd
    value = os.environ.get("TAKEHOME_WITNESS_FD", "")
    _fd = int(value) if value.isdigit() else None
    _write({"start": True})


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    # why here, before yielding: this wrapper is entered before any hook the
    # candidate's conftest can add, so ``call.excinfo`` is still what the test
    # raised. unittest tests park their exception on the item instead.
    excinfo = call.excinfo
    if excinfo is None and getattr(item, "_excinfo", None):
        excinfo = item._excinfo[0]
    _raw[(item.nodeid, call.when)] = (_kind(excinfo), item.get_closest_marker("xfail") is not None)
    return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    raw, xfail_mark = _raw.pop((report.nodeid, report.when), (None, False))
    _write({"id": report.nodeid, "when": report.when, "raw": raw, "final": report.outcome,
            "wasxfail": hasattr(report, "wasxfail"), "xfail_mark": xfail_mark,
            "report": type(report).__name__})


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    result = yield
    _write({"exitstatus": int(session.exitstatus)})
    return result


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    _write({"end": True})
