"""A pytest plugin loaded first into every sandboxed pytest run (``-p takehome_witness``).

For each phase of each test it writes one JSON line to the inherited file
descriptor named by ``TAKEHOME_WITNESS_FD``: what the test really raised, read
before any other hook wrapper can change it, and the outcome of the report
pytest finally logged. At the end it writes pytest's own exit status. The
worker compares these lines with pytest's JUnit report, its text summary and
the process's exit code (grading/engine/integrity.py): a report rewritten by a
conftest or a plugin, or an exit code changed after pytest decided, shows as
a disagreement.

The call phase's line also says whether the test's own code ran, and how it
ended: a test that "passes" without running, or "fails" with a body that
returned, was decided by something else. Before and after each call the
witness compares pytest's runner functions (and pluggy's, unittest's,
doctest's, its own) with the ones it saw when it was imported, before any of
the tree's code: a candidate's file that replaced one is named in the line.
It learns that the test's code was entered from a trace function installed
for the call phase alone and removed at that first entry (so the test runs
untraced), and how that code ended from the frame it kept, afterwards.

It runs inside the candidate's interpreter, so it is one witness among
several, never proof on its own: code that silences it leaves a run that
cannot be confirmed, which is not a pass either.

PYTEST_DONT_REWRITE: every run imports this module before pytest reads
``-p takehome_witness`` (the sandbox's boot code and a warm sandbox's starter),
so that a file of the same name in the tree cannot replace it; it holds no
assert to rewrite, and without this word pytest would warn that it cannot,
which a run under ``-W error`` would turn into a failure of its own.
"""

import dis
import importlib
import json
import os
import sys

import pytest

# why our own references: the tree's code may replace these in their modules.
_os_write = os.write
_dumps = json.dumps
_settrace = sys.settrace
_gettrace = sys.gettrace
_getprofile = sys.getprofile
_getframe = sys._getframe

_fd = None
_raw = {}
_calls = {}  # nodeid -> what the witness saw of its call phase

_RETURNS = frozenset(dis.opmap[n] for n in ("RETURN_VALUE", "RETURN_CONST") if n in dis.opmap)
_YIELDS = frozenset(dis.opmap[n] for n in ("YIELD_VALUE", "SEND") if n in dis.opmap)

# What runs a test and makes its report, as "module" or "module.Class" and the
# attributes that must stay as they were when this module was imported.
_WATCHED = (
    (
        "_pytest.runner",
        (
            "runtestprotocol",
            "call_and_report",
            "check_interactive_exception",
            "show_test_item",
            "pytest_runtest_protocol",
            "pytest_runtest_setup",
            "pytest_runtest_call",
            "pytest_runtest_teardown",
            "pytest_runtest_makereport",
        ),
    ),
    ("_pytest.runner.CallInfo", ("from_call", "__init__")),
    ("_pytest.runner.SetupState", ("setup", "teardown_exact")),
    ("_pytest.python", ("pytest_pyfunc_call", "async_fail")),
    ("_pytest.python.Function", ("runtest", "setup", "_getobj", "__init__")),
    ("_pytest.python.PyobjMixin", ("obj",)),
    ("_pytest.reports.TestReport", ("__init__", "from_item_and_call")),
    ("_pytest.reports.BaseReport", ("passed", "failed", "skipped")),
    ("_pytest.skipping", ("pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_makereport")),
    ("_pytest.unittest", ("pytest_runtest_makereport",)),
    (
        "_pytest.unittest.TestCaseFunction",
        (
            "runtest",
            "setup",
            "_addexcinfo",
            "addError",
            "addFailure",
            "addSkip",
            "addExpectedFailure",
            "addUnexpectedSuccess",
            "addSuccess",
        ),
    ),
    ("_pytest.doctest.DoctestItem", ("runtest", "setup")),
    ("_pytest.main", ("pytest_runtestloop",)),
    ("_pytest.junitxml.LogXML", ("pytest_runtest_logreport", "pytest_sessionfinish")),
    ("_pytest.terminal.TerminalReporter", ("pytest_runtest_logreport",)),
    ("pluggy.HookCaller", ("__call__", "call_extra", "get_hookimpls")),
    ("pluggy.PluginManager", ("_hookexec", "__init__")),
    ("unittest.case.TestCase", ("run", "__call__", "_callTestMethod", "_callSetUp")),
    ("unittest.case._Outcome", ("testPartExecutor",)),
    ("doctest.DocTestRunner", ("run", "_DocTestRunner__run")),
    (
        "takehome_witness",
        (
            "_write",
            "_check",
            "_targets",
            "_watch",
            "_ended",
            "_cause",
            "_kind",
            "_code",
            "_is_target",
            "pytest_plugin_registered",
            "pytest_configure",
            "pytest_runtest_call",
            "pytest_runtest_makereport",
            "pytest_runtest_logreport",
            "pytest_sessionfinish",
            "pytest_unconfigure",
        ),
    ),
)
# Hooks whose implementations at registration time (pytest's own and this
# plugin's) must still be there, unchanged, at every test; the tree may add its own.
_HOOKS = (
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_runtest_teardown",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "pytest_pyfunc_call",
    "pytest_runtestloop",
    "pytest_report_teststatus",
    "pytest_sessionfinish",
)


