"""The grader on honest, dishonest and hostile submissions of the sample packet.

Real bubblewrap, the real runner virtualenv, real pytest: nothing mocked.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC
from pathlib import Path

import pytest

from grading.engine.checks.model import ModelRecord
from grading.engine.core import RUN_NAMES, GradeOptions, grade_archive
from grading.engine.spec import sample_spec

from . import corpus
from .zips import finder_zip, make_zip, windows_zip

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spec():
    return sample_spec()


def graded(path: Path, spec, sandbox, original_runs: Path, model: ModelRecord | None = None) -> dict:
    return grade_archive(path, spec, sandbox, model=model, options=GradeOptions(cache_dir=original_runs))


@pytest.fixture
def grade(grading_sandbox, spec, original_runs):
    def run(path: Path, sandbox=None, model: ModelRecord | None = None) -> dict:
        return graded(path, spec, sandbox or grading_sandbox, original_runs, model)
    return run


@pytest.fixture(scope="module")
def ideal(grading_sandbox, spec, original_runs, tmp_path_factory) -> dict:
    """The evidence of the ideal submission, graded once for the tests that only read it (a copy each)."""
    path = corpus.zip_with_times(tmp_path_factory.mktemp("ideal") / "s.zip", corpus.honest_files())
    return graded(path, spec, grading_sandbox, original_runs)


@pytest.fixture
def ideal_evidence(ideal) -> dict:
    return copy.deepcopy(ideal)


def outcomes(evidence: dict) -> dict[str, tuple[str, bool]]:
    """The four reruns; the decoys (tests_vs_decoys) are checked on their own."""
    return {name: (run["outcome"], run["as_expected"]) for name, run in evidence["runs"].items()
            if name in RUN_NAMES}


def decoys_caught(evidence: dict) -> dict[str, bool]:
    return {d["name"]: d["caught"] for d in evidence["runs"]["tests_vs_decoys"]["decoys"]}


ALL_RIGHT = {
    "submitted": ("passed", True),
    "tests_vs_original": ("failed", True),
    "tests_vs_solution": ("passed", True),
    "reference_vs_submitted": ("passed", True),
}


# --- honest work -------------------------------------------------------------------------


def test_the_ideal_submission(ideal_evidence):
    evidence = ideal_evidence
    assert evidence["archive"]["accepted"] is True
    assert all(evidence["artifacts"][name] for name in ("red.log", "prompt.txt", "model.md",
                                                        "model_allowed.at", "green.log", "refuse.md"))
    assert evidence["red_log"]["genuine"] is True, evidence["red_log"]
    assert evidence["timeline"] == {**evidence["timeline"], "ok": True, "problems": []}
    assert outcomes(evidence) == ALL_RIGHT
    assert evidence["diff"]["flags"] == []
    assert [f["path"] for f in evidence["diff"]["files"]] == ["test_invoices.py", "invoices.py"]
    assert evidence["refusal"] == {"present": True, "specific": True, "mentions": ["dropping rows"]}
    assert evidence["original_run"]["failing_ids"] == ["test_invoices.py::test_charges_only"]
    # The red log is the original tree's own failure, line for line; the run's log stays out of the evidence.
    assert "the failure of test_charges_only matches the original run" in evidence["red_log"]["signals"]
    assert "log" not in evidence["original_run"]


def test_the_paper_patch_under_the_none_policy_asks_for_no_model_step(grade, tmp_path):
    # red, the fix, green and a refusal: no prompt, no reply, no stamp, as a packet without a model step asks
    files = corpus.honest_files(**{f"artifacts/{n}": None for n in ("prompt.txt", "model.md", "model_allowed.at")})
    path = corpus.zip_with_times(tmp_path / "s.zip", files)
    none = grade(path, model=ModelRecord(policy="none", configured=False))
    assert outcomes(none) == ALL_RIGHT
    assert none["timeline"]["problems"] == [] and none["timeline"]["ok"] is True
    assert [n for n, found in none["artifacts"].items() if found is None] == ["prompt.txt", "model.md",
                                                                             "model_allowed.at"]
    assert none["artifacts"]["red.log"] is none["artifacts"]["green.log"] is True
    # The same files where the packet asks for the model step: the stamp is missing.
    provided = grade(path, model=ModelRecord(policy="provided", configured=True))
    assert "green.log is there but model_allowed.at is missing or empty" in provided["timeline"]["problems"]
    assert provided["artifacts"]["model_allowed.at"] is False


def test_the_ideal_test_rejects_the_decoy_it_can_see(ideal_evidence):
    evidence = ideal_evidence
    decoys = evidence["runs"]["tests_vs_decoys"]
    # The ideal test asserts the sample's total: dropping the refund row gives 1500 and is caught; abs() of
    # the total and a patch for the sample's own numbers both give 1300 there, so that test cannot see them.
    assert decoys_caught(evidence) == {"abs-of-the-total": False, "drop-refund-rows": True,
                                       "special-case-the-sample": False}
    assert (decoys["outcome"], decoys["as_expected"], decoys["caught"], decoys["total"]) == ("failed", True, 1, 3)
    assert decoys["notes"] == ["the candidate's tests reject 1 of the 3 wrong fixes"]
    caught = next(d for d in decoys["decoys"] if d["caught"])
    assert "assert 1500 == 1300" in caught["log"]


def test_a_test_of_refunds_alone_rejects_every_decoy(grade, tmp_path):
    test = corpus.HONEST_TEST + (b"\n\ndef test_refunds_alone_sum_to_a_negative_total(tmp_path):\n"
                                 b"    only = tmp_path / 'refunds.csv'\n    only.write_text('cents\\n-100\\n-250\\n')\n"
                                 b"    assert invoices.total(only) == -350\n")
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files(**{"test_invoices.py": test})))
    assert outcomes(evidence) == ALL_RIGHT
    assert set(decoys_caught(evidence).values()) == {True}


def test_a_test_that_only_checks_the_file_changed_rejects_no_decoy(grade, tmp_path):
    digest = hashlib.sha256(sample_spec().fixture["invoices.py"]).hexdigest()
    test = (b"import hashlib\nfrom pathlib import Path\n\n\ndef test_refunds_are_fixed():\n"
            b"    code = (Path(__file__).parent / 'invoices.py').read_bytes()\n"
            b"    assert hashlib.sha256(code).hexdigest() != '" + digest.encode() + b"'\n")
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files(**{"test_invoices.py": test})))
    # It fails on the original and passes on the solution, so those two reruns alone would vouch for it.
    assert outcomes(evidence)["tests_vs_original"] == ("failed", True)
    assert outcomes(evidence)["tests_vs_solution"] == ("passed", True)
    decoys = evidence["runs"]["tests_vs_decoys"]
    assert set(decoys_caught(evidence).values()) == {False}
    assert (decoys["outcome"], decoys["as_expected"], decoys["caught"]) == ("passed", False, 0)


def test_grading_twice_gives_the_same_evidence(grade, ideal_evidence, tmp_path):
    path = corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files())

    def stable(evidence):
        for run in evidence["runs"].values():
            run.pop("duration_s"), run.pop("log"), run.pop("notes")
            run.pop("hidden_seed", None)  # drawn afresh for every grading: an honest fix passes whatever it is
            for one in [run, *run.get("decoys", ())]:  # canary names are drawn afresh for every grading
                if "integrity" in one:
                    one["integrity"]["canaries"] = len(one["integrity"]["canaries"])
                one.pop("log", None), one.pop("notes", None)
        evidence["original_run"].pop("duration_s")
        return evidence

    assert stable(ideal_evidence) == stable(grade(path))


def test_out_of_time_after_a_clean_red_run(grade, tmp_path):
    spec = sample_spec()
    files = corpus.honest_files(**{"invoices.py": spec.fixture["invoices.py"], "artifacts/green.log": None})
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    assert evidence["red_log"]["genuine"] is True
    assert evidence["timeline"]["ok"] is True
    assert outcomes(evidence) == {
        "submitted": ("failed", False),
        "tests_vs_original": ("failed", True),   # the new test catches the bug
        "tests_vs_solution": ("passed", True),   # and is right
        "reference_vs_submitted": ("failed", False),
    }
    assert evidence["artifacts"]["green.log"] is False


def test_windows_line_endings_and_paths(grade, tmp_path):
    from datetime import datetime

    def crlf(data: bytes) -> bytes:
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")

    files = {name: crlf(data) for name, data in corpus.honest_files().items()}
    files["artifacts/red.log"] = crlf(corpus.red_log("pytest9_orig_default.log")
                                      .replace(b"rootdir: /", b"rootdir: C:\\Users\\ada\\"))
    evidence = grade(windows_zip(tmp_path / "s.zip", files, datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)))
    assert evidence["red_log"]["genuine"] is True, evidence["red_log"]
    assert outcomes(evidence) == ALL_RIGHT
    assert not any(flag.startswith("protected") for flag in evidence["diff"]["flags"])


def test_a_macos_finder_zip(grade, tmp_path):
    evidence = grade(finder_zip(tmp_path / "s.zip", corpus.honest_files(), folder="refund-sum"))
    assert evidence["archive"]["accepted"] is True
    assert evidence["archive"]["stripped_prefix"] == "refund-sum"
    assert any(p.startswith("__MACOSX/") for p in evidence["archive"]["skipped"])
    assert "invoices.py" in evidence["archive"]["kept"]
    assert outcomes(evidence) == ALL_RIGHT


def test_a_red_test_written_first_is_honest(grade, tmp_path):
    files = corpus.honest_files(**{
        "artifacts/red.log": corpus.red_log("pytest9_cand_q.log"),
        "tests/test_refunds.py": b"import invoices\n\n\nclass TestRefunds:\n    def test_negative_cents_lower_the_total(self, tmp_path):\n"
          b"        f = tmp_path / 'c.csv'\n        f.write_text('cents\\n100\\n-40\\n')\n"
          b"        assert invoices.total(f) == 60\n",
    })
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    # The candidate's own failing tests are named in the log; they need not match the original run.
    assert evidence["red_log"]["failed"] is True


# --- dishonest work ------------------------------------------------------------------------


def test_a_hand_written_red_log_is_not_genuine(grade, tmp_path):
    forged = b"FAILED test_invoices.py - total was wrong\nrefunds counted twice\n"
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files(**{"artifacts/red.log": forged})))
    assert evidence["red_log"]["present"] is True
    assert evidence["red_log"]["genuine"] is False
    assert evidence["red_log"]["missing"]


# Typed to look like pytest, every section there and the header centred, for the
# test the ideal submission really has; but pytest prints "+ where" lines under
# an assertion on a call, and the candidate's tests over the original code do.
HAND_TYPED_RED = b"""F                                                                        [100%]
=================================== FAILURES ===================================
________________ test_refund_rows_subtract_their_negative_cents ________________

    def test_refund_rows_subtract_their_negative_cents():
        # 1000 + 500 + (-200): a refund lowers the total.
