"""Warm sandboxes (grading/engine/sandbox/__init__.py): pre-started, single-use, as isolated as a cold run.

Real bubblewrap, real cgroups: each test waits until its pool holds started
sandboxes, runs through them, and reads what the kernel and pytest did. A test
proves its run was warm by printing the command line of the process running
pytest, which is our starter only in a warm sandbox.
"""

from __future__ import annotations

import ast
import os
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import HANG_GUARD_S, _wait_for, require
from grading.engine.sandbox import (
    WARM_STARTER,
    Sandbox,
    close_warm_sandboxes,
    pytest_command,
    wait_for_warm,
    warm_eligible,
)
from grading.engine.sandbox import warm as warm_module
from grading.engine.sandbox.processes import KILL_WAIT_S, _uid_processes
from grading.engine.sandbox.warm import _POOLS, _warm_pool
from grading.tests.test_sandbox import FORK_BOMB, make_tree
from grading.tests.test_sandbox_caps import FILE_FLOOD, LIMITS, holders, sample_tree
from shared import pytest_slots

PYTEST = ("python", "-m", "pytest", "-q", "-s")
UID_BASE = pytest_slots.uids("warm_sandbox")
SLOTS = 4
WHO = {"test_zz_who.py": """
    import os
    def test_who():
        cmd = open("/proc/self/cmdline", "rb").read().split(b"\\0")
        print("WHO", os.getuid(), "warm" if b"/opt/takehome/takehome_starter.py" in cmd else "cold", flush=True)
        print("ENV", sorted(k for k in os.environ if not k.startswith("PYTEST_CURRENT")), flush=True)
        print("PATH0", __import__("sys").path[0], __import__("sys").argv[0], flush=True)
"""}


def warm_sandbox(runner_dir, scratch_dir, warm=2, slots=SLOTS, idle_s=120.0, **limits) -> Sandbox:
    return Sandbox(runner_dir, scratch_dir, uid_base=UID_BASE, slots=slots, limits=replace(LIMITS, **limits),
                   warm=warm, warm_idle_s=idle_s)


def ready(sb: Sandbox):
    """The pool of ``sb``, once all its sandboxes have started and imported pytest."""
    assert wait_for_warm(sb, HANG_GUARD_S) == sb.warm, "the pool never filled"
    return _warm_pool(sb)


def who(result) -> tuple[int, str]:
    uid, kind = re.search(r"WHO (\d+) (\w+)", result.log).groups()
    return int(uid), kind


@pytest.fixture
def capped_here(runner_dir, scratch_dir) -> None:
    """This machine caps runs by a cgroup and per-run mounts (else skip; CI=true fails instead)."""
    caps = warm_sandbox(runner_dir, scratch_dir, warm=0).caps_in_force()
    require(caps.mode in ("cgroup1", "cgroup2"), f"no writable cgroup here: {'; '.join(caps.why)}")
    require(caps.tmpfs == "mount", f"cannot mount a tmpfs per run here: {'; '.join(caps.why)}")


def left_over() -> list[int]:
    return [p for u in range(UID_BASE, UID_BASE + SLOTS) for p in _uid_processes(u)]


def described(pid: int) -> str:
    """A process as ps would show it: pid, state, parent, command line (or that it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} state {fields[0]} parent {fields[1]}: {argv[:200]}"


@pytest.fixture(autouse=True)
def ended():
    yield
    close_warm_sandboxes()
    # why a wait: a sandbox killed as the pool closed is gone once the kernel has torn it down, which on a
    # loaded machine can come after close returns; one that is still there after the sandbox's own bound
    # on that (KILL_WAIT_S) was never ended
    try:
        _wait_for(lambda: not left_over(), KILL_WAIT_S, "the sandboxes to be gone", interval=0.05)
    except AssertionError:
        raise AssertionError("a sandbox outlived us: " + "; ".join(described(p) for p in left_over())) from None


def test_only_python_m_pytest_in_the_runner_goes_warm():
    assert warm_eligible(pytest_command(("python", "-m", "pytest", "-q")))
    assert not warm_eligible(pytest_command(("pytest", "-q")))
    assert not warm_eligible(pytest_command(("python3.12", "-m", "pytest")))
    assert not warm_eligible(("true",))
    assert WARM_STARTER[:2] == ("python", "-P")


GLOBALS = """
    import os, sys, json, pytest
    import helper
    def test_state_left_by_an_earlier_run_is_gone():
        seen = [name for name, there in (
            ("module global", helper.COUNT != 0),
            ("stdlib module", hasattr(os, "takehome_mark")),
            ("pytest module", hasattr(pytest, "takehome_mark")),
            ("environment", "TAKEHOME_MARK" in os.environ),
            ("a /tmp file", os.path.exists("/tmp/takehome_mark")),
            ("a module", "takehome_leftover" in sys.modules),
        ) if there]
        print("SEEN", seen, flush=True)
        helper.COUNT += 1
        os.takehome_mark = pytest.takehome_mark = 1
        os.environ["TAKEHOME_MARK"] = "1"
        open("/tmp/takehome_mark", "w").close()
        sys.modules["takehome_leftover"] = json
        assert seen == []