def _code(obj):
    """The code object that runs when ``obj`` is called (or read, for a property); None if none."""
    for name in ("__func__", "fget"):
        obj = getattr(obj, name, None) or obj
    code = getattr(obj, "__code__", None)
    return code if type(code).__name__ == "code" else None


def _owner(dotted):
    """The module or class named ``dotted`` ("module" or "module.Class"), None when there is none."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        module = sys.modules.get(name)
        if module is None:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
        for attr in parts[cut:]:
            module = getattr(module, attr, None)
        return module
    return None


def _snapshot():
    found = []
    for dotted, names in _WATCHED:
        owner = sys.modules[__name__] if dotted == "takehome_witness" else _owner(dotted)
        if owner is None:
            continue
        space = vars(owner)
        for name in names:
            if name in space:
                found.append((f"{dotted}.{name}", space, name, space[name], _code(space[name])))
    return tuple(found)


def _codes_of(wanted):
    """The ids of every code object of the modules ``wanted(name)`` picks, nested ones too."""
    codes = set()
    todo = []
    for name, module in list(sys.modules.items()):
        if not (module and wanted(name)):
            continue
        for value in list(vars(module).values()):
            if getattr(value, "__module__", None) != name:
                continue
            todo.append(_code(value))
            if isinstance(value, type):
                todo += [_code(v) for v in vars(value).values()]
    while todo:
        code = todo.pop()
        if code is not None and id(code) not in codes:
            codes.add(id(code))
            _keep.append(code)
            todo += [c for c in code.co_consts if type(c).__name__ == "code"]
    return frozenset(codes)


_keep = []  # why: the ids in _OWN stay those of live code objects
# pytest's and pluggy's code; pytest.fail, skip, xfail and exit apart, as anyone can call them.
_OWN = _codes_of(lambda name: name.startswith(("_pytest", "pluggy")) and name != "_pytest.outcomes")
_OUTCOMES = _codes_of(lambda name: name == "_pytest.outcomes")
_MULTICALL = _code(getattr(sys.modules.get("pluggy._callers"), "_multicall", None))
_ORIGINAL = ()  # filled at the end of this module, once every function above exists
_impls = ()  # (hook caller, its executor, ((impl, function, code), ...)) for each of _HOOKS, at registration


def _write(record):
    if _fd is None:
        return
    data = (_dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
    try:
        while data:
            data = data[_os_write(_fd, data) :]
    except (OSError, ValueError, TypeError):
        pass


def _check(item=None):
    """The names of what was replaced since this module was imported (empty when nothing was)."""
    replaced = []
    for label, space, name, value, code in _ORIGINAL:
        now = space.get(name)
        if now is not value or (code is not None and _code(now) is not code):
            replaced.append(label)
    for caller, execute, impls, manager, inner in _impls:
        if manager._inner_hookexec is not inner:
            replaced.append(f"{caller.name} (pluggy's hook runner)")
        now = caller._hookimpls
        if caller._hookexec is not execute:
            replaced.append(f"{caller.name} (its executor)")
        for impl, function, code in impls:
            if not any(i is impl for i in now) or impl.function is not function or function.__code__ is not code:
                replaced.append(f"{caller.name} ({impl.plugin_name})")
    if item is not None and "runtest" in vars(item):
        replaced.append(f"{item.nodeid}: its runtest")
    if _gettrace() is not None or _getprofile() is not None:
        replaced.append("a trace or profile function (sys.settrace, sys.setprofile) is set")
    return replaced[:20]


def _kind(excinfo):
    if excinfo is None:
        return "passed"
    if excinfo.errisinstance(pytest.skip.Exception):
        return "skipped"
    if excinfo.errisinstance(pytest.xfail.Exception):
        return "xfailed"
    return "failed"


def _targets(item):
    """(the code objects of the test's own body, a doctest's file-name prefix, the item's kind)."""
    import _pytest.doctest
    import _pytest.python
    import _pytest.unittest

    parent = getattr(item, "parent", None)
    holder = (
        getattr(parent, "obj", None)
        if isinstance(parent, (_pytest.python.Module, _pytest.python.Class)) and not _never_imported(parent)
        else None
    )
    if isinstance(item, _pytest.unittest.TestCaseFunction):
        import unittest

        cls = getattr(parent, "obj", None)
        codes = [_code(getattr(cls, item.name, None))]
        base = [_code(unittest.TestCase.setUp)]
        if hasattr(unittest, "IsolatedAsyncioTestCase"):
            base.append(_code(unittest.IsolatedAsyncioTestCase.asyncSetUp))
        # A test whose own setUp failed never reached its method, and failed honestly.
        for name in ("setUp", "asyncSetUp"):
            code = _code(getattr(cls, name, None))
            if code is not None and not any(code is b for b in base):
                codes.append(code)
        return tuple(c for c in codes if c is not None), None, "unittest"
    if isinstance(item, _pytest.doctest.DoctestItem):
        dtest = getattr(item, "dtest", None)
        return (), (f"<doctest {dtest.name}[" if dtest is not None else None), "doctest"
    if isinstance(item, _pytest.python.Function):
        # Where the module or class defines it, not the item's ``obj``, which a hook can swap.
        defined = getattr(holder, item.originalname, None) if holder is not None else None
        code = _code(defined) if defined is not None else None
        return ((code,) if code is not None else ((_code(item.obj),) if _code(item.obj) else ())), None, "function"
    defined = getattr(holder, item.name, None) if holder is not None else None
    code = _code(defined) if callable(defined) else _code(getattr(type(item), "runtest", None))
    return ((code,) if code is not None else ()), None, "custom"


def _never_imported(parent):
    """A module node pytest never imported: a canary made from its file's source (takehome_canary).

    why not ``parent.obj`` there: that would import the file, which collection left out, maybe
    because it cannot be imported; its test is then the item's own function, all there is of it.
    """
    import _pytest.python

    return isinstance(parent, _pytest.python.Module) and getattr(parent, "_obj", None) is None


def _is_target(code, codes, prefix):
    return any(code is c for c in codes) or (prefix is not None and code.co_filename.startswith(prefix))


def _watch(codes, prefix, seen):
    """A trace function that keeps the frames of the test's own code until its first code (the
    test itself, where a unittest test's setUp comes first) is entered, then removes itself."""

    def trace(frame, event, arg):
        # why _getframe(1): called by the interpreter, the tracer's caller is the traced
        # frame itself; a direct call with a borrowed frame comes from elsewhere.
        if event == "call" and _is_target(frame.f_code, codes, prefix) and _getframe(1) is frame:
            seen.append(frame)
            if not codes or frame.f_code is codes[0]:
                _settrace(None)
        return None

    return trace


def _ended(frame):
    """How a frame of the test's code ended: 'returned', 'raised', or None (suspended, unknown)."""
    try:
        op = frame.f_code.co_code[frame.f_lasti]
    except (IndexError, TypeError):
        return None
    if op in _RETURNS:
        return "returned"
    return None if op in _YIELDS else "raised"


def _cause(excinfo, codes, prefix):
    """Where the call's exception came from: its test's body, pytest itself, or something else."""
    if excinfo is None:
        return None
    frames = []
    tb = getattr(excinfo, "tb", None) or getattr(excinfo.value, "__traceback__", None)
    while tb is not None and len(frames) < 1000:
        frames.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    if any(_is_target(code, codes, prefix) for code in frames):
        return "body"
    # pytest's own: raised in its code (pytest.fail and the like are skipped, as
    # anyone can call them) and called by its code all the way out to a hook call.
    inner = list(reversed(frames))
    while inner and id(inner[0]) in _OUTCOMES:
        inner.pop(0)
    for depth, code in enumerate(inner):
        if code is _MULTICALL:
            return "pytest" if depth else "other"
        if id(code) not in _OWN:
            return "other"
    return "other"


def pytest_plugin_registered(plugin, manager):
    # At this plugin's own registration: after pytest's own plugins and all of
    # this one's hooks, before any conftest or test module is imported.
    global _impls
    if plugin is not sys.modules[__name__] or _impls:
        return
    found = []
    for name in _HOOKS:
        caller = getattr(manager.hook, name, None)
        if caller is not None:
            found.append(
                (
                    caller,
                    caller._hookexec,
                    tuple((i, i.function, i.function.__code__) for i in caller._hookimpls),
                    manager,
                    manager._inner_hookexec,
                )
            )
    _impls = tuple(found)


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    global _fd
    value = os.environ.get("TAKEHOME_WITNESS_FD", "")
    _fd = int(value) if value.isdigit() else None
    _write({"start": True})


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    replaced = _check(item)
    try:
        codes, prefix, kind = _targets(item)
    except Exception:  # noqa: BLE001 - the tree's code ran in there; say it could not tell
        codes, prefix, kind = (), None, "unknown"
    seen = []
    trace = _watch(codes, prefix, seen)
    _settrace(trace)
    try:
        return (yield)
    finally:
        if _gettrace() is trace:  # not entered, or put back by code that saved it (doctest does)
            _settrace(None)
        replaced += [r for r in _check(item) if r not in replaced]
        _calls[item.nodeid] = {
            "seen": True,
            "kind": kind,
            "codes": codes,
            "prefix": prefix,
            "entered": bool(seen) if (codes or prefix) else None,
            "ended": next((_ended(f) for f in seen if codes and f.f_code is codes[0]), None)
            if kind in ("function", "unittest")
            else None,
            "replaced": replaced,
        }
        seen.clear()  # why: the frame holds the test's locals


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    # why here, before yielding: this wrapper is entered before any hook the
    # candidate's conftest can add, so ``call.excinfo`` is still what the test
    # raised. unittest tests park their exception on the item instead.
    excinfo = call.excinfo
    if excinfo is None and getattr(item, "_excinfo", None):
        excinfo = item._excinfo[0]
    _raw[(item.nodeid, call.when)] = (_kind(excinfo), item.get_closest_marker("xfail") is not None)
    if call.when == "call" and item.nodeid in _calls:
        seen = _calls[item.nodeid]
        try:
            seen["cause"] = _cause(excinfo, seen["codes"], seen["prefix"])
        except Exception:  # noqa: BLE001
            seen["cause"] = "other"
    return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    raw, xfail_mark = _raw.pop((report.nodeid, report.when), (None, False))
    record = {
        "id": report.nodeid,
        "when": report.when,
        "raw": raw,
        "final": report.outcome,
        "wasxfail": hasattr(report, "wasxfail"),
        "xfail_mark": xfail_mark,
        "report": type(report).__name__,
    }
    if report.when == "call" and "Subtest" not in record["report"]:
        seen = _calls.pop(report.nodeid, None) or {"seen": False}
        record.update({k: seen.get(k) for k in ("seen", "kind", "entered", "ended", "cause")})
        record["replaced"] = seen.get("replaced", [])
    _write(record)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    result = yield
    replaced = _check()
    if replaced:
        _write({"replaced": replaced})
    _write({"exitstatus": int(session.exitstatus)})
    return result


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    _write({"end": True})


_ORIGINAL = _snapshot()