>       assert invoices.total(FIXTURE) == 1300
E       AssertionError: assert 1700 == 1300

test_invoices.py:10: AssertionError
=========================== short test summary info ============================
FAILED test_invoices.py::test_refund_rows_subtract_their_negative_cents - AssertionError: assert 1700 == 1300
1 failed in 0.02s
"""


def test_a_hand_typed_red_log_with_every_section_is_not_genuine(grade, tmp_path):
    files = corpus.honest_files(**{"artifacts/red.log": HAND_TYPED_RED})
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    red = evidence["red_log"]
    assert red["failed"] is True and red["genuine"] is False
    assert {"progress line with F", "FAILURES section", "short test summary info"} <= set(red["signals"])
    finding = next(m for m in red["missing"] if m.startswith("lines a real run prints:"))
    assert finding.startswith("lines a real run prints: under the same failing line "
                              "`> assert invoices.total(FIXTURE) == 1300` the tests_vs_original run prints "
                              "`E + where 1700 = <function total at"), finding
    assert "red.log's error (line 8 `E AssertionError: assert 1700 == 1300`) has no `+ where` lines" in finding
    assert outcomes(evidence) == ALL_RIGHT  # the work itself is right; only the log is typed


def test_the_original_runs_cache_keeps_its_log_and_ignores_files_without_one(tmp_path):
    from grading.engine.core import OriginalRunCache

    spec = sample_spec()
    cache = OriginalRunCache(tmp_path)
    cache.put(spec, {"outcome": "failed", "failing_ids": [], "duration_s": 0.1})  # the old format: no log
    assert cache.get(spec) is None
    cache.put(spec, {"outcome": "failed", "failing_ids": [], "duration_s": 0.1, "log": "F\n1 failed in 0.1s\n"})
    assert cache.get(spec) is None  # the format before the second run: no steady failures
    cache.put(spec, {"outcome": "failed", "failing_ids": [], "duration_s": 0.1, "log": "F\n1 failed in 0.1s\n",
                     "steady": ["test_charges_only"]})
    assert cache.get(spec)["log"] == "F\n1 failed in 0.1s\n"
    (name,) = [p.name for p in tmp_path.iterdir()]
    assert name.startswith("refund-sum-v1-") and name.endswith("-f3.json")  # a new name: old files are not read


def test_a_red_log_from_another_project_is_not_genuine(grade, tmp_path):
    other = corpus.red_log("pytest9_other_q.log")
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files(**{"artifacts/red.log": other})))
    assert evidence["red_log"]["failed"] is True
    assert evidence["red_log"]["genuine"] is False


def test_green_older_than_red(grade, tmp_path):
    minutes = {"artifacts/green.log": 0, "artifacts/red.log": 5, "artifacts/model_allowed.at": 6}
    files = corpus.honest_files(**{"artifacts/model_allowed.at":
                                   str(corpus.T0.timestamp() + 6 * 60).encode()})
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files, minutes))
    assert evidence["timeline"]["ok"] is False
    assert any("green" in p for p in evidence["timeline"]["problems"])


def test_stamp_before_red(grade, tmp_path):
    files = corpus.honest_files(**{"artifacts/model_allowed.at": str(corpus.T0.timestamp() - 3600).encode()})
    minutes = {"artifacts/model_allowed.at": -60}
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files, minutes))
    assert evidence["timeline"]["ok"] is False
    assert any("stamp" in p.lower() for p in evidence["timeline"]["problems"])


def test_the_overfit_test_that_keeps_abs(grade, tmp_path):
    spec = sample_spec()
    files = corpus.honest_files(**{"invoices.py": spec.fixture["invoices.py"], "test_invoices.py": corpus.OVERFIT_TEST})
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    assert outcomes(evidence) == {
        "submitted": ("passed", True),             # green, and wrong
        "tests_vs_original": ("passed", False),    # the test does not catch the bug
        "tests_vs_solution": ("failed", False),    # and fails on correct code
        "reference_vs_submitted": ("failed", False),
    }


def test_dropping_the_refund_row_from_the_csv(grade, tmp_path):
    spec = sample_spec()
    files = corpus.honest_files(**{
        "invoices.py": spec.fixture["invoices.py"],
        "test_invoices.py": spec.fixture["test_invoices.py"],
        "sample.csv": b"cents\n1000\n500\n",
    })
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    assert "protected_changed:sample.csv" in evidence["diff"]["flags"]
    assert evidence["runs"]["submitted"]["outcome"] == "passed"
    # The packet's own CSV is restored for the check of the fix.
    assert evidence["runs"]["reference_vs_submitted"]["outcome"] == "failed"


def test_an_eval_fix_is_flagged(grade, tmp_path):
    spec = sample_spec()
    code = spec.solution["invoices.py"].replace(b'int(row["cents"])', b'eval(row["cents"])')
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files(**{"invoices.py": code})))
    assert "forbidden:eval" in evidence["diff"]["flags"]
    assert evidence["runs"]["reference_vs_submitted"]["outcome"] == "passed"  # right sum, unsafe patch


def test_the_essay_without_red_log_or_test(grade, tmp_path):
    spec = sample_spec()
    files = {
        **spec.fixture,
        "artifacts/notes.md": b"# On agent loops\n\n" + b"Models are changing how we work. " * 200,
        "artifacts/refuse.md": b"I would be careful.\n",
    }
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    assert evidence["red_log"]["present"] is False
    assert evidence["refusal"]["specific"] is False
    assert evidence["diff"]["files"] == []


def test_a_conftest_that_rewrites_reports_cannot_pass_the_reference_check(grade, tmp_path):
    spec = sample_spec()
    cheat = b'''import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
'''
    files = corpus.honest_files(**{"invoices.py": spec.fixture["invoices.py"], "conftest.py": cheat})
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    assert "conftest_hooks:conftest.py" in evidence["diff"]["flags"]
    assert evidence["runs"]["reference_vs_submitted"]["outcome"] == "failed"


# --- hostile archives ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entries, symlinks, words",
    [
        ({"../escape.py": b"x"}, None, "leaves its folder"),
        ({"/etc/cron.d/x": b"x"}, None, "absolute path"),
        ({"ok.py": b"x"}, {"link": "/etc/shadow"}, "symbolic link"),
    ],
)
def test_hostile_archives_are_refused_with_a_reason_and_nothing_escapes(grade, tmp_path, entries, symlinks, words):
    evidence = grade(make_zip(tmp_path / "s.zip", entries, symlinks=symlinks))
    assert evidence["archive"]["accepted"] is False
    assert words in evidence["archive"]["reason"]
    assert all(run["outcome"] == "not_run" for run in evidence["runs"].values())
    assert not (tmp_path.parent / "escape.py").exists()


# --- hostile code ----------------------------------------------------------------------------

MARKERS = [str(ROOT / "ESCAPED-MARKER"), "/tmp/ESCAPED-MARKER", "/root/ESCAPED-MARKER", "/var/tmp/ESCAPED-MARKER"]
SNOOP = f"TARGETS = {MARKERS!r}\n".encode() + b'''import os, socket, pathlib

def test_snoop():
    found = []
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=2); found.append("NET" + "-OPEN")
    except OSError:
        pass
    try:
        found.append("SHADOW" + ":" + open("/etc/shadow").read()[:20])
    except OSError:
        pass
    env = dict(os.environ)
    try:
        env["pid1"] = open("/proc/1/environ", "rb").read().decode(errors="replace")
    except OSError:
        pass
    print("ENV-DUMP", env)
    for target in TARGETS + [str(pathlib.Path.home() / "ESCAPED-MARKER")]:
        try:
            pathlib.Path(target).write_text("x")
        except OSError:
            pass
    # Fail on purpose, so pytest shows the captured output in the log.
    assert False, "FOUND " + repr(found)
'''


def test_hostile_code_reaches_no_network_secret_or_host_file(grade, tmp_path, monkeypatch):
    monkeypatch.setenv("TAKEHOME_CANARY_SECRET", "canary-7f3a9c")
    files = corpus.honest_files(**{"test_snoop.py": SNOOP})
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    log = evidence["runs"]["submitted"]["log"]
    assert "ENV-DUMP" in log and "FOUND []" in log, log  # it ran, and found nothing
    assert "canary-7f3a9c" not in json.dumps(evidence)
    for marker in MARKERS:  # writes landed, if anywhere, in the sandbox's own tmpfs
        assert not Path(marker).exists()


def test_an_endless_loop_ends_at_the_timeout_and_grading_goes_on(grade, grading_sandbox, tmp_path):
    quick = replace(grading_sandbox, limits=replace(grading_sandbox.limits, wall_s=4, cpu_s=60))
    spec = sample_spec()
    loop = spec.solution["invoices.py"].replace(b"    n = 0\n", b"    while True:\n        pass\n")
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files(**{"invoices.py": loop})), quick)
    assert evidence["runs"]["submitted"]["outcome"] == "timeout"
    # Across the boundary each call has its own clock: the hung call fails its test, with the reason.
    # (On a loaded machine the whole run may reach its own wall clock first: never a pass either way.)
    reference = evidence["runs"]["reference_vs_submitted"]
    assert reference["outcome"] in ("failed", "timeout")
    if reference["outcome"] == "failed":
        assert "did not return within" in reference["log"]
    assert evidence["runs"]["tests_vs_solution"]["outcome"] == "passed"


def test_a_fork_bomb_is_contained(grade, grading_sandbox, tmp_path):
    # why 2 s: every candidate test run of the grading forks until its wall clock; contained is contained
    # at any length, and each second more was about two CPU-seconds of the suite's.
    quick = replace(grading_sandbox, limits=replace(grading_sandbox.limits, wall_s=2))
    bomb = b"import os\n\ndef test_bomb():\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n"
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files(**{"test_bomb.py": bomb})), quick)
    assert evidence["runs"]["submitted"]["outcome"] in ("timeout", "killed", "failed", "error")
    assert evidence["runs"]["tests_vs_solution"]["as_expected"] is False


# --- the command's JSON contract ------------------------------------------------------------

CONTRACT = {
    "archive": {"accepted", "reason", "kept", "skipped"},
    "artifacts": {"red.log", "prompt.txt", "model.md", "model_allowed.at", "green.log", "refuse.md", "notes.md"},
    "red_log": {"present", "failed", "genuine", "signals"},
    "timeline": {"ok", "events", "problems"},
    "runs": {"submitted", "tests_vs_original", "tests_vs_solution", "reference_vs_submitted"},
    "diff": {"files", "flags"},
    "refusal": {"present", "specific", "mentions"},
}
RUN_FIELDS = {"outcome", "passed", "failed", "errors", "duration_s", "log"}


def grade_zip_command(path: Path, packet: str = "refund-sum", *extra: str) -> subprocess.CompletedProcess:
    from conftest import database_url

    return subprocess.run(
        [sys.executable, "manage.py", "grade_zip", str(path), "--packet", packet, *extra],
        cwd=ROOT, env={**os.environ, "DEBUG": "true", "DATABASE_URL": database_url()},
        capture_output=True, text=True, timeout=300,
    )


def grade_zip_here(path: Path, packet: str = "refund-sum", *extra: str) -> dict:
    """What ``grade_zip`` prints, the command run in this process (call_command parses the same arguments
    manage.py would pass it; its CommandError is manage.py's exit 1).

    why in this process: a process of its own costs a Django start more (about a CPU-second) and proves
    nothing the output does not; test_grade_zip_prints_the_evidence_as_json and
    test_grade_zip_exits_0_on_a_refused_archive run the real command. The caller's test needs the database
    (the packet) and use_test_sandbox (the tests' sandbox folders, as the command builds its sandbox).
    """
    from django.core.management import call_command

    out = io.StringIO()
    call_command("grade_zip", str(path), "--packet", packet, *extra, stdout=out)
    return json.loads(out.getvalue())


def check_contract(evidence: dict) -> None:
    for key, fields in CONTRACT.items():
        assert fields <= set(evidence[key]), key
    for run in evidence["runs"].values():
        assert RUN_FIELDS <= set(run)


# why runner_dir, not grading_sandbox (here and for the refused archive below): the command builds its own
# sandbox in its own process, and a warm one started in this process would wait unused.
@pytest.mark.django_db(transaction=True)
def test_grade_zip_prints_the_evidence_as_json(sample_packet, tmp_path, runner_dir):
    result = grade_zip_command(corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    assert result.returncode == 0, result.stderr
    evidence = json.loads(result.stdout)
    check_contract(evidence)
    assert outcomes(evidence) == ALL_RIGHT
    # No server here: the version's policy, no exchange, and prompt.txt and model.md have nothing to be compared with.
    assert evidence["model"]["exchanges"] == [] and evidence["model"]["policy"] == "own"
    assert evidence["model"]["prompt_matches"]["result"] == evidence["model"]["reply_matches"]["result"] == "absent"


def shape(value):
    """The keys of every object in ``value``, recursively, with lists reduced to their first item's shape."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


@pytest.mark.django_db
@pytest.mark.usefixtures("use_test_sandbox")
def test_grade_zip_gives_a_package_project_the_same_evidence_shape(sample_packet, tmp_path):
    from takehome.actions import do_load_sample_packet
    from takehome.tests.factories import mark_checked

    packet, _ = do_load_sample_packet(send_check=False, folder=corpus.BUSINESS_DAYS.spec_dir())
    mark_checked(packet.latest_version())
    evidence = grade_zip_here(corpus.zip_with_times(tmp_path / "b.zip", corpus.honest_files(corpus.BUSINESS_DAYS),
                                                    packet=corpus.BUSINESS_DAYS), "business-days")
    reference = grade_zip_here(corpus.zip_with_times(tmp_path / "r.zip", corpus.honest_files()))
    check_contract(evidence)
    assert outcomes(evidence) == outcomes(reference) == ALL_RIGHT
    assert shape(evidence) == shape(reference)
    assert evidence["runs"]["tests_vs_decoys"]["caught"] == 3 and evidence["red_log"]["genuine"]
    assert "src/payterms/terms.py" in [f["path"] for f in evidence["diff"]["files"]]


@pytest.mark.django_db(transaction=True)
def test_grade_zip_exits_0_on_a_refused_archive(sample_packet, tmp_path, runner_dir):
    bad = tmp_path / "notes.zip"
    bad.write_text("this is not a zip")
    result = grade_zip_command(bad)
    assert result.returncode == 0, result.stderr
    evidence = json.loads(result.stdout)
    check_contract(evidence)
    assert evidence["archive"]["accepted"] is False and "not a zip" in evidence["archive"]["reason"]


def test_the_downloads_own_gate_and_readme_are_left_out(grade, tmp_path):
    files = corpus.honest_files(**{"gate.py": b'TOKEN = "secret-link-token"\n', "README.txt": b"How to start\n"})
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    assert {"gate.py", "README.txt"} <= set(evidence["archive"]["skipped"])
    assert "gate.py" not in evidence["archive"]["kept"]
    assert evidence["diff"]["flags"] == []
    assert "secret-link-token" not in json.dumps(evidence)


# --- dishonest code that tries to pass the reference check falsely ---------------------------

CHEAT_PLUGIN = b'''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
'''


@pytest.mark.parametrize("config", [
    {"pytest.ini": b"[pytest]\naddopts = -p cheat\n"},
    {"pyproject.toml": b"[tool.pytest.ini_options]\naddopts = '-p cheat'\n"},
    {"setup.cfg": b"[tool:pytest]\naddopts = -p cheat\n"},
], ids=["pytest.ini", "pyproject.toml", "setup.cfg"])
def test_a_candidate_pytest_config_cannot_load_a_plugin_into_the_reference_check(grade, tmp_path, config):
    spec = sample_spec()
    files = corpus.honest_files(**{"invoices.py": spec.fixture["invoices.py"], "cheat.py": CHEAT_PLUGIN, **config})
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    path = next(iter(config))
    assert f"config_changed:{path}" in evidence["diff"]["flags"]
    assert "tampering:cheat.py" in evidence["diff"]["flags"]
    assert evidence["runs"]["reference_vs_submitted"]["outcome"] == "failed"
    assert evidence["runs"]["reference_vs_submitted"]["as_expected"] is False


def test_production_code_that_exits_0_on_import_is_not_a_pass(grade, tmp_path):
    spec = sample_spec()
    code = b"import os\nos._exit(0)\n" + spec.fixture["invoices.py"]
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files(**{"invoices.py": code})))
    ref = evidence["runs"]["reference_vs_submitted"]
    assert ref["outcome"] != "passed" and ref["as_expected"] is False, ref
    assert "tampering:invoices.py" in evidence["diff"]["flags"]
    tampering = next(f for f in evidence["diff"]["files"] if f["path"] == "invoices.py")["tampering"]
    assert "uses os._exit" in tampering


