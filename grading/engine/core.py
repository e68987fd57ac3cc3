"""Grade one uploaded zip against one packet: the evidence, as plain data.

No Django here. ``grade_archive`` is what the worker (through grading.pipeline)
and ``manage.py grade_zip`` call; it returns the JSON-ready dict documented in
docs/evidence.md. Candidate code runs only through ``Sandbox.run``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from .archive import ExtractReport, Limits, UnsafeArchive, safe_extract
from .checks.artifacts import ARTIFACT_NAMES, MODEL_ARTIFACTS, check_artifacts, read_artifact
from .checks.diff import diff_trees
from .checks.model import ModelRecord, has_model_step, model_section
from .checks.receipts import MIN_RED_TO_GREEN, capture_confirmed, server_capture, witness_timeline
from .checks.redlog import Reproduction, analyse_red_log, clean_log, collect_test_ids
from .checks.refusal import check_refusal
from .checks.reproduction import steady_failures
from .checks.timeline import Receipt
from .integrity import Planted, canary_args, judge_run, plant_canaries
from .sandbox import CALL_LIMIT_S, RunResult, Sandbox, is_pytest
from .sandbox.cgroups import owned_name, work_dir_for
from .spec import ARTIFACTS_DIR, BUNDLE_PATHS, PacketSpec, is_test_path, read_tree

GRADER_VERSION = "1"
RUN_NAMES = ("submitted", "tests_vs_original", "tests_vs_solution", "reference_vs_submitted")
# What each rerun must do for the work to be right (see RERUN_PURPOSE).
EXPECTED = {
    "submitted": "passed",
    "tests_vs_original": "failed",
    "tests_vs_solution": "passed",
    "reference_vs_submitted": "passed",
}
RERUN_PURPOSE = {
    "submitted": "The tree as uploaded.",
    "tests_vs_original": "The candidate's tests over the original production code: must fail (the test catches the bug).",
    "tests_vs_solution": "The candidate's tests over the reference solution: must pass (the test is not simply broken).",
    "reference_vs_submitted": "The packet's hidden tests, in a process of their own, calling the candidate's code "
    "in another sandbox, protected data restored: must pass (the fix is right).",
}
# Runs that execute the candidate's tests: each gets canaries and is judged by grading.engine.integrity.
CANDIDATE_TEST_RUNS = ("submitted", "tests_vs_original", "tests_vs_solution")
# The hidden tests' seed: a packet's tests may draw their inputs from it (random.Random(int(...))).
HIDDEN_SEED_VAR = "TAKEHOME_HIDDEN_SEED"
# The stand-in for a production module in the hidden tests' tree (see sandboxed/takehome_proxy.py).
STAND_IN = (
    b'"""Stands in for the candidate\'s module: every use runs in another sandbox (docs/evidence.md)."""\n'
    b"import takehome_proxy as _proxy\n\n"
    b"__getattr__, __dir__ = _proxy.module_hooks(__name__, __file__)\n"
)
SERVER_LOG_LIMIT = 20_000
TEXT_ARTIFACTS = ("red.log", "prompt.txt", "model.md", "green.log", "refuse.md", "notes.md", "model_allowed.at")
TEXT_LIMIT = 64 * 1024
# Files pytest reads its configuration from (addopts, python_files, plugins...),
# at the tree's root, where a run from the root finds them.
PYTEST_CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` storable anywhere: NUL and lone surrogates become U+FFFD.

    PostgreSQL's jsonb refuses ``\\u0000`` and unpaired surrogates, and a
    candidate's output may hold either; the rest of the text stays readable.
    """
    if "\0" in text:
        text = text.replace("\0", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE_RE.sub("\ufffd", text)
    return text


def clean_evidence(value):
    """A copy of ``value`` (evidence JSON) with every string, keys included, passed through clean_text."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_evidence(k) if isinstance(k, str) else k: clean_evidence(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_evidence(v) for v in value]
    return value


def write_tree(files: Mapping[str, bytes], dest: Path) -> None:
    """Write a {posix path: bytes} mapping under dest."""
    for path, data in files.items():
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _without_artifacts(files: Mapping[str, bytes]) -> dict[str, bytes]:
    return {p: d for p, d in files.items() if not p.startswith(ARTIFACTS_DIR + "/")}


def rerun_trees(candidate: Mapping[str, bytes], spec: PacketSpec) -> dict[str, dict[str, bytes]]:
    """The four trees the reruns use, built from the candidate's files and the packet.

    Production files are the paths the reference solution replaces; test files
    are test_*.py, *_test.py and conftest.py; protected data is restored from
    the packet wherever the run judges the candidate's code, so a changed CSV
    cannot make a check pass.
    """
    work, protected = _without_artifacts(candidate), _protected(spec)
    original_prod = {p: spec.fixture[p] for p in spec.production_paths if p in spec.fixture}
    without_tests = {p: d for p, d in work.items() if not is_test_path(p)}
    # why: the candidate's pytest configuration (addopts = -p plugin, -k,
    # --deselect, --co, python_files...) must not steer the packet's tests,
    # which run on the other side of the boundary with the packet's own.
    without_tests = {p: d for p, d in without_tests.items() if p not in PYTEST_CONFIG_FILES}
    return {
        "submitted": dict(candidate),
        "tests_vs_original": {**work, **original_prod, **protected},
        "tests_vs_solution": {**work, **dict(spec.solution), **protected},
        # The candidate's side of the reference run: their code, no tests, no
        # pytest configuration (no pytest runs there), protected data restored.
        "reference_vs_submitted": {**without_tests, **protected},
    }


def _protected(spec: PacketSpec) -> dict[str, bytes]:
    return {p: spec.fixture[p] for p in spec.protected_paths if p in spec.fixture}


def decoy_trees(candidate: Mapping[str, bytes], spec: PacketSpec) -> dict[str, dict[str, bytes]]:
    """One tree per decoy: the candidate's files and tests over the decoy's production files.

    Built as ``tests_vs_solution`` is, with the decoy's files over the
    solution's (a decoy may replace only some production files).
    """
    work, protected = _without_artifacts(candidate), _protected(spec)
    return {
        name: {**work, **dict(spec.solution), **dict(files), **protected} for name, files in sorted(spec.decoys.items())
    }


def decoys_to_dict(results: Mapping[str, tuple[RunResult, dict | None]]) -> dict:
    """The ``tests_vs_decoys`` run: each decoy, and whether the candidate's tests rejected it.

    A decoy is caught when the candidate's tests do not pass over it
    (``failed`` or ``error``). A tampered decoy run catches nothing: its
    outcome cannot be believed. The run's outcome is ``failed`` (as
    expected: the tests fail on wrong fixes) when at least one decoy was
    caught, ``passed`` when every decoy got through, ``tampered`` when any
    decoy run was, ``not_run`` without decoys. A test rejects the decoys it
    can see (one about the sample's numbers cannot see a decoy that special-
    cases them): ``caught`` of ``total`` says how many, for the reviewer.
    """
    decoys: list[dict[str, Any]] = []
    for name, (result, integrity) in results.items():
        decoys.append(
            {
                "name": name,
                "caught": result.outcome in ("failed", "error"),
                "outcome": result.outcome,
                "passed": result.passed,
                "failed": result.failed,
                "errors": result.errors,
                "log": result.log,
                "notes": list(result.notes),
                "integrity": integrity,
            }
        )
    caught = sum(d["caught"] for d in decoys)
    if not decoys:
        outcome = "not_run"
    elif any(d["outcome"] == "tampered" for d in decoys):
        outcome = "tampered"
    else:
        outcome = "failed" if caught else "passed"
    return {
        "outcome": outcome,
        "caught": caught,
        "total": len(decoys),
        "decoys": decoys,
        "passed": sum(d["passed"] for d in decoys),
        "failed": sum(d["failed"] for d in decoys),
        "errors": sum(d["errors"] for d in decoys),
        "duration_s": 0.0,
        "log": "",
        "notes": [f"the candidate's tests reject {caught} of the {len(decoys)} wrong fixes"] if decoys else [],
        "expected": "failed",
        "as_expected": outcome == "failed",
        "purpose": "The candidate's tests over each of the packet's decoys, plausible wrong fixes: "
        "a test that catches the bug fails on each one it can see.",
    }


def new_hidden_seed() -> int:
    """A seed no one can guess ahead: drawn by the worker, where no candidate code runs."""
    return secrets.randbelow(1 << 32)


def hidden_test_tree(spec: PacketSpec) -> dict[str, bytes]:
    """The trusted side of the reference run: the packet's own files, never the candidate's.

    The fixture's non-test files (data, helpers, pytest configuration) and its
    conftest.py files, the hidden tests, and a stand-in for each production
    module, through which every use of the candidate's code crosses to the
    other sandbox (``Sandbox.run_across_boundary``).
    """
    tree = {
        p: d
        for p, d in spec.fixture.items()
        if (not is_test_path(p) or p.rsplit("/", 1)[-1] == "conftest.py") and p not in spec.solution
    }
    tree.update({p: STAND_IN for p in spec.production_paths if p.endswith(".py")})
    tree.update(spec.reference_tests)
    return tree


def _base_id(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def check_reference_run(run: dict, expected_ids: set[str]) -> dict:
    """Hold ``reference_vs_submitted`` to the packet's own test list.

    A pass counts only when every test of the packet's hidden tests was
    reported as passed: a run that passed with some of them deselected,
    never collected, or missing from pytest's report did not earn it. The
    missing ids are listed in ``missing_reference_tests``.
    """
    if not expected_ids or run["outcome"] == "not_run":
        return run
    passed = {_base_id(t["nodeid"]) for t in run.get("tests", ()) if t["outcome"] in ("passed", "xpassed")}
    missing = sorted(i for i in expected_ids if _base_id(i) not in passed)
    run["missing_reference_tests"] = missing
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        run["notes"].append(f"the packet's tests {shown} were not reported as passed")
        run["as_expected"] = False
        if run["outcome"] == "passed":
            run["outcome"] = "error"
            run["notes"].append("reported a pass without running all of the packet's tests: not a pass")
    return run


def run_to_dict(name: str, result: RunResult | None, integrity: dict | None = None) -> dict:
    """One rerun in the evidence's RUN shape, with whether it did what it must."""
    if result is None:
        return {
            "outcome": "not_run",
            "passed": 0,
            "failed": 0,
            "errors": 0,
            "duration_s": 0.0,
            "log": "",
            "expected": EXPECTED[name],
            "as_expected": False,
            "notes": [],
            "purpose": RERUN_PURPOSE[name],
        }
    notes = list(result.notes)
    as_expected = result.outcome == EXPECTED[name]
    if EXPECTED[name] == "passed" and (result.skipped or result.xfailed):
        # why: a skipped or xfailed test is not a passing test.
        as_expected = False
        notes.append(f"{result.skipped} skipped and {result.xfailed} xfailed: a skip is not a pass")
    extra: dict[str, Any] = {}
    if integrity is not None:
        extra["integrity"] = integrity
    if result.server_log:
        extra["server_log"] = result.server_log[-SERVER_LOG_LIMIT:]
    return {
        **extra,
        "outcome": result.outcome,
        "passed": result.passed,
        "failed": result.failed,
        "errors": result.errors,
        "skipped": result.skipped,
        "xfailed": result.xfailed,
        "xpassed": result.xpassed,
        "duration_s": round(result.duration_s, 3),
        "exit_code": result.exit_code,
        "log": result.log,
        "tests": [asdict(t) for t in result.tests],
        "notes": notes,
        "expected": EXPECTED[name],
        "as_expected": as_expected,
        "purpose": RERUN_PURPOSE[name],
    }


class OriginalRunCache:
    """The original tree's own run, once per packet version (it is the same for everyone).

    The cached run holds its log, which the red-log check compares with, and
    the failures that printed the same values when the tree ran twice
    (``steady``); files of an older format are not read: the format is in the
    file name.
    """

    FORMAT = "3"

    def __init__(self, folder: Path | None):
        self.folder = folder

    def _path(self, spec: PacketSpec) -> Path | None:
        if self.folder is None:
            return None
        digest = hashlib.sha256()
        for path in sorted(spec.fixture):
            digest.update(path.encode() + b"\0" + spec.fixture[path] + b"\0")
        digest.update(" ".join(spec.test_command).encode())
        return self.folder / f"{spec.cache_key()}-{digest.hexdigest()[:16]}-f{self.FORMAT}.json"

    def get(self, spec: PacketSpec) -> dict | None:
        path = self._path(spec)
        if path is None or not path.exists():
            return None
        try:
            run = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return run if isinstance(run, dict) and "log" in run and isinstance(run.get("steady"), list) else None

    def put(self, spec: PacketSpec, run: dict) -> None:
        path = self._path(spec)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(run))
        tmp.replace(path)  # why: atomic, so a concurrent reader never sees half a file


def _original_run_dict(result: RunResult, again: RunResult) -> dict:
    return {
        "outcome": result.outcome,
        "failing_ids": sorted(t.nodeid for t in result.tests if t.outcome in ("failed", "error")),
        "duration_s": round(result.duration_s, 3),
        "log": result.log,  # kept in the cache for the red-log check, left out of the evidence
        "steady": sorted(steady_failures(result.log, again.log, clean=clean_log)),  # the same in both runs
    }


def empty_evidence(reason: str, skipped: Iterable[str] = (), model: ModelRecord | None = None) -> dict:
    """Evidence for a refused archive: every section present, empty or false (the server's model record kept)."""
    return {
        "grader_version": GRADER_VERSION,
        "archive": {"accepted": False, "reason": reason, "kept": [], "skipped": list(skipped)},
        "artifacts": {
            name: None if name in MODEL_ARTIFACTS and not has_model_step(model) else False for name in ARTIFACT_NAMES
        },
        "red_log": {
            "present": False,
            "failed": False,
            "genuine": False,
            "signals": [],
            "missing": [],
            "failing_ids": [],
            "captured_by": "candidate",
        },
        "timeline": {"ok": False, "events": [], "problems": []},
        "runs": {**{name: run_to_dict(name, None) for name in RUN_NAMES}, "tests_vs_decoys": decoys_to_dict({})},
        "diff": {"files": [], "flags": []},
        "refusal": {"present": False, "specific": False, "mentions": []},
        "texts": {},
        "original_run": None,
        "model": model_section(model, None, None),
    }


def grade_tree(
    report: ExtractReport,
    spec: PacketSpec,
    sandbox: Sandbox,
    *,
    receipts: Iterable[Receipt] | None = None,
    model: ModelRecord | None = None,
    deadline: datetime | None = None,
    min_red_to_green_s: float = MIN_RED_TO_GREEN.total_seconds(),
    cache: OriginalRunCache | None = None,
    workers: int | None = None,
    call_limit_s: float = CALL_LIMIT_S,
    hidden_seed: int | None = None,
) -> dict:
    """Evidence for an unpacked tree. Raises SandboxUnavailable if the sandbox cannot run.

    ``call_limit_s``: each call of the hidden tests into the candidate's code.
    ``hidden_seed``: what the hidden tests draw their inputs from
    (``TAKEHOME_HIDDEN_SEED``); None draws a fresh one, kept in the evidence.

    The reruns' trees are built in memory and unpacked only inside each sandbox's tmpfs.

    ``receipts`` (every gate receipt up to the upload, refused ones too),
    ``model`` (the model window's exchanges up to the upload) and ``deadline``
    are the server's record; None when it is not known here.
    """
    tree = report.root
    bundled = [p for p in BUNDLE_PATHS if p in report.kept and p not in spec.fixture]
    for path in bundled:
        (tree / path).unlink()
    kept = [p for p in report.kept if p not in bundled]
    candidate = read_tree(tree)
    trees = rerun_trees(candidate, spec)
    cache = cache or OriginalRunCache(None)
    original = cache.get(spec)
    trees.update({f"decoy:{name}": files for name, files in decoy_trees(candidate, spec).items()})
    planted: dict[str, Planted] = {}
    # why twice (unplanted: no canary is compared): a failure that prints the
    # same values in two runs decides the red-log comparison (reproduction.steady_failures).
    again = {f"{name}:again": trees[name] for name in ("tests_vs_original",)}
    # why pytest only: canaries and the witness are pytest's; another runner's
    # outcome stays as the sandbox read it (docs/evidence.md).
    judged = is_pytest(spec.test_command)
    for name in trees:
        if judged and (name in CANDIDATE_TEST_RUNS or name.startswith("decoy:")):
            trees[name], planted[name] = plant_canaries(trees[name])
    jobs: dict[str, Mapping[str, bytes]] = {**trees, **again}
    jobs["hidden-tests"] = hidden_test_tree(spec)
    if original is None:
        jobs["original"] = jobs["original:again"] = spec.fixture

    # why no folder per rerun: each tree goes into its sandbox as the files themselves,
    # unpacked there into the sandbox's own tmpfs (Sandbox.run), never written on disk here.
    calls: dict[str, Callable[[], RunResult]] = {
        name: partial(
            sandbox.run,
            jobs[name],
            (*spec.test_command, *canary_args(planted[name])) if name in planted else spec.test_command,
        )
        for name in jobs
        if name != "hidden-tests"
    }
    # why across a boundary: the packet's hidden tests decide whether the fix is
    # right, so no candidate code may run in their interpreter.
    # why a fresh seed each time: a packet's hidden tests may draw their inputs from it, so what one
    # grading's inputs were tells nothing of the next one's (docs/evidence.md).
    seed = new_hidden_seed() if hidden_seed is None else hidden_seed
    calls["reference_vs_submitted"] = partial(
        sandbox.run_across_boundary,
        jobs["hidden-tests"],
        spec.test_command,
        jobs["reference_vs_submitted"],
        call_limit_s,
        {HIDDEN_SEED_VAR: str(seed)},
    )
    workers = workers or max(1, min(len(calls), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(call) for name, call in calls.items()}
        # why here: what does not depend on the runs is read while they run.
        original_ids = collect_test_ids(spec.fixture)
        reference_ids = collect_test_ids(spec.reference_tests)
        tree_ids = collect_test_ids(tree)
        artifact_times = {
            path.removeprefix(ARTIFACTS_DIR + "/"): time
            for path, time in report.times.items()
            if path.startswith(ARTIFACTS_DIR + "/")
        }
        red_text = read_artifact(tree, "red.log")
        texts = {name: read_artifact(tree, name, limit=TEXT_LIMIT) for name in TEXT_ARTIFACTS}
        timeline = witness_timeline(
            artifact_times,
            texts.get("model_allowed.at"),
            receipts,
            candidate,
            {p: spec.fixture[p] for p in spec.production_paths if p in spec.fixture},
            deadline=deadline,
            min_red_to_green=timedelta(seconds=min_red_to_green_s),
            model_step=has_model_step(model),
        )
        diff = diff_trees(
            spec.fixture,
            tree,
            protected_paths=spec.protected_paths,
            forbidden_patterns=spec.forbidden_patterns,
        )
        refusal = check_refusal(texts.get("refuse.md"), spec.refusal_hints)
        results = {name: future.result() for name, future in futures.items()}
    if original is None:
        original = _original_run_dict(results.pop("original"), results.pop("original:again"))
        cache.put(spec, original)

    original_log = original.pop("log", "")  # compared with red.log; the evidence keeps no log of it
    original_steady = frozenset(original.pop("steady", ()))
    rerun = results["tests_vs_original"]
    rerun_steady = steady_failures(rerun.log, results.pop("tests_vs_original:again").log, clean=clean_log)
    red = analyse_red_log(
        red_text,
        known_test_ids=original_ids | tree_ids,
        original_failures=set(original["failing_ids"]),
        # The real runs the red log is compared with, line by line.
        reproductions=[
            Reproduction("original", original_log, tuple(spec.fixture), original_steady),
            Reproduction("tests_vs_original", rerun.log, spec.production_paths, rerun_steady),
        ],
    )
    captured = server_capture(red_text, receipts)
    doubt = capture_confirmed(captured) if captured is not None else None
    if captured is not None and doubt is None:
        # why genuine outright: the server ran the tests itself, its judge found the run sound,
        # and the log came from its receipt.
        red = replace(
            red,
            genuine=True,
            captured_by="server",
            signals=(
                f"captured by the server (receipt {captured.id}): it ran the tests itself, and the run held up",
                *red.signals,
            ),
        )
    elif captured is not None:
        # why judged as any log: a run the server cannot vouch for is no proof by construction.
        red = replace(
            red,
            missing=(
                f"the server captured this log (receipt {captured.id}) but cannot vouch for "
                f"it: {doubt}; it is judged as any red log",
                *red.missing,
            ),
        )

    def judge(name: str) -> tuple[RunResult, dict | None]:
        if not judged:
            return results[name], None
        return judge_run(results[name], planted.get(name, Planted((), ())), sandbox.limits)

    runs = {name: run_to_dict(name, *judge(name)) for name in RUN_NAMES}
    check_reference_run(runs["reference_vs_submitted"], reference_ids)
    runs["reference_vs_submitted"].update(hidden_seed=seed, call_limit_s=call_limit_s)
    runs["tests_vs_decoys"] = decoys_to_dict(
        {name.removeprefix("decoy:"): judge(name) for name in sorted(results) if name.startswith("decoy:")}
    )
    return {
        "grader_version": GRADER_VERSION,
        "archive": {
            "accepted": True,
            "reason": None,
            "kept": kept,
            "skipped": sorted([*report.skipped, *bundled]),
            "stripped_prefix": report.stripped_prefix,
        },
        "artifacts": check_artifacts(tree, has_model_step(model)),
        "red_log": red.to_dict(),
        "timeline": timeline,
        "runs": runs,
        "diff": diff.to_dict(),
        "refusal": refusal.to_dict(),
        "texts": {name: text for name, text in texts.items() if text is not None},
        "original_run": original,
        "model": model_section(model, texts.get("prompt.txt"), texts.get("model.md")),
    }


@dataclass(frozen=True)
class GradeOptions:
    limits: Limits = Limits()
    cache_dir: Path | None = None
    workers: int | None = None
    min_red_to_green_s: float = MIN_RED_TO_GREEN.total_seconds()
    call_limit_s: float = CALL_LIMIT_S
    hidden_seed: int | None = None  # None: a fresh one per grading


def grade_archive(
    archive: Path,
    spec: PacketSpec,
    sandbox: Sandbox,
    *,
    receipts: Iterable[Receipt] | None = None,
    model: ModelRecord | None = None,
    deadline: datetime | None = None,
    options: GradeOptions = GradeOptions(),
    scratch: Path | None = None,
) -> dict:
    """Unpack an uploaded zip safely and grade it. A refused archive is evidence too."""
    scratch = Path(scratch if scratch is not None else tempfile.gettempdir())
    scratch.mkdir(parents=True, exist_ok=True)
    # why named by its owner: a worker killed mid-grading leaves this folder, and
    # the next worker start removes it once this process is gone (sandbox.clean_stale_scratch).
    # why work_dir_for: the upload is unpacked in memory (a tmpfs) where there is one
    # with room for a few uploads at their largest.
    work = work_dir_for(scratch, room=4 * options.limits.max_total_bytes) / owned_name("grade")
    work.mkdir(mode=0o700)
    try:
        try:
            report = safe_extract(Path(archive), work / "tree", options.limits)
        except UnsafeArchive as exc:
            return clean_evidence(empty_evidence(exc.reason, model=model))
        return clean_evidence(
            grade_tree(
                report,
                spec,
                sandbox,
                receipts=receipts,
                model=model,
                deadline=deadline,
                min_red_to_green_s=options.min_red_to_green_s,
                cache=OriginalRunCache(options.cache_dir),
                workers=options.workers,
                call_limit_s=options.call_limit_s,
                hidden_seed=options.hidden_seed,
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