"""


def test_a_global_set_in_one_run_is_absent_in_the_next_and_in_another_submission(runner_dir, scratch_dir,
                                                                                  tmp_path):
    sb = warm_sandbox(runner_dir, scratch_dir, warm=3)
    first = make_tree(tmp_path / "one", {"helper.py": "COUNT = 0\n", "test_globals.py": GLOBALS, **WHO})
    second = make_tree(tmp_path / "two", {"helper.py": "COUNT = 0\n", "test_state.py": GLOBALS, **WHO})
    ready(sb)
    results = [sb.run(first, PYTEST), sb.run(first, PYTEST), sb.run(second, PYTEST)]
    for r in results:
        assert who(r)[1] == "warm", r.log
        assert "SEEN []" in r.log and (r.outcome, r.passed) == ("passed", 2), r.log
    assert len({who(r)[0] for r in results}) == 3  # three sandboxes, each its own uid while it ran


SHADOWS = {
    "conftest.py": """
        import sys
        LOADED = sorted(n for n, m in list(sys.modules.items())
                        if (getattr(m, "__file__", None) or "").startswith("/tree/") and n != "conftest")
        print("LOADED", LOADED, flush=True)
    """,
    "helper.py": "X = 1\n",
    # a module of ours and one pytest imports: neither may be the tree's
    "takehome_witness.py": "print('SHADOW witness', flush=True)\n",
    "takehome_canary.py": "print('SHADOW canary', flush=True)\n",
    "pluggy.py": "print('SHADOW pluggy', flush=True)\n",
    "test_shadow.py": """
        import helper
        def test_shadow():
            assert helper.X == 1
    """,
    **WHO,
}


@pytest.mark.parametrize("kind", ["warm", "cold"])
def test_no_candidate_module_is_loaded_when_a_run_starts(runner_dir, scratch_dir, tmp_path, kind):
    sb = warm_sandbox(runner_dir, scratch_dir, warm=1 if kind == "warm" else 0)
    if kind == "warm":
        ready(sb)
    r = sb.run(make_tree(tmp_path, SHADOWS), PYTEST)
    assert who(r)[1] == kind, r.log
    assert "LOADED []" in r.log, r.log
    assert "SHADOW" not in r.log, r.log
    assert (r.outcome, r.passed) == ("passed", 2), r.log
    assert '"start":true' in r.witness  # our witness ran, not the tree's file of that name


def test_a_warm_run_has_its_slots_uid_and_the_same_limits_as_a_cold_one(runner_dir, scratch_dir, tmp_path):
    tree = sample_tree(tmp_path, solved=True)
    tree = make_tree(tree, WHO)
    cold = warm_sandbox(runner_dir, scratch_dir, warm=0).run(tree, PYTEST)
    sb = warm_sandbox(runner_dir, scratch_dir, warm=1)
    ready(sb)
    warm = sb.run(tree, PYTEST)
    assert who(cold)[1] == "cold" and who(warm)[1] == "warm", (cold.log, warm.log)
    assert UID_BASE <= who(warm)[0] < UID_BASE + SLOTS
    limits = [tuple(map(int, r.log.split("LIMITS ")[1].split()[:2])) for r in (cold, warm)]
    assert limits[0] == limits[1], limits
    for probe in ("ENV", "PATH0"):  # the same environment, sys.path[0] and argv[0] as a cold run
        assert re.search(rf"^{probe} .*$", cold.log, re.M)[0] == re.search(rf"^{probe} .*$", warm.log, re.M)[0]
    assert (warm.outcome, warm.passed) == ("passed", 5), warm.log
    assert "Warning" not in warm.log, warm.log  # nothing the cold run does not print


def test_the_memory_cap_holds_for_a_warm_run(runner_dir, scratch_dir, capped_here, tmp_path):
    sb = warm_sandbox(runner_dir, scratch_dir, warm=1)
    ready(sb)
    r = sb.run(make_tree(tmp_path, {**holders(4, 100), **WHO}), PYTEST)
    codes = [int(c) for c in re.search(r"CODES \[([-\d, ]+)\]", r.log).group(1).split(",")]
    assert codes.count(0) <= 2, r.log
    assert r.outcome == "killed", r
    assert any("256 MiB across all its processes" in n for n in r.notes), r.notes


def test_the_process_cap_holds_for_a_warm_run(runner_dir, scratch_dir, capped_here, tmp_path):
    sb = warm_sandbox(runner_dir, scratch_dir, warm=1)
    ready(sb)
    r = sb.run(make_tree(tmp_path, FORK_BOMB), PYTEST)
    forked = int(r.log.split("FORKED ")[1].split()[0])
    # the same processes count as in a cold run: bubblewrap, its shell and the python running pytest
    assert LIMITS.nproc - 6 <= forked < LIMITS.nproc, r.log
    assert any(n.startswith(f"reached the run's process cap ({LIMITS.nproc} processes)") for n in r.notes), r.notes


def test_the_tmpfs_inode_caps_hold_for_a_warm_run(runner_dir, scratch_dir, capped_here, tmp_path):
    sb = warm_sandbox(runner_dir, scratch_dir, warm=1)
    ready(sb)
    r = sb.run(make_tree(tmp_path, FILE_FLOOD), PYTEST)
    results = ast.literal_eval(r.log.split("FLOOD ", 1)[1].split("\n", 1)[0])
    for folder, (count, error) in results.items():
        assert error == "ENOSPC" and count < LIMITS.tmpfs_inodes, (folder, count, error)
    assert any(n.startswith("/tree ran out of inodes") for n in r.notes), r.notes


def test_a_tree_too_big_for_the_warm_tmpfs_is_exit_125(runner_dir, scratch_dir, tmp_path):
    sb = warm_sandbox(runner_dir, scratch_dir, warm=1, tmpfs_bytes=4 << 20)
    ready(sb)
    r = sb.run({"big.bin": os.urandom(6 << 20), "test_a.py": b"def test_a():\n    pass\n"}, PYTEST)
    assert r.exit_code == 125, r.log
    assert any("unpacking the tree" in n for n in r.notes), r.notes


def test_a_warm_sandbox_that_waited_too_long_is_ended_and_its_uid_freed(runner_dir, scratch_dir, tmp_path):
    sb = warm_sandbox(runner_dir, scratch_dir, warm=1)
    pool = ready(sb)
    first = pool.ready[0]
    assert first.alive() and _uid_processes(first.uid)
    pool.sandbox = replace(sb, warm_idle_s=1.0)  # why only now: it cannot be ended before it was looked at
    _wait_for(lambda: first.released, HANG_GUARD_S, "the idle sandbox to be ended", interval=0.05)
    assert first.proc.returncode is not None
    assert not first.caps.cgroups or not any(c.exists() for c in first.caps.cgroups)
    # its uid is free again: a claim of every uid of the pool but the ones now held succeeds
    # (holding the pool's start lock, so no refill holds a uid that is not yet in pool.ready)
    with pool.starting:
        held = sb._try_slots(SLOTS - len(pool.ready))
    assert held is not None
    for _, fh in held:
        fh.close()


def test_a_warm_sandbox_slower_to_start_than_the_idle_time_is_not_taken_for_idle(runner_dir, scratch_dir,
                                                                                  monkeypatch):
    """On a loaded machine a start may take longer than the idle time: the wait counts from when it is ready."""
    start = Sandbox._start_warm

    def slow_start(self):
        warm = start(self)
        if warm is not None:
            warm.started -= 10.0  # as if starting it had taken 10 s
        return warm

    monkeypatch.setattr(Sandbox, "_start_warm", slow_start)
    sb = warm_sandbox(runner_dir, scratch_dir, warm=1, idle_s=5.0)
    ready(sb)  # not ended as idle while it was starting, and refilled for ever


def test_a_cold_run_takes_a_uid_back_from_idle_warm_sandboxes(runner_dir, scratch_dir, tmp_path):
    sb = warm_sandbox(runner_dir, scratch_dir, warm=2, slots=2)  # idle for 120 s before they end on their own
    pool = ready(sb)
    warmed = list(pool.ready)
    # not pytest: always cold, and every uid is held by a warm sandbox; without one given back, the run
    # gives up after SLOT_WAIT_S, long before an idle one ends
    r = sb.run(tmp_path, ("true",))
    assert r.exit_code == 0, r.log
    assert any(warm.released for warm in warmed)


def test_warm_and_cold_give_the_same_results_for_the_samples_reruns(runner_dir, scratch_dir, tmp_path):
    from grading.engine.core import decoy_trees, plant_canaries, rerun_trees
    from grading.engine.spec import sample_spec

    spec = sample_spec()
    ideal = Path(__file__).resolve().parents[2] / "takehome" / "sample_packets" / "refund-sum" / "solution"
    candidate = {**dict(spec.fixture), **{p.name: p.read_bytes() for p in ideal.iterdir() if p.is_file()}}
    trees = {name: t for name, t in rerun_trees(candidate, spec).items() if name != "reference_vs_submitted"}
    trees.update({f"decoy:{n}": t for n, t in decoy_trees(candidate, spec).items()})
    trees = {name: plant_canaries(t)[0] for name, t in trees.items()}
    cold_sb, warm_sb = warm_sandbox(runner_dir, scratch_dir, warm=0), warm_sandbox(runner_dir, scratch_dir, warm=2)

    def same(r):
        witness = re.sub(r'"(duration|when_s|at)":[\d.e-]+', "", r.witness)
        return (r.outcome, r.exit_code, r.passed, r.failed, r.errors, r.skipped, r.xfailed, r.xpassed,
                r.tests, r.notes, r.decided_by, witness)

    for name, tree in trees.items():
        cold = cold_sb.run(tree, spec.test_command)
        waiting = list(ready(warm_sb).ready)
        warm = warm_sb.run(tree, spec.test_command)
        # why not the pool's size after: on a slow machine it may have refilled while the run ran
        assert any(w.released for w in waiting), "the run did not take a warm sandbox"
        assert same(cold) == same(warm), name
        assert cold.tests, name


def test_the_pool_refills_after_a_run_with_a_new_sandbox(runner_dir, scratch_dir, tmp_path):
    sb = warm_sandbox(runner_dir, scratch_dir, warm=1)
    pool = ready(sb)
    used = pool.ready[0]
    r = sb.run(make_tree(tmp_path, WHO), PYTEST)
    assert who(r) == (used.uid, "warm") and used.released
    pool = ready(sb)  # refilled in the background once no run took one for a moment
    assert pool.ready[0] is not used and pool.ready[0].alive()


def test_the_setting_turns_warm_sandboxes_off(settings, runner_dir, scratch_dir, tmp_path):
    from shared.sandboxes import sandbox_from_settings

    settings.GRADING_RUNNER_DIR, settings.GRADING_SCRATCH_DIR = runner_dir, scratch_dir
    settings.GRADING_UID_BASE, settings.GRADING_SANDBOX_SLOTS = UID_BASE, SLOTS
    settings.GRADING_WARM_SANDBOXES = 0
    off = sandbox_from_settings()
    assert off.warm == 0 and wait_for_warm(off) == 0
    assert who(off.run(make_tree(tmp_path, WHO), PYTEST))[1] == "cold"
    settings.GRADING_WARM_SANDBOXES = 2
    assert sandbox_from_settings().warm == 2


def test_a_worker_process_starts_its_warm_sandboxes_when_it_starts(settings, runner_dir, scratch_dir):
    from grading.tasks import warm_worker_process
    from shared.sandboxes import sandbox_from_settings

    settings.GRADING_RUNNER_DIR, settings.GRADING_SCRATCH_DIR = runner_dir, scratch_dir
    settings.GRADING_UID_BASE, settings.GRADING_SANDBOX_SLOTS = UID_BASE, SLOTS
    settings.GRADING_WARM_SANDBOXES = 2
    sb = sandbox_from_settings()
    assert (os.getpid(), sb) not in warm_module._POOLS
    warm_worker_process()  # Celery's worker_process_init, in each worker process
    pool = warm_module._POOLS[(os.getpid(), sb)]  # started by the signal, not by this test
    deadline = time.monotonic() + 30
    while sum(w.warmed() for w in list(pool.ready)) < 2:
        assert time.monotonic() < deadline, "the worker process's pool never filled"
        time.sleep(0.05)


def test_a_pool_no_run_uses_any_more_stops_refilling(runner_dir, scratch_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(warm_module, "WARM_FORGET_S", 3.0)
    sb = warm_sandbox(runner_dir, scratch_dir, warm=1, idle_s=1.0)
    assert who(sb.run(make_tree(tmp_path, WHO), PYTEST))[1] == "cold"  # its pool is made by this run
    pool = _warm_pool(sb)
    assert not pool.keep
    # refilled once no run took one for a moment, then no more long after its last run
    _wait_for(lambda: pool.ready, HANG_GUARD_S, "the pool to refill", interval=0.05)
    _wait_for(lambda: pool.forgotten() and not pool.ready, HANG_GUARD_S, "the pool to stop refilling", interval=0.05)
    time.sleep(1.5)
    assert pool.ready == []  # no longer refilled: its uid stays free for others


def test_a_pool_a_test_started_is_ended_by_the_suite_when_the_test_ends(runner_dir, scratch_dir):
    """conftest's autouse fixture: no pool outlives the test that started it, to refill beside later tests."""
    from conftest import warm_pools_end_with_it

    with warm_pools_end_with_it():
        pool = ready(warm_sandbox(runner_dir, scratch_dir, warm=1))
        kept = pool.ready[0]
    assert pool.closed and pool not in _POOLS.values()
    assert not kept.alive()