def test_a_pytest_py_in_the_upload_is_flagged_and_cannot_pass(grade, tmp_path):
    spec = sample_spec()
    files = corpus.honest_files(**{"invoices.py": spec.fixture["invoices.py"],
                                   "pytest.py": b"print('2 passed in 0.01s')\nraise SystemExit(0)\n"})
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    assert "shadowing:pytest.py" in evidence["diff"]["flags"]
    assert evidence["runs"]["reference_vs_submitted"]["outcome"] == "failed"


def test_the_reference_check_needs_every_packet_test_reported_as_passed():
    from grading.engine.core import check_reference_run

    def run(tests):
        return {"outcome": "passed", "as_expected": True, "notes": [],
                "tests": [{"nodeid": n, "outcome": o} for n, o in tests]}

    expected = {"test_ref.py::test_a", "test_ref.py::TestB::test_b"}
    honest = check_reference_run(run([("test_ref.py::test_a[1]", "passed"), ("test_ref.py::TestB::test_b", "passed")]),
                                 expected)
    assert (honest["outcome"], honest["as_expected"], honest["missing_reference_tests"]) == ("passed", True, [])
    deselected = check_reference_run(run([("test_ref.py::test_a", "passed")]), expected)
    assert deselected["outcome"] == "error" and deselected["as_expected"] is False
    assert deselected["missing_reference_tests"] == ["test_ref.py::TestB::test_b"]
    assert check_reference_run(run([]), expected)["outcome"] == "error"  # no report at all


