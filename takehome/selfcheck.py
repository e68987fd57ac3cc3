"""A packet checks itself before any candidate gets it. Plain Python, no Django.

First the packet's environment: its requirements install into a runner
virtualenv (built outside the sandbox, by pip, never running the packet's
code; see grading/engine/runner.py). Then four checks, each run in the sandbox (the
packet's code is as untrusted as a candidate's: whoever wrote it, it runs only
inside bubblewrap):

1. ``fixture_red``: the fixture's own tests fail (the candidate starts red);
2. ``hidden_red_on_fixture``: the hidden reference tests fail on the fixture
   (they catch the bug);
3. ``hidden_green_on_solution``: the hidden reference tests pass on the
   reference solution (the fix the packet calls right is right);
4. ``decoys_red``: every decoy, a plausible wrong fix, fails the hidden tests
   (otherwise the hidden tests would call a wrong fix right).

``check_ids`` are stored with each result: never rename one.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from grading.engine.requirements import requirement_names
from grading.engine.runner import installed
from grading.engine.sandbox import RunResult, Sandbox
from grading.engine.spec import PacketSpec, is_test_path
from shared.words import counted

CHECKS = (
    ("environment", "The packet's environment installs"),
    ("fixture_red", "The fixture's own tests fail"),
    ("hidden_red_on_fixture", "The hidden tests fail on the fixture"),
    ("hidden_green_on_solution", "The hidden tests pass on the reference solution"),
    ("decoys_red", "Every decoy fails the hidden tests"),
)
TITLES = dict(CHECKS)
LOG_LIMIT = 16_000


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome: whether it passed, one sentence saying why, and the sandbox's log."""

    check_id: str
    title: str
    passed: bool
    summary: str
    log: str

    def to_dict(self) -> dict:
        return asdict(self)


def hidden_tree(spec: PacketSpec, production: Mapping[str, bytes]) -> dict[str, bytes]:
    """The fixture with ``production`` files over it, its own tests out and the hidden tests in.

    The fixture's conftest.py files and data stay: the hidden tests may rely
    on them, as they do when grading a candidate (grading.engine.core.hidden_test_tree).
    """
    tree = {p: d for p, d in spec.fixture.items()
            if not is_test_path(p) or p.rsplit("/", 1)[-1] == "conftest.py"}
    tree.update(production)
    tree.update(spec.reference_tests)
    return tree


def _counts(result: RunResult) -> str:
    parts = [f"{n} {word}" for n, word in ((result.passed, "passed"), (result.failed, "failed"),
                                           (result.errors, "errors"), (result.skipped, "skipped")) if n]
    return ", ".join(parts) or "no tests reported"


def _tail(log: str) -> str:
    return log if len(log) <= LOG_LIMIT else "[...]\n" + log[-LOG_LIMIT:]


def _red(check_id: str, result: RunResult, what: str) -> CheckResult:
    """A run that must fail: some test failed (an import or collection error is not a real red)."""
    # why the count too: an outcome "failed" with no test reported is a run that
    # never got to the tests (a sandbox that could not start, a crash before collection).
    ok = result.outcome == "failed" and result.failed > 0
    if ok:
        summary = f"{what} fail as they must ({_counts(result)})."
    elif result.outcome == "passed":
        summary = f"{what} pass ({_counts(result)}): they must fail, or there is no bug to find."
    else:
        summary = (f"{what} did not run to a failure (outcome {result.outcome}, {_counts(result)}): "
                   "a collection or import error, a timeout or no tests is not a red run.")
    return CheckResult(check_id, TITLES[check_id], ok, summary, _tail(result.log))


def _green(check_id: str, result: RunResult) -> CheckResult:
    """The hidden tests over the solution: every one ran and passed; a skip is not a pass."""
    ok = result.outcome == "passed" and result.passed > 0 and not (result.skipped or result.xfailed)
    if ok:
        summary = f"The hidden tests pass on the reference solution ({_counts(result)})."
    else:
        summary = (f"The hidden tests do not all pass on the reference solution (outcome {result.outcome}, "
                   f"{_counts(result)}): fix the solution or the hidden tests.")
    return CheckResult(check_id, TITLES[check_id], ok, summary, _tail(result.log))


