"""Can a sandboxed pytest run that executed candidate code be believed?

Plain Python, no Django. The candidate's code shares the interpreter with
pytest in every run that executes their tests (``submitted``,
``tests_vs_original``, ``tests_vs_solution``, each decoy), so it could change
what pytest reports. Nothing inside that process is trusted; instead several
witnesses that a cheat would have to fool together are compared:

1. **Canaries.** Before the run, :func:`plant_canaries` appends a few tests
   to the candidate's own test files: named from the words of the tree's
   real test names, shaped like real tests, and certain to fail. A canary
   reported as passed means something rewrote pytest's verdicts. Each run is
   told its canaries and runs them whatever the candidate's configuration
   collects or deselects (``sandboxed/takehome_canary.py``).
2. **The witness** (``sandboxed/takehome_witness.py``, loaded before any
   conftest): what each test really raised against the report pytest
   finally logged, and pytest's own exit status.
3. **pytest's JUnit report**, **its text summary** and **the exit code**
   must tell the same story.

Any disagreement makes the run's outcome ``tampered``, whatever pytest said.
A run whose witnesses are missing (canaries not run, the witness silenced)
cannot be confirmed: it is never ``passed``. The outcome of a run that holds
up is decided from its real tests alone (canaries removed).

The packet's hidden tests never share an interpreter with candidate code at
all (``Sandbox.run_across_boundary``); see docs/evidence.md.
"""

from __future__ import annotations

import ast
import json
import random
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace

from .sandbox import RunResult, SandboxLimits, counts_from_text, decide_outcome, is_pytest, run_counts
from .spec import is_test_path

CANARY_COUNT = 3
# Words a test name is made of when the tree's own tests give too few.
FALLBACK_WORDS = (
    "rows",
    "value",
    "empty",
    "input",
    "case",
    "parse",
    "returns",
    "handles",
    "items",
    "negative",
    "zero",
    "line",
    "amount",
    "result",
    "order",
    "single",
    "many",
    "records",
)
_NAME_RE = re.compile(r"^def (test_\w+)\(", re.M)
# Every test-like name in a file, methods too: a canary's name is unique in the whole tree.
_ANY_NAME_RE = re.compile(r"^\s*(?:async\s+)?def (test\w*)\(", re.M)


@dataclass(frozen=True)
class Planted:
    """The canaries planted in one tree: their node ids and the files they went into."""

    ids: tuple[str, ...]
    paths: tuple[str, ...]


def _words(files: Mapping[str, bytes]) -> list[str]:
    words: set[str] = set()
    for path, data in files.items():
        if is_test_path(path) and path.endswith(".py"):
            for name in _NAME_RE.findall(data.decode("utf-8", "replace")):
                words.update(w for w in name.split("_")[1:] if w.isalpha() and 2 < len(w) < 16)
    return sorted(words) if len(words) >= 4 else sorted(words | set(FALLBACK_WORDS))


def _parses(data: bytes) -> bool:
    try:
        ast.parse(data)
    except (SyntaxError, ValueError):
        return False
    return True


def _canary_source(name: str, rng: random.Random) -> str:
    values = [rng.randint(-999, 999) for _ in range(rng.randint(2, 4))]
    wrong = sum(values) + rng.choice((-1, 1)) * rng.randint(1, 97)
    return f"\n\ndef {name}():\n    values = {values!r}\n    assert sum(values) == {wrong}\n"