def test_hostile_production_code_is_flagged_and_honest_code_is_not(tmp_path):
    from grading.engine.checks.diff import diff_trees

    spec = sample_spec()
    tree = tmp_path / "tree"
    cases = {
        "patch.py": b"import _pytest.reports\n_pytest.reports.TestReport.outcome = 'passed'\n",
        "mods.py": b"import sys\nsys.modules['invoices'] = None\n",
        "blt.py": b"import builtins\nbuiltins.print = None\n",
        "late.py": b"import atexit\natexit.register(lambda: None)\n",
        "plug.py": b"pytest_plugins = ['cheat']\n",
        "sitecustomize.py": b"x = 1\n",
        "evil.pth": b"import os\n",
        "x-1.0.dist-info/entry_points.txt": b"[pytest11]\nx = x\n",
        # Test files are scanned as well: a test module runs in pytest's interpreter.
        "test_runner.py": b"import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n",
        "tests/test_mods.py": b"import pytest\nimport sys\n\ndef test_x():\n    assert sys.modules\n",
    }
    honest = {"invoices.py": spec.solution["invoices.py"], "helpers.py": b"import csv\n\ndef f():\n    return 1\n",
              "test_invoices.py": b"import pytest\nfrom pytest import raises\nimport sys\n\n"
                                  b"def test_x():\n    assert sys.version_info\n",
              "tests/test_broken.py": b"import pytest\n\ndef test_(:\n"}
    write = {**spec.fixture, **honest, **cases, "csv.py": b"x = 1\n", "_pytest/__init__.py": b"",
             "pytest.ini": b"[pytest]\naddopts = -x\n"}
    from grading.engine.core import write_tree

    write_tree(write, tree)
    flags = diff_trees(spec.fixture, tree, protected_paths=spec.protected_paths,
                       forbidden_patterns=spec.forbidden_patterns).flags
    assert {f"tampering:{p}" for p in cases} <= set(flags), flags
    assert {"shadowing:csv.py", "shadowing:_pytest/__init__.py", "config_changed:pytest.ini"} <= set(flags)
    assert not [f for f in flags if f.split(":", 1)[1] in honest and not f.startswith("added:")], flags