def _decoys(results: Mapping[str, RunResult]) -> CheckResult:
    if not results:
        return CheckResult("decoys_red", TITLES["decoys_red"], True, "The packet has no decoys: nothing to check.", "")
    # why failed or error: a decoy that crashes the hidden tests is rejected by them, as grading counts it;
    # but only when they ran: a run with no test failed or errored rejected nothing.
    through = sorted(name for name, r in results.items()
                     if r.outcome not in ("failed", "error") or not (r.failed or r.errors))
    log = "\n".join(f"===== decoy {name}: {r.outcome} ({_counts(r)}) =====\n{_tail(r.log)}"
                    for name, r in sorted(results.items()))
    if through:
        summary = ("The hidden tests do not reject these decoys: " + ", ".join(through)
                   + ". A wrong fix would be graded right; make the hidden tests catch it.")
    else:
        summary = f"The hidden tests reject all {len(results)} decoys."
    return CheckResult("decoys_red", TITLES["decoys_red"], not through, summary, log)


def environment_result(spec: PacketSpec, problem: str | None = None, runner: str = "") -> CheckResult:
    """The first check: whether ``spec``'s environment could be built (``problem`` says why not)."""
    wanted = f"Python {spec.python or 'default'}, " + (
        counted(len(requirement_names(spec.requirements)), "pinned package") if spec.requirements.strip()
        else "pytest alone")
    if problem is None:
        log = f"Runner virtualenv: {runner}\nInstalled: {', '.join(installed(Path(runner)))}\n" if runner else ""
        return CheckResult("environment", TITLES["environment"], True, f"The environment is ready ({wanted}).", log)
    return CheckResult("environment", TITLES["environment"], False,
                       f"The environment could not be built ({wanted}): {problem}", "")


def environment_failed(spec: PacketSpec, problem: str) -> list[CheckResult]:
    """Every check's result when the environment cannot be built: the tests never ran."""
    why = "Not run: the packet's environment could not be built (see the first check)."
    return [environment_result(spec, problem),
            *(CheckResult(cid, TITLES[cid], False, why, "") for cid, _ in CHECKS[1:])]


def check_packet(spec: PacketSpec, sandbox: Sandbox, workers: int = 2) -> list[CheckResult]:
    """Run the four checks in the sandbox, which runs ``spec``'s environment; one result per check,
    in ``CHECKS`` order after ``environment`` (the caller's: see environment_result).

    Raises SandboxUnavailable when the sandbox cannot start (our failure, to
    retry); what the packet's code does is a result.
    """
    jobs: dict[str, Mapping[str, bytes]] = {"fixture": spec.fixture}
    if spec.reference_tests:
        jobs["hidden:fixture"] = hidden_tree(spec, {})
        jobs["hidden:solution"] = hidden_tree(spec, spec.solution)
        for name, files in sorted(spec.decoys.items()):
            jobs[f"decoy:{name}"] = hidden_tree(spec, {**spec.solution, **files})
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {name: pool.submit(sandbox.run, files, spec.test_command) for name, files in jobs.items()}
        results = {name: future.result() for name, future in futures.items()}
    checks = [_red("fixture_red", results["fixture"], "The fixture's own tests")]
    if not spec.reference_tests:
        why = "The packet has no hidden reference tests: add some, or a wrong fix cannot be told from a right one."
        checks += [CheckResult(cid, TITLES[cid], False, why, "") for cid, _ in CHECKS[2:]]
        return checks
    checks.append(_red("hidden_red_on_fixture", results["hidden:fixture"], "The hidden tests over the fixture"))
    checks.append(_green("hidden_green_on_solution", results["hidden:solution"]))
    checks.append(_decoys({name.removeprefix("decoy:"): r for name, r in results.items()
                           if name.startswith("decoy:")}))
    return checks