def plant_canaries(
    files: Mapping[str, bytes], rng: random.Random | None = None, count: int = CANARY_COUNT
) -> tuple[dict[str, bytes], Planted]:
    """``files`` with ``count`` failing canary tests appended to its test files.

    Canaries go into test files that already parse (so they run with the
    real tests, under the same conftests); a tree without one gets a new test
    file. Names are unpredictable (a system random source unless ``rng`` is
    given) and never collide with a test name anywhere in the tree. Where they
    went and what they are called never changes a verdict: the run is told
    them (:func:`canary_args`) and runs each one whatever the candidate's
    configuration collects or deselects (``sandboxed/takehome_canary.py``).
    """
    rng = rng or secrets.SystemRandom()
    words = _words(files)
    hosts = sorted(
        p
        for p, d in files.items()
        if is_test_path(p) and p.endswith(".py") and not p.endswith("conftest.py") and _parses(d)
    )
    out = dict(files)
    if not hosts:
        new = "test_" + "_".join(rng.sample(words, 2)) + ".py"
        while new in out:
            new = "test_" + "_".join(rng.sample(words, 2)) + ".py"
        out[new] = b""
        hosts = [new]
    ids, paths = [], []
    taken = {
        name
        for p, d in files.items()
        if p.endswith(".py")
        for name in _ANY_NAME_RE.findall(d.decode("utf-8", "replace"))
    }
    for _ in range(count):
        path = rng.choice(hosts)
        name = "test_" + "_".join(rng.sample(words, rng.randint(2, 3)))
        while name in taken:
            name += "_" + rng.choice(words)
        body = _canary_source(name, rng)
        candidate = out[path].rstrip() + body.encode()
        if not _parses(candidate):  # a file ending inside a string or a continuation: leave it alone
            continue
        out[path] = candidate + b"\n"
        taken.add(name)
        ids.append(f"{path}::{name}")
        paths.append(path)
    return out, Planted(tuple(ids), tuple(dict.fromkeys(paths)))


def canary_args(planted: Planted, quiet: bool = False) -> tuple[str, ...]:
    """pytest's arguments that name the canaries to the run (``sandboxed/takehome_canary.py``).

    ``quiet``: the terminal shows nothing of them (a hosted session's capture,
    whose log is the candidate's red or green log).
    """
    args = tuple(a for i in planted.ids for a in ("--takehome-canary", i))
    return (*args, "--takehome-quiet-canaries") if quiet and args else args


# --- judging a run -------------------------------------------------------------------------