# --- evidence a candidate cannot make unstorable ---------------------------------------------


def test_nul_and_bad_bytes_in_candidate_output_leave_readable_storable_evidence(grade, tmp_path):
    noisy = (b"import sys\n\ndef test_noise():\n"
             b"    sys.stdout.write('before\\x00after \\x1b[31mred\\x1b[0m ')\n"
             b"    sys.stdout.buffer.write(b'\\xff\\xfe\\xed\\xa0\\x80 bytes')\n"
             b"    assert False\n")
    files = corpus.honest_files(**{"test_noise.py": noisy, "artifacts/notes.md": b"nul\x00here \xed\xa0\x80 \xff"})
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    text = json.dumps(evidence)  # ensure_ascii: a NUL or a lone surrogate shows as an escape
    assert "\\u0000" not in text
    assert not __import__("re").search(r"\\ud[89a-f][0-9a-f]{2}", text)
    log = evidence["runs"]["submitted"]["log"]
    assert "before\ufffdafter" in log, log
    assert evidence["texts"]["notes.md"].startswith("nul\ufffdhere")


def test_clean_evidence_replaces_nul_and_lone_surrogates_everywhere():
    from grading.engine.core import clean_evidence

    dirty = {"a\x00": ["x\x00y", {"k": "\ud800z"}], "n": 1, "b": None, "t": True}
    assert clean_evidence(dirty) == {"a\ufffd": ["x\ufffdy", {"k": "\ufffdz"}], "n": 1, "b": None, "t": True}
    json.dumps(clean_evidence(dirty)).encode("utf-8")


