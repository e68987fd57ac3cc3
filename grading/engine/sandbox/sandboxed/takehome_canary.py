"""A pytest plugin loaded into every sandboxed pytest run (``-p takehome_canary``): the grader's canary tests run.

The grader plants canary tests in the candidate's test files
(grading/engine/integrity.py) and names each one to this plugin with
``--takehome-canary PATH::NAME`` (PATH from the tree's root). Whatever the
candidate's configuration says about collection, every named canary runs:

- one deselected (``-k``, ``-m``, ``--deselect``, a conftest's
  ``pytest_collection_modifyitems``) is put back at the end of the run's items;
- one in a file pytest never collected (outside ``testpaths``, not matching
  ``python_files``, under ``norecursedirs``, ``--ignore``, ``collect_ignore``,
  ``python_functions`` that does not match its name) is collected here, from
  its file, alone.

So a canary that is missing from a run's report was removed by something
else, and an honest layout never loses one: the same tree gives the same
verdict whatever the canaries were named or where they went.

``--takehome-quiet-canaries`` (a hosted session's capture, whose log is the
candidate's red or green log): the canaries run, and reach the JUnit report,
the witness and the exit status as any test does, but the terminal shows
nothing of them (no progress letter, no line, no section, not in the counts
or "collected N items"), so the log reads as the candidate's tests alone.

It runs inside the candidate's interpreter, like the witness: it is never a
proof on its own (grading/engine/integrity.py compares what several witnesses say).

PYTEST_DONT_REWRITE: imported before the tree is on sys.path (the sandbox's
boot code and the warm starter), so a file of the same name in the tree
cannot replace it.
"""

import ast
import io
import os

import pytest

_missing = object()


def pytest_addoption(parser):
    group = parser.getgroup("takehome")
    group.addoption(
        "--takehome-canary",
        action="append",
        default=[],
        dest="takehome_canaries",
        help="the grader's canary test PATH::NAME: always run",
    )
    group.addoption(
        "--takehome-quiet-canaries",
        action="store_true",
        dest="takehome_quiet_canaries",
        help="keep the canaries out of the terminal's output",
    )


def _wanted(config):
    wanted = set()
    for value in config.getoption("takehome_canaries", None) or ():
        path, sep, name = value.rpartition("::")
        if sep and path and name:
            wanted.add((path, name))
    return wanted


def _key(item, config):
    """(path from the run's folder, function name) of a module-level test function, else None."""
    path = getattr(item, "path", None)
    if path is None or not isinstance(item, pytest.Function) or not isinstance(item.parent, pytest.Module):
        return None
    rel = os.path.relpath(str(path), str(config.invocation_params.dir)).replace(os.sep, "/")
    return rel, getattr(item, "originalname", item.name)


def is_canary(item):
    return getattr(item, "_takehome_canary", False)


def _collect(session, path, names):
    """The canaries ``names`` of the file at ``path``, which pytest did not collect, made into tests here.

    why from the source, not by importing the module: the file was left out of
    collection, maybe because it cannot be imported here (a test of another
    platform, a library not installed); a canary uses nothing of it.
    """
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=str(path))
        module = pytest.Module.from_parent(session, path=path)
    except Exception:  # noqa: BLE001 - a file that cannot be read or parsed holds no canary that can run
        return []
    items = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            try:
                namespace = {}
                exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
                items.append(pytest.Function.from_parent(module, name=node.name, callobj=namespace[node.name]))
            except Exception:  # noqa: BLE001
                continue
    return items


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    wanted = _wanted(config)
    if not wanted:
        return (yield)
    # why before: what the candidate's configuration and conftests deselect
    # happens inside this wrapper; the canaries collected are noted first.
    before = {}
    for item in items:
        key = _key(item, config)
        if key in wanted:
            before.setdefault(key, item)
    result = yield
    kept = {_key(item, config) for item in items}
    back = [item for key, item in before.items() if key not in kept]
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if back and reporter is not None:
        # why: they run, so they are not "deselected" in the summary line
        ids = {id(item) for item in back}
        deselected = reporter.stats.get("deselected", [])
        reporter.stats["deselected"] = [i for i in deselected if id(i) not in ids]
        if not reporter.stats["deselected"]:
            del reporter.stats["deselected"]
    never = {}
    for path, name in wanted:
        if (path, name) not in before:
            never.setdefault(path, set()).add(name)
    for path, names in sorted(never.items()):
        back += _collect(session, config.invocation_params.dir / path, names)
    items.extend(back)
    canaries = [item for item in items if _key(item, config) in wanted]
    for item in canaries:
        item._takehome_canary = True
    if config.getoption("takehome_quiet_canaries", False) and reporter is not None:
        # "collected N items" counts the candidate's tests alone
        reporter._numcollected -= len([item for item in canaries if _key(item, config) in before])
        session._takehome_canaries = len(canaries)
    return result


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session):
    # why: the progress percentages count the candidate's tests alone (quiet mode)
    hidden = getattr(session, "_takehome_canaries", 0)
    if hidden:
        session.testscollected -= hidden
    return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report, config):
    # no category, letter or word: the terminal counts and shows nothing of it
    if config.getoption("takehome_quiet_canaries", False) and report.nodeid in _quiet_ids:
        return "", "", ""
    return None


_quiet_ids = set()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if not (is_canary(item) and item.config.getoption("takehome_quiet_canaries", False)):
        return (yield)
    _quiet_ids.add(item.nodeid)
    reporter = item.config.pluginmanager.get_plugin("terminalreporter")
    saved = _missing
    if reporter is not None and hasattr(reporter, "_tw"):
        # why: -v prints a test's location before it runs; a writer that goes
        # nowhere keeps that line out, and the place in the output is restored.
        saved = reporter._tw, reporter.currentfspath
        quiet = type(reporter._tw)(file=io.StringIO())
        quiet.fullwidth = reporter._tw.fullwidth
        reporter._tw = quiet
    try:
        return (yield)
    finally:
        if saved is not _missing:
            reporter._tw, reporter.currentfspath = saved
