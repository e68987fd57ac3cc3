"""Benchmark: grading the sample packet against the same pytest runs done bare.

Run with ``.venv/bin/python bench/grading.py`` (or ``make bench``). Needs
bubblewrap and root (as the worker does), no Django settings: it calls the
pure grading core directly.

What is measured, in one process, alternately over several rounds:

- grading: ``grade_archive`` on the sample packet's ideal submission, called
  in-process as the worker calls it (a ``Sandbox``, the default worker count,
  unpack under the scratch folder), with the original-run cache warm, as in
  production after a packet version's first submission. So each round runs
  the four reruns (submitted, tests_vs_original, tests_vs_solution,
  reference_vs_submitted, the last as two sandboxes across the process
  boundary) and one rerun per decoy, not the original tree's own run.
- bare: the same pytest runs on the same trees (built by ``rerun_trees`` and
  ``decoy_trees``, written once before the rounds; the hidden tests beside
  the candidate's code in one tree, as a grader without the boundary would
  run them; no canaries), outside any sandbox:
  ``<runner>/bin/python -m pytest -q`` plus the arguments the sandbox adds
  (JUnit XML, no cache provider, basetemp, -rfEX; paths made per run), the
  same small environment, each run in a new session as the sandbox starts
  them, and a ThreadPoolExecutor with the same worker count.
- the sandbox's cost per run: a sandboxed ``true`` (empty tree) against a bare
  ``true``, and a sandboxed pytest against a bare pytest on one tree (the
  submitted tree), one run at a time, once the warm sandboxes are back (their
  refilling after a grading is not a run's cost); beside them bubblewrap
  alone with the same namespaces (``BWRAP_FLOOR``), so the figure shows how
  much of the cost is bubblewrap's and the kernel's and how much is ours.
- CPU time: user and system time of this process and its children, per
  grading and per bare round (a warm sandbox's start-up is counted in the
  grading that used it: a child's time is added when it ends).
- warm sandboxes (``--warm``, default $TAKEHOME_WARM_SANDBOXES or 6): before
  each timed grading and sandboxed pytest run it waits until they have
  imported pytest, as a worker has them ready (it refills them while idle).
- the tree-size sweep: grading and bare again, alternating, over the ideal
  submission plus N small files (``--sizes``, default 100, 1,000 and 1,980,
  in folders of 100; ``--size-rounds`` rounds each), one row per size with
  the ratio of grading to the same runs done bare over the same trees.

With ``--packets``, it compares the two sample packets instead: a run of
``business-days`` (a src/ package on python-dateutil, tests/ with conftest
fixtures, in its own runner environment) against a run of ``refund-sum``
(pytest alone, in the shared runner): the grading of each one's ideal
submission, one sandboxed pytest run of each one's submitted tree, and the
same tree (refund-sum's) run in each environment, which shows what the
larger environment alone costs. Its last line is ``ratio: X.XX``, that
same-tree ratio (the larger environment over the shared runner).

The order of grading and bare alternates from round to round (ABBA), so
a drift of the machine's speed does not favour either side. Nothing here
asserts on a time. The last line is ``ratio: X.XX``: grading over bare for
the sample's ideal submission, the median of the per-round ratios. Targets
(step 11): that ratio at most 0.8, at most 1.5 with 1,980 extra files, the
sandbox adding under 10 ms per run.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# why: run as a script, this folder comes first on sys.path, and this file's
# own name would shadow the grading package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

from grading.engine.archive import safe_extract  # noqa: E402
from grading.engine.core import (  # noqa: E402
    EXPECTED,
    RUN_NAMES,
    STAND_IN,
    GradeOptions,
    decoy_trees,
    grade_archive,
    hidden_test_tree,
    rerun_trees,
    write_tree,
)
from grading.engine.runner import RunnerUnavailable, ensure_runner, runner_python, sandbox_home  # noqa: E402
from grading.engine.sandbox import (  # noqa: E402
    BWRAP,
    JUNIT_IN_SANDBOX,
    SANDBOXED_DIR,
    Sandbox,
    SandboxUnavailable,
    pytest_command,
    wait_for_warm,
)
from grading.engine.spec import read_tree, sample_spec  # noqa: E402
from grading.tests.corpus import honest_files, zip_with_times  # noqa: E402

RATIO_TARGET = 0.8
OVERHEAD_TARGET_MS = 10.0
LARGEST_TARGET = 1.5  # grading over bare with 1,980 extra files
MAX_EXTRA = 1980  # with the ideal submission's files, just under the archive's 2,000 entries
PER_FOLDER = 100
# bubblewrap's own cost here: the sandbox's namespaces and pid 1, only the binds `true` needs; no
# setpriv, cgroup, limits, tmpfs mounts or gate. What the sandboxed `true` costs beyond it is ours.
BWRAP_FLOOR = (BWRAP, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
               "--as-pid-1", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
               "--symlink", "usr/lib64", "/lib64", "/usr/bin/true")


def extra_files(count: int) -> dict[str, bytes]:
    """``count`` small text files in folders of 100 (extra/00/f0000.txt...), as a real upload's data or docs."""
    return {f"extra/{i // PER_FOLDER:02d}/f{i:04d}.txt": b"line %d\n" % i for i in range(count)}