def test_a_tree_of_many_tiny_files_grades_like_any_other(grade, tmp_path):
    # Every tree is written and copied about five times (how long that takes is bench/grading.py's to measure).
    files = corpus.honest_files(**{f"pkg{i % 40}/m{i}.txt": b"x\n" for i in range(1000)})
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", files))
    assert evidence["archive"]["accepted"] is True
    assert outcomes(evidence) == ALL_RIGHT


def test_a_file_named_artifacts_is_graded_not_crashed(grade, tmp_path):
    files = {k: v for k, v in corpus.honest_files().items() if not k.startswith("artifacts/")}
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", {**files, "artifacts": b"not a folder\n"}))
    assert evidence["archive"]["accepted"] is True
    assert evidence["artifacts"]["red.log"] is False


# --- a red log of other code, or of a part of a run (step 12, item 10) -------------------------


def pytest_log(tmp_path: Path, files: dict[str, bytes]) -> bytes:
    """What `python -m pytest -q` prints over ``files`` on this machine: a real run, as a candidate makes one."""
    folder = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=folder, env=env,
                          capture_output=True, timeout=120)
    assert done.returncode == 1, done.stdout.decode()
    return done.stdout


BROKEN = b"def total(path):\n    return 0\n"


@pytest.mark.parametrize("test", ["the packet's", "the candidate's own"])
def test_a_red_log_of_code_broken_on_purpose_is_not_genuine(grade, spec, tmp_path, test):
    # The original tree's run prints the same values every time: a red run of it cannot print others.
    tests = {} if test == "the packet's" else {"test_invoices.py": corpus.HONEST_TEST}
    honest = pytest_log(tmp_path, {**spec.fixture, **tests})
    broken = pytest_log(tmp_path, {**spec.fixture, **tests, "invoices.py": BROKEN})
    assert b"assert 0 == 1" in broken
    for log, genuine in ((honest, True), (broken, False)):
        evidence = grade(corpus.zip_with_times(tmp_path / f"s{genuine}.zip",
                                               corpus.honest_files(**{"artifacts/red.log": log})))
        red = evidence["red_log"]
        assert red["failed"] is True and red["genuine"] is genuine, red
    values = [m for m in red["missing"] if m.startswith("values a real run prints:")]
    assert values and "E AssertionError: assert 0 == 1" in values[0] and "assert 1700 == 1" in values[0], red
    assert "every time it runs" in values[0]