def _base(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


# The witness's lines come through a pipe candidate code can also write to:
# read as hostile. Its own lines are short; a longer one, or one nested past
# the parser's recursion limit, is skipped rather than parsed.
WITNESS_MAX_LINE = 64 << 10


def _witness_lines(text: str) -> list[dict]:
    found = []
    for line in text.splitlines():
        if len(line) > WITNESS_MAX_LINE:
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            found.append(record)
    return found


def _allowed(record: dict) -> bool:
    """Whether the logged outcome is one pytest itself makes of what the test raised."""
    raw, final = record.get("raw"), record.get("final")
    xfail = bool(record.get("xfail_mark"))
    wasxfail = bool(record.get("wasxfail"))
    if raw is None:
        return True  # reports pytest made without a test phase we saw (subtests): nothing to compare
    if raw == "passed":
        return final == "passed" or (xfail and final == "failed")  # a strict xfail that passed fails
    if raw == "failed":
        return final == "failed" or (final == "skipped" and wasxfail)
    if raw == "skipped":
        return final == "skipped"
    if raw == "xfailed":
        return final == "skipped" and wasxfail
    return False


def _witness_findings(records: list[dict], result: RunResult) -> tuple[list[str], list[str]]:
    """(signs of tampering, reasons the run cannot be confirmed) from the witness's lines."""
    tampered: list[str] = []
    unconfirmed: list[str] = []
    called = {t.nodeid for t in result.tests if t.outcome in ("passed", "failed", "xpassed")}
    if not any(r.get("start") for r in records):
        if called:
            tampered.append(
                f"the witness plugin never started, yet the JUnit report holds {len(called)} tests "
                "that ran: something kept it out of the run"
            )
        elif result.exit_code in (0, 1):
            unconfirmed.append("the witness plugin never started although pytest ran tests")
        return tampered, unconfirmed
    if not any(r.get("end") for r in records):
        unconfirmed.append("the witness plugin did not see pytest finish (the process was ended early)")
    rewritten = [r for r in records if "id" in r and not _allowed(r)]
    for r in rewritten[:3]:
        tampered.append(
            f"{r['id']} ({r.get('when')}): the test {_raw_words(r.get('raw'))}, but pytest "
            f"logged it as {r.get('final')}"
        )
    if len(rewritten) > 3:
        more = len(rewritten) - 3
        tampered.append(
            f"and {more} more report{'s' if more > 1 else ''} that differ{'' if more > 1 else 's'} "
            "from what the tests did"
        )
    calls = [
        r
        for r in records
        if r.get("when") == "call" and isinstance(r.get("id"), str) and "Subtest" not in str(r.get("report"))
    ]
    replaced = sorted(
        {n for r in records if isinstance(r.get("replaced"), list) for n in r["replaced"] if isinstance(n, str)}
    )
    if replaced:
        tampered.append(
            "pytest's runner was changed while the tests ran: "
            + ", ".join(replaced[:5])
            + (f" and {len(replaced) - 5} more" if len(replaced) > 5 else "")
        )
    not_run = []
    for r in calls:
        why = _call_problem(r)
        if why == "unknown":
            unconfirmed.append(f"{r['id']}: the witness could not tell which code is the test's own")
        elif why:
            not_run.append(f"{r['id']}: {why}")
    tampered += not_run[:3]
    if len(not_run) > 3:
        tampered.append(f"and {len(not_run) - 3} more tests whose verdict their own code did not give")
    witnessed = {r["id"] for r in calls if r.get("seen") is True}
    if len(called) > len(witnessed):
        tampered.append(
            f"the JUnit report holds {len(called)} tests that ran, the witness saw {len(witnessed)} of them called"
        )
    statuses = [r["exitstatus"] for r in records if isinstance(r.get("exitstatus"), int)]
    if statuses and result.exit_code is not None and 0 <= result.exit_code < 128 and statuses[-1] != result.exit_code:
        tampered.append(f"pytest decided exit status {statuses[-1]}, but the process exited {result.exit_code}")
    # The JUnit report against what pytest logged for each test's call. A test
    # with subtests (pytest 9) is marked failed after its own report was
    # logged as passed when one of its subtests failed: not compared.
    with_subtests = {r.get("id") for r in records if "Subtest" in str(r.get("report"))}
    logged = {
        r["id"]: r.get("final")
        for r in records
        if r.get("when") == "call" and "id" in r and r["id"] not in with_subtests
    }
    junit_word = {"passed": "passed", "xpassed": "passed", "failed": "failed"}
    for t in result.tests:
        said = junit_word.get(t.outcome)
        if said and t.nodeid in logged and logged[t.nodeid] in ("passed", "failed") and logged[t.nodeid] != said:
            tampered.append(f"the JUnit report says {t.nodeid} {t.outcome}, pytest logged it as {logged[t.nodeid]}")
            break
    return tampered, unconfirmed


def _call_problem(record: dict) -> str | None:
    """Why a test's call, as the witness saw it, was not decided by the test's own code; None when it was.

    ``"unknown"`` when the witness found no code of the test's own to look for.
    """
    raw = record.get("raw")
    if raw is None:
        return "pytest logged a result for its call that no run of the test produced"
    if raw not in ("passed", "failed"):
        return None  # skipped or xfailed: no verdict taken from the test
    if record.get("seen") is not True:
        return f"pytest logged it as {raw}, but the witness never saw the test called"
    entered, kind, ended, cause = (record.get(k) for k in ("entered", "kind", "ended", "cause"))
    if entered is None:
        return "unknown"
    if entered is not True and not (raw == "failed" and cause == "pytest"):
        # (pytest itself fails an async test no plugin runs, before its code starts)
        return f"pytest logged it as {raw}, but the test's own code never ran"
    if kind in ("function", "unittest") and raw == "passed" and ended == "raised":
        return "the test's code raised an error, yet it passed: something between the test and pytest swallowed it"
    if kind == "function" and raw == "failed" and ended == "returned" and cause not in ("body", "pytest"):
        return "the test's code returned without an error, yet it failed: something outside the test failed it"
    return None


def _raw_words(raw) -> str:
    return {
        "passed": "raised nothing",
        "failed": "raised an error",
        "skipped": "was skipped",
        "xfailed": "called pytest.xfail",
    }.get(raw, "did something unknown")


def _name(nodeid: str) -> str:
    return _base(nodeid).rsplit("::", 1)[-1]


def judge_run(
    result: RunResult, planted: Planted, limits: SandboxLimits, quiet: bool = False
) -> tuple[RunResult, dict]:
    """The run as it really went: canaries removed, outcome ``tampered`` on any disagreement.

    A canary is known by its name, unique in the tree (``plant_canaries``):
    where pytest's root folder is (``--rootdir``, a configuration file in a
    sub-folder) changes the path in its node id, never its name. ``quiet``:
    the run kept the canaries out of its text (``canary_args``), so pytest's
    text summary is held to the real tests' counts.

    Returns the adjusted result and the ``integrity`` record for the evidence:
    ``{"canaries": [...ids], "canaries_failed": n, "tampered": [reasons],
    "unconfirmed": [reasons]}``.
    """
    record = {"canaries": list(planted.ids), "canaries_failed": 0, "tampered": [], "unconfirmed": []}
    if result.outcome in ("timeout", "killed"):
        return result, record  # cut short by a limit: no verdict to check, and never a pass
    canary_names = {_name(i) for i in planted.ids}
    canaries = [t for t in result.tests if _name(t.nodeid) in canary_names]
    real = tuple(t for t in result.tests if _name(t.nodeid) not in canary_names)
    tampered: list[str] = []
    unconfirmed: list[str] = []
    report_ok = bool(result.tests)

    passed = [t.nodeid for t in canaries if t.outcome in ("passed", "xpassed")]
    record["canaries_failed"] = sum(t.outcome == "failed" for t in canaries)
    if passed:
        tampered.append(
            f"{len(passed)} of the {len(planted.ids)} planted canary tests passed ({', '.join(passed)}); "
            "a canary cannot pass unless pytest's verdicts were changed"
        )
    if report_ok and planted.ids and len(canaries) < len(planted.ids) and real:
        unconfirmed.append(
            f"{len(planted.ids) - len(canaries)} of the {len(planted.ids)} planted canary tests "
            "were not run (deselected or removed from collection)"
        )

    records = _witness_lines(result.witness)
    found_tampered, found_unconfirmed = _witness_findings(records, result)
    tampered += found_tampered
    unconfirmed += found_unconfirmed

    junit_failed = sum(t.outcome == "failed" for t in result.tests)
    if report_ok:
        text = counts_from_text(result.log)
        if any(text.values()):
            text_passed = text["passed"] + text["xpassed"]
            # why the slack: a test that passed and then errored in teardown is
            # one "passed" and one "error" in the text, one error in JUnit; a
            # failed subtest is one more "failed" in the text, none in JUnit.
            failed_subtests = sum(
                1 for r in records if "Subtest" in str(r.get("report")) and r.get("final") == "failed"
            )

            def disagree(tests) -> tuple[int, int] | None:
                failed = sum(t.outcome == "failed" for t in tests)
                passed = sum(t.outcome in ("passed", "xpassed") for t in tests)
                if text["failed"] != failed + failed_subtests or not 0 <= text_passed - passed <= text["errors"]:
                    return failed, passed
                return None

            # why both for a quiet run: the canaries are out of its text unless
            # another plugin printed them; either way the counts must add up.
            differ = disagree(result.tests)
            if differ and quiet:
                differ = disagree(real) and differ
            if differ:
                tampered.append(
                    f"pytest's text summary counts {text['failed']} failed and {text_passed} passed, "
                    f"its JUnit report {differ[0]} failed and {differ[1]} passed"
                )
        if result.exit_code == 0 and junit_failed:
            tampered.append(f"the process exited 0 although the JUnit report holds {junit_failed} failed tests")

    counts = {k: 0 for k in ("passed", "failed", "errors", "skipped", "xfailed", "xpassed")}
    for t in real:
        counts["errors" if t.outcome == "error" else t.outcome] += 1
    if report_ok and result.exit_code in (0, 1):
        # The exit code pytest would have given without the canaries.
        exit_code: int | None = 1 if counts["failed"] or counts["errors"] else (0 if real else 5)
    else:
        exit_code = result.exit_code
    outcome, why = decide_outcome(
        exit_code,
        counts,
        bool(real),
        False,
        result.duration_s,
        limits,
        result.log,
        pytest_run=True,
        report_ok=report_ok,
    )
    notes = [n for n in result.notes if n not in result.decided_by] + why
    if record["canaries_failed"]:
        notes.append(
            f"{record['canaries_failed']} planted canary tests failed, as they must (they are the "
            "grader's, not the candidate's, and are left out of the counts)"
        )
    if tampered:
        outcome = "tampered"
        notes = [f"tampered: {reason}" for reason in tampered] + notes
    elif unconfirmed and outcome == "passed":
        outcome = "error"
        notes = [f"cannot be confirmed: {reason}" for reason in unconfirmed] + notes
    record["tampered"], record["unconfirmed"] = tampered, unconfirmed
    judged = replace(
        result, outcome=outcome, tests=real, notes=tuple(notes), decided_by=tuple(why), **run_counts(counts)
    )
    return judged, record


# --- a capture: the server's own run of a hosted session's tests ------------------------------


def run_capture(sandbox, files: Mapping[str, bytes], command: tuple[str, ...]) -> tuple[RunResult, dict | None]:
    """A hosted session's red or green run, made and judged as any rerun of the candidate's tests.

    Canaries planted and named to the run, the witness, JUnit against text
    against exit code (:func:`judge_run`); the canaries are kept out of the
    run's text (``quiet``), since that text becomes the candidate's red or
    green log. Returns the run as judged (its ``log`` as pytest printed it)
    and the ``integrity`` record; None for a command that is not pytest's,
    whose outcome stays as the sandbox read it.
    """
    if not is_pytest(command):
        return sandbox.run(files, command), None
    planted_files, planted = plant_canaries(files)
    result = sandbox.run(planted_files, (*command, *canary_args(planted, quiet=True)))
    return judge_run(result, planted, sandbox.limits, quiet=True)


def capture_refusal(step: str, judged: RunResult, record: dict | None) -> str | None:
    """Why a captured red or green run is refused on what it really did (None: it holds up).

    ``tampered`` or unconfirmed refuses either step: such a run shows neither
    a failure nor a pass. A green whose real tests did not pass is refused
    even when its text says they did. The words are the candidate's: they
    say what to do, not which witness saw it (the receipt's ``integrity``
    keeps that for the reviewer).
    """
    if record is None:
        return None
    if record["tampered"]:
        return (
            "The server's run of your tests does not hold up: what pytest reported is not what the tests did "
            "(something in your tree, such as a conftest.py or a plugin, changes pytest's reports). Nothing "
            "was captured; remove it and capture again."
        )
    if record["unconfirmed"]:
        return (
            "The server could not confirm its run of your tests: pytest's own record of the run was missing "
            "or cut short (tests removed from the run, or pytest stopped early). Nothing was captured; "
            "capture again with a plain pytest run."
        )
    if step == "green" and judged.outcome != "passed":
        why = judged.decided_by[0] if judged.decided_by else judged.outcome
        return f"still red: the server's run of your tests is not a pass ({why})."
    return None