def default_dir(env_name: str, leaf: str) -> Path:
    """As takehome.settings: the named variable, else <sandbox home of TAKEHOME_VAR_DIR or var/>/<leaf>."""
    if os.environ.get(env_name):
        return Path(os.environ[env_name])
    return sandbox_home(Path(os.environ.get("TAKEHOME_VAR_DIR") or ROOT / "var")) / leaf


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds (default 7)")
    parser.add_argument("--true-runs", type=int, default=5,
                        help="sandboxed and bare `true` runs per round (default 5)")
    parser.add_argument("--pytest-runs", type=int, default=3,
                        help="sandboxed and bare single-tree pytest runs per round (default 3)")
    parser.add_argument("--sizes", default="100,1000,1980",
                        help="extra small files added to the ideal submission for the tree-size sweep, "
                             "comma-separated (default 100,1000,1980; the sample itself is the 0 row; "
                             "'' for no sweep)")
    parser.add_argument("--size-rounds", type=int, default=3,
                        help="rounds per size in the sweep, grading and bare alternating (default 3)")
    parser.add_argument("--runner", type=Path, default=default_dir("TAKEHOME_RUNNER_DIR", "runner"),
                        help="runner virtualenv (default $TAKEHOME_RUNNER_DIR or var/runner; built if missing)")
    parser.add_argument("--runners", type=Path, default=default_dir("TAKEHOME_RUNNERS_DIR", "runners"),
                        help="packets' environments, for --packets (default $TAKEHOME_RUNNERS_DIR or var/runners)")
    parser.add_argument("--packets", action="store_true",
                        help="compare a run of business-days with a run of refund-sum instead")
    parser.add_argument("--scratch", type=Path, default=default_dir("TAKEHOME_SCRATCH_DIR", "scratch"),
                        help="scratch folder (default $TAKEHOME_SCRATCH_DIR or var/scratch)")
    parser.add_argument("--uid-base", type=int, default=int(os.environ.get("TAKEHOME_SANDBOX_UID_BASE", 62000)),
                        help="first uid of the sandbox pool (default $TAKEHOME_SANDBOX_UID_BASE or 62000)")
    parser.add_argument("--slots", type=int, default=int(os.environ.get("TAKEHOME_SANDBOX_SLOTS", 16)),
                        help="uids in the pool (default $TAKEHOME_SANDBOX_SLOTS or 16)")
    parser.add_argument("--warm", type=int, default=int(os.environ.get("TAKEHOME_WARM_SANDBOXES", 6)),
                        help="warm sandboxes kept ready, as a worker process keeps them "
                             "(default $TAKEHOME_WARM_SANDBOXES or 6; 0: every run cold)")
    args = parser.parse_args(argv)
    if min(args.rounds, args.true_runs, args.pytest_runs, args.size_rounds) < 1:
        parser.error("--rounds, --true-runs, --pytest-runs and --size-rounds must be at least 1")
    try:
        args.sizes = [int(n) for n in args.sizes.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--sizes takes whole numbers separated by commas, not {args.sizes!r}")
    if any(not 0 < n <= MAX_EXTRA for n in args.sizes):
        parser.error(f"--sizes: each size is between 1 and {MAX_EXTRA} (the archive holds at most 2,000 entries)")
    return args


# --- bare runs ------------------------------------------------------------------------------


class Bare:
    """The sandbox's pytest command, run directly on the host in the same environment."""

    def __init__(self, runner: Path, command: tuple[str, ...], work: Path):
        self.runner = runner
        self.command = pytest_command(command)
        self.work = work
        self.numbers = itertools.count(1)  # next() is atomic: safe across the pool's threads
        self.env = {
            # what the sandbox sets (--setenv), and nothing else
            "PATH": f"{runner}/bin:/usr/bin:/bin",
            "HOME": str(work),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": str(SANDBOXED_DIR),  # the witness plugin the sandbox's command loads
        }

    def argv(self, out: Path) -> list[str]:
        """The sandbox's argv with the runner's python and per-run paths for the report and basetemp."""
        argv = []
        for arg in self.command:
            if arg == "python":
                arg = str(runner_python(self.runner))
            elif arg == f"--junitxml={JUNIT_IN_SANDBOX}":
                arg = f"--junitxml={out / 'junit.xml'}"
            elif arg == "--basetemp=/tmp/pytest":
                arg = f"--basetemp={out / 'pytest'}"
            argv.append(arg)
        return argv

    def run(self, tree: Path, argv: list[str] | None = None) -> int:
        """Run ``argv`` (default: the sandbox's pytest command) in ``tree``; return the exit code."""
        if argv is not None:
            return self._spawn(tree, argv).returncode
        out = self.work / f"out-{next(self.numbers)}"
        out.mkdir()
        try:
            done = self._spawn(tree, self.argv(out))
            if not (out / "junit.xml").exists():
                raise SystemExit(f"bench: bare pytest in {tree} wrote no JUnit report:\n{done.stdout.decode()[-2000:]}")
            return done.returncode
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def _spawn(self, tree: Path, argv: list[str]) -> subprocess.CompletedProcess:
        # why a new session, as Sandbox.run starts each run: with the kernel's
        # autogroup scheduling (on by default) every session is a scheduling
        # group of its own, so on a busy machine runs sharing one session would
        # get less CPU than the sandboxed runs, each in its own.
        return subprocess.run(argv, cwd=tree, env=self.env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


# --- measuring ------------------------------------------------------------------------------


def cpu_s() -> float:
    """User and system CPU time so far of this process and of its children that ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(fn, *args, cpu: list[float] | None = None):
    used = cpu_s()
    start = time.perf_counter()
    value = fn(*args)
    elapsed = time.perf_counter() - start
    if cpu is not None:
        cpu.append(cpu_s() - used)
    return elapsed, value


def check_evidence(evidence: dict) -> None:
    """The bench is only meaningful on evidence that came out right."""
    wrong = {name: run["outcome"] for name, run in evidence["runs"].items() if not run["as_expected"]}
    if not evidence["archive"]["accepted"] or wrong or not evidence["red_log"]["genuine"]:
        raise SystemExit(f"bench: the ideal submission was not graded as ideal: runs {wrong}, "
                         f"archive {evidence['archive']['reason']}, red log {evidence['red_log']['missing']}")


def row(label: str, seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return f"{label:<44} {statistics.median(ms):>9.1f} {min(ms):>9.1f} {max(ms):>9.1f} {len(ms):>4}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        runner = ensure_runner(args.runner)
    except RunnerUnavailable as exc:
        print(f"bench: no runner virtualenv: {exc}", file=sys.stderr)
        return 2
    scratch = args.scratch.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    sandbox = Sandbox(runner_dir=runner, scratch_dir=scratch, uid_base=args.uid_base, slots=args.slots,
                      warm=args.warm)
    try:
        sandbox.check()
    except SandboxUnavailable as exc:
        print(f"bench: the sandbox cannot run here: {exc}", file=sys.stderr)
        return 2

    if args.packets:
        return compare_packets(args, sandbox, scratch)
    spec = sample_spec()
    # why the system's temp folder: a tree under the repository would make bare
    # pytest find the project's own pytest.ini above it; in the sandbox the
    # tree sits at /tree with nothing above.
    work = Path(tempfile.mkdtemp(prefix="takehome-bench-"))
    try:
        cache_dir = work / "original-runs"
        options = GradeOptions(cache_dir=cache_dir)
        # The worker's default: one thread per rerun, at most one per core.
        workers = max(1, min(len(RUN_NAMES), os.cpu_count() or 1))
        archive, tree_dirs = prepare(work / "size-0", spec, {})
        bare_runs = tuple(tree_dirs)
        empty = work / "empty"
        empty.mkdir()
        bare_tmp = work / "bare-tmp"
        bare_tmp.mkdir()
        bare = Bare(runner, spec.test_command, bare_tmp)

        def grade(zipped: Path = archive) -> dict:
            return grade_archive(zipped, spec, sandbox, options=options, scratch=scratch)

        short = []  # timed runs that began with fewer warm sandboxes ready than asked for

        def ready() -> None:
            # why before the clock starts: a worker refills its warm sandboxes while
            # idle, so a submission finds them ready; their start-up CPU is counted
            # all the same, in the grading that uses them (a child's CPU time is
            # added when it ends).
            if args.warm and (got := wait_for_warm(sandbox, timeout_s=10)) < args.warm:
                short.append(got)  # why not an error: another process may hold the pool's uids

        def bare_all(dirs: dict[str, Path] = tree_dirs) -> dict[str, int]:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                futures = {name: pool.submit(bare.run, dirs[name]) for name in bare_runs}
                return {name: f.result() for name, f in futures.items()}

        load_before = os.getloadavg()[0]
        # Warm-up, not measured: fills the original-run cache (as the first
        # submission of a packet version does), the page cache and the uid pool.
        first = grade()
        check_evidence(first)
        if cache_dir.is_dir() and not any(cache_dir.iterdir()):
            raise SystemExit("bench: the original-run cache stayed empty after the warm-up")
        codes = bare_all()
        expected_codes = {name: 0 if EXPECTED[name] == "passed" else 1 for name in RUN_NAMES}
        expected_codes.update({f"decoy:{d['name']}": 1 if d["caught"] else 0
                               for d in first["runs"]["tests_vs_decoys"]["decoys"]})
        if codes != expected_codes:
            raise SystemExit(f"bench: bare pytest exit codes {codes}, expected {expected_codes}")

        grading_s, bare_s, ratios, grading_cpu, bare_cpu = [], [], [], [], []
        sb_true, bare_true, floor_true, sb_pytest, bare_pytest = [], [], [], [], []
        one = tree_dirs["submitted"]
        for r in range(args.rounds):
            order = ("grade", "bare") if r % 2 == 0 else ("bare", "grade")
            got = {}
            for which in order:
                if which == "grade":
                    ready()
                    got["grade"], evidence = timed(grade, cpu=grading_cpu)
                    check_evidence(evidence)
                else:
                    got["bare"], _ = timed(bare_all, cpu=bare_cpu)
            grading_s.append(got["grade"])
            bare_s.append(got["bare"])
            ratios.append(got["grade"] / got["bare"])
            # why ready() first: right after a grading the pool refills its warm sandboxes
            # (python importing pytest, on both cores), which is not the sandbox's cost per run.
            ready()
            for i in range(args.true_runs):
                trio = [("sb", lambda: sandbox.run(empty, ("true",))), ("bare", lambda: bare.run(empty, ["true"])),
                        ("floor", lambda: subprocess.run(BWRAP_FLOOR, env={}, check=True))]
                for which, fn in (trio if (r + i) % 2 == 0 else trio[::-1]):
                    {"sb": sb_true, "bare": bare_true, "floor": floor_true}[which].append(timed(fn)[0])
            for i in range(args.pytest_runs):
                pair = [("sb", lambda: sandbox.run(one, spec.test_command)), ("bare", lambda: bare.run(one))]
                for which, fn in (pair if (r + i) % 2 == 0 else pair[::-1]):
                    if which == "sb":
                        ready()
                    (sb_pytest if which == "sb" else bare_pytest).append(timed(fn)[0])

        # The tree-size sweep: the same comparison with extra small files in the upload.
        sweep = {0: (grading_s, bare_s, ratios)}
        for size in args.sizes:
            zipped, dirs = prepare(work / f"size-{size}", spec, extra_files(size))
            check_evidence(grade(zipped))  # warm-up, not measured
            sweep[size] = ([], [], [])
            for r in range(args.size_rounds):
                got = {}
                for which in (("grade", "bare") if r % 2 == 0 else ("bare", "grade")):
                    if which == "grade":
                        ready()
                        got["grade"], evidence = timed(grade, zipped)
                        check_evidence(evidence)
                    else:
                        got["bare"], codes_here = timed(bare_all, dirs)
                        if codes_here != codes:
                            raise SystemExit(f"bench: bare exit codes with {size} extra files: {codes_here}")
                sweep[size][0].append(got["grade"])
                sweep[size][1].append(got["bare"])
                sweep[size][2].append(got["grade"] / got["bare"])
            shutil.rmtree(work / f"size-{size}", ignore_errors=True)

        pytest_version = subprocess.run([str(runner_python(runner)), "-m", "pytest", "--version"],
                                         capture_output=True, text=True).stdout.strip()
        med = statistics.median
        true_overhead = (med(sb_true) - med(bare_true)) * 1000
        pytest_overhead = (med(sb_pytest) - med(bare_pytest)) * 1000
        ratio = med(ratios)
        print(f"grading benchmark: sample packet {spec.slug} v{spec.version}, ideal submission")
        print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()} (grader), "
              f"{pytest_version} in {runner}")
        print(f"rounds: {args.rounds}, grading and bare alternating (ABBA); {workers} worker threads on both sides; "
              "original-run cache warm (as in production)")
        print(f"load average (1 min): {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
              "(other work on the machine makes every figure noisier)")
        print(f"pytest runs per grading: {len(bare_runs)} ({', '.join(bare_runs)})")
        print(f"warm sandboxes: {args.warm}" + (
            " pre-started and single-use, waited for before each timed grading and sandboxed pytest run, as a "
            "worker has them ready (it refills them while idle); the hidden tests' two sandboxes and `true` "
            "stay cold" if args.warm else " (every run cold)"))
        if short:
            print(f"  but {len(short)} timed runs began with only {min(short)} to {max(short)} ready: the pool's "
                  "uids were busy (another process's sandboxes?); those figures are partly cold")
        print()
        print(f"{'ms':<44} {'median':>9} {'min':>9} {'max':>9} {'n':>4}")
        print(row("grading (grade_archive, sandboxed)", grading_s))
        print(row(f"bare: same {len(bare_runs)} pytest runs, {workers} threads", bare_s))
        print(row("sandboxed `true` (empty tree)", sb_true))
        print(row("bare `true`", bare_true))
        print(row("bubblewrap alone: same namespaces, 4 binds", floor_true))
        print(row("sandboxed pytest, one tree (submitted)", sb_pytest))
        print(row("bare pytest, same tree", bare_pytest))
        print()
        print(f"per-round ratio grading/bare: {', '.join(f'{x:.2f}' for x in ratios)}")
        print(f"CPU time, user+sys of this process and its children (medians): grading "
              f"{med(grading_cpu) * 1000:.0f} ms, bare {med(bare_cpu) * 1000:.0f} ms, "
              f"ratio {med(grading_cpu) / med(bare_cpu):.2f}" + (" (warm sandboxes' start-up included)" if args.warm else ""))
        print(f"sandbox overhead per run (medians): {true_overhead:.1f} ms (`true`), "
              f"{pytest_overhead:.1f} ms (pytest, one tree); target < {OVERHEAD_TARGET_MS:g} ms")
        print(f"sandbox overhead per run (minimums, least disturbed by other load): "
              f"{(min(sb_true) - min(bare_true)) * 1000:.1f} ms (`true`), "
              f"{(min(sb_pytest) - min(bare_pytest)) * 1000:.1f} ms (pytest, one tree)")
        print(f"of which bubblewrap's own floor on this machine (medians): "
              f"{(med(floor_true) - med(bare_true)) * 1000:.1f} ms (a bare bwrap with the sandbox's namespaces, "
              f"no cgroup, limits, tmpfs or gate); the rest is ours: "
              f"{(med(sb_true) - med(floor_true)) * 1000:.1f} ms")
        if len(sweep) > 1:
            print()
            print(f"tree-size sweep: the ideal submission plus N small files in folders of {PER_FOLDER}; "
                  f"{args.size_rounds} rounds per size ({args.rounds} for N = 0), alternating")
            print(f"{'extra files':>11} {'grading ms':>11} {'bare ms':>9} {'ratio':>6} {'per round':<30}")
            for size, (graded, bared, per_round) in sweep.items():
                print(f"{size:>11} {statistics.median(graded) * 1000:>11.0f} {statistics.median(bared) * 1000:>9.0f} "
                      f"{med(per_round):>6.2f} {', '.join(f'{x:.2f}' for x in per_round):<30}")
            print(f"target with {MAX_EXTRA} extra files: ratio <= {LARGEST_TARGET}")
        print()
        print(f"target ratio <= {RATIO_TARGET}")
        print(f"ratio: {ratio:.2f}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def prepare(work: Path, spec, extra: dict[str, bytes]) -> tuple[Path, dict[str, Path]]:
    """The ideal submission plus ``extra`` zipped, and the trees of its bare runs, written once under ``work``.

    The trees are those grade_tree builds, from the same unpacked files; the
    hidden tests beside the candidate's code in one tree, as run without the boundary.
    """
    work.mkdir(parents=True)
    archive = zip_with_times(work / "ideal.zip", {**honest_files(), **extra})
    report = safe_extract(archive, work / "unpacked")
    candidate = read_tree(report.root)
    trees = rerun_trees(candidate, spec)
    trees["reference_vs_submitted"].update({p: d for p, d in hidden_test_tree(spec).items() if d != STAND_IN})
    trees.update({f"decoy:{name}": files for name, files in decoy_trees(candidate, spec).items()})
    tree_dirs = {}
    for name, files in trees.items():
        tree_dirs[name] = work / "trees" / name
        tree_dirs[name].mkdir(parents=True)
        write_tree(files, tree_dirs[name])
    return archive, tree_dirs


def folder_size(root: Path) -> tuple[int, int]:
    """(files, bytes) under ``root``."""
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    return len(files), sum(p.stat().st_size for p in files)


def compare_packets(args: argparse.Namespace, sandbox: Sandbox, scratch: Path) -> int:
    """--packets: business-days in its own environment against refund-sum in the shared runner."""
    from dataclasses import replace

    from grading.engine.pythons import choose, discover
    from grading.engine.runner import SYSTEM_PYTHON, ensure_env, env_ready
    from grading.tests.corpus import BUSINESS_DAYS, REFUND_SUM

    packets = {p.slug: p for p in (REFUND_SUM, BUSINESS_DAYS)}
    specs = {slug: p.spec() for slug, p in packets.items()}
    python = choose(discover([SYSTEM_PYTHON]), "")
    requirements = specs["business-days"].requirements
    built_before = env_ready(args.runners, python.version, requirements) is not None
    build_s, env = timed(ensure_env, args.runners, python, requirements)
    sandboxes = {"refund-sum": sandbox, "business-days": replace(sandbox, runner_dir=env)}
    work = Path(tempfile.mkdtemp(prefix="takehome-bench-"))
    try:
        archives, trees = {}, {}
        for slug, packet in packets.items():
            archives[slug] = zip_with_times(work / f"{slug}.zip", honest_files(packet), packet=packet)
            report = safe_extract(archives[slug], work / "unpacked" / slug)
            trees[slug] = work / "trees" / slug
            trees[slug].mkdir(parents=True)
            write_tree(rerun_trees(read_tree(report.root), specs[slug])["submitted"], trees[slug])
        options = GradeOptions(cache_dir=work / "original-runs")

        def grade(slug: str) -> dict:
            return grade_archive(archives[slug], specs[slug], sandboxes[slug], options=options, scratch=scratch)

        def one_run(slug: str, tree: str) -> None:
            result = sandboxes[slug].run(trees[tree], specs[tree].test_command)
            if result.outcome != "passed":
                raise SystemExit(f"bench: {tree}'s submitted tree did not pass in {slug}'s environment:\n"
                                 f"{result.log[-2000:]}")

        load_before = os.getloadavg()[0]
        for slug in packets:  # warm-up, not measured: the original-run caches, the page cache
            check_evidence(grade(slug))
        grading = {slug: [] for slug in packets}
        runs = {slug: [] for slug in packets}
        same_tree = {slug: [] for slug in packets}
        for r in range(args.rounds):
            order = list(packets) if r % 2 == 0 else list(packets)[::-1]
            for slug in order:
                seconds, evidence = timed(grade, slug)
                check_evidence(evidence)
                grading[slug].append(seconds)
            for _ in range(args.pytest_runs):
                for slug in order:
                    runs[slug].append(timed(one_run, slug, slug)[0])
                    same_tree[slug].append(timed(one_run, slug, "refund-sum")[0])
        med = statistics.median
        print("packets benchmark: business-days (python-dateutil and six, src/ layout, tests/ with conftest) "
              "against refund-sum (pytest alone), ideal submissions")
        print(f"machine: {os.cpu_count()} cores, Python {python.version}; rounds: {args.rounds}, "
              f"the packets alternating (ABBA); load average (1 min): {load_before:.2f} before, "
              f"{os.getloadavg()[0]:.2f} after")
        for slug, sb in sandboxes.items():
            files, size = folder_size(Path(sb.runner_dir))
            print(f"{slug} environment: {sb.runner_dir}, {files} files, {size / 1e6:.1f} MB")
        print("business-days environment: " + ("built before this run" if built_before
                                                else f"built in this run in {build_s:.1f} s (pip, wheels only)"))
        print()
        print(f"{'ms':<44} {'median':>9} {'min':>9} {'max':>9} {'n':>4}")
        for slug in packets:
            print(row(f"grading {slug} (grade_archive)", grading[slug]))
        for slug in packets:
            print(row(f"one sandboxed pytest run, {slug}", runs[slug]))
        for slug in packets:
            print(row(f"refund-sum's tree in {slug}'s environment", same_tree[slug]))
        print()
        print(f"grading, business-days / refund-sum: {med(grading['business-days']) / med(grading['refund-sum']):.2f}")
        print(f"one run, business-days / refund-sum: {med(runs['business-days']) / med(runs['refund-sum']):.2f}")
        ratio = med(same_tree["business-days"]) / med(same_tree["refund-sum"])
        print("the same tree, business-days' environment / the shared runner (what a larger environment "
              "alone costs a run):")
        print(f"ratio: {ratio:.2f}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