def test_an_excerpt_of_a_real_log_without_its_start_is_not_genuine(grade, spec, tmp_path):
    log = pytest_log(tmp_path, spec.fixture)
    tail = b"\n".join(log.rstrip().split(b"\n")[-3:]) + b"\n"  # the summary's header, its FAILED line, the closing line
    assert tail.startswith(b"=") and b"1 failed in" in tail
    evidence = grade(corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files(**{"artifacts/red.log": tail})))
    red = evidence["red_log"]
    assert red["failed"] is True and red["genuine"] is False, red
    assert any(m.startswith("the run's start:") for m in red["missing"]), red


# --- canaries in an honest layout (step 12, item 9) -------------------------------------------


def test_an_honest_layout_that_leaves_test_files_out_grades_the_same_every_time(grade, tmp_path):
    # Five old test files the candidate's configuration leaves out (they need a library not
    # installed), and a -k that deselects every test named "network": six files a canary may
    # go into, with names drawn from words such as "network". Whatever the draw, the same verdicts.
    legacy = {f"legacy/test_old_network_{n}.py": b"import a_library_not_installed_here\n\n\n"
                                                 b"def test_network_rows_of_old():\n    pass\n" for n in range(5)}
    files = corpus.honest_files(**legacy, **{"pytest.ini": b'[pytest]\nnorecursedirs = legacy\naddopts = -k "not network"\n'})
    path = corpus.zip_with_times(tmp_path / "s.zip", files)
    seen = []
    for _ in range(2):
        evidence = grade(path)
        assert outcomes(evidence) == ALL_RIGHT, {n: r["notes"] for n, r in evidence["runs"].items()}
        for name in ("submitted", "tests_vs_original", "tests_vs_solution"):
            record = evidence["runs"][name]["integrity"]
            assert record["unconfirmed"] == [] and record["tampered"] == [], (name, record)
            assert record["canaries_failed"] == 3, (name, record)
        seen.append({name: (run["outcome"], run["passed"], run["failed"]) for name, run in evidence["runs"].items()})
    assert seen[0] == seen[1]


# --- a server capture is vouched for only when its run held up (step 12, item 3) ------------------


@pytest.mark.parametrize("integrity, by_construction", [
    ({"canaries": ["t.py::test_a_b", "t.py::test_c_d", "t.py::test_e_f"], "canaries_failed": 3, "tampered": [],
      "unconfirmed": []}, True),
    ({"canaries": ["t.py::test_a_b"], "canaries_failed": 0, "tampered": ["test_charges_only (call): the test raised "
      "an error, but pytest logged it as passed"], "unconfirmed": []}, False),
    ({"canaries": ["t.py::test_a_b"], "canaries_failed": 0, "tampered": [],
      "unconfirmed": ["the witness plugin never started although pytest ran tests"]}, False),
    ({}, False),  # a capture from before captures were judged
], ids=["held-up", "tampered", "unconfirmed", "not-judged"])
def test_a_server_capture_is_genuine_by_construction_only_when_its_run_held_up(grading_sandbox, spec, tmp_path,
                                                                               integrity, by_construction, original_runs):
    from grading.engine.checks.timeline import Receipt

    log = b"=== short test summary info ===\nFAILED test_invoices.py::test_charges_only - assert 1700 == 1500\n" \
          b"1 failed in 0.01s\n"  # what a hosted red capture stored: analysed alone, it is no log
    files = corpus.honest_files(**{"artifacts/red.log": log})
    at = corpus.T0
    receipts = [Receipt(step="red", at=at, log_text=log.decode(), id=7, captured_by="server", integrity=integrity,
                        tree_hashes={"invoices.py": hashlib.sha256(spec.fixture["invoices.py"]).hexdigest()})]
    evidence = grade_archive(corpus.zip_with_times(tmp_path / "s.zip", files), spec, grading_sandbox,
                             receipts=receipts, options=GradeOptions(cache_dir=original_runs))
    red = evidence["red_log"]
    assert red["genuine"] is by_construction, red
    assert red["captured_by"] == ("server" if by_construction else "candidate")
    if not by_construction:
        assert any(m.startswith("the server captured this log (receipt 7) but cannot vouch for it") for m in red["missing"])


# --- the same through the command (step 12, as `grade_zip` prints it) ------------------------------------------


@pytest.mark.django_db
@pytest.mark.usefixtures("use_test_sandbox")
def test_grade_zip_prints_what_the_step_12_checks_found(sample_packet, tmp_path):
    """The command prints the engine's evidence whole (json.dumps of grade_archive's): one grading shows the
    checks' findings reach its output. why one: items 9 and 10 (a layout that leaves files out, a log of code
    broken on purpose or cut short) are the same function on the same zips, proven above in this process."""
    from .test_own_code_ran import BUGGY, RUNTEST

    # item 4: a test module that replaces pytest's runner passes over the bug without running
    patched = corpus.honest_files(**{"invoices.py": BUGGY, "test_invoices.py": RUNTEST + b"\n\n" + corpus.HONEST_TEST})
    evidence = grade_zip_here(corpus.zip_with_times(tmp_path / "runtest.zip", patched))
    runs = evidence["runs"]
    assert runs["submitted"]["outcome"] == "tampered", runs["submitted"]["notes"]
    assert any("runtest" in t for t in runs["submitted"]["integrity"]["tampered"])
    assert evidence["red_log"]["genuine"] is True and evidence["runs"]["tests_vs_decoys"]["decoys"], evidence["red_log"]
