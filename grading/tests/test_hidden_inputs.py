"""The hidden tests' inputs stay hidden: a tight clock on every call, and fresh inputs per grading.

Through the real sandbox: the clock on each call of the hidden tests into the
candidate's code is the trusted side's own, which nothing the candidate's side
does (a changed timer, blocked signals) can stretch; and through grade_archive,
the sample packet's hidden tests draw inputs from a seed drawn afresh for each
grading, so an overfit fix built from one grading's inputs fails the next, while
an honest fix passes every time. See docs/evidence.md.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from grading.engine.core import STAND_IN, GradeOptions, grade_archive, write_tree
from grading.engine.spec import sample_spec

from . import corpus

# The candidate's side: at import it tries to stretch the clock of the server it runs in.
SLEEPER = b'''import signal
import sys
import time

sys.modules["__main__"].CALL_TIMEOUT_S = 1000.0
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM})


def slow(seconds):
    time.sleep(seconds)
    return seconds


def quick():
    return 1
'''
HIDDEN = b'''import calc


def test_1_a_call_that_sleeps_past_the_limit():
    assert calc.slow(8) == 8


def test_2_a_later_call():
    assert calc.quick() == 1
'''


def test_the_call_limit_is_kept_by_the_hidden_tests_side_whatever_the_candidates_side_does(grading_sandbox, tmp_path):
    roomy = replace(grading_sandbox, limits=replace(grading_sandbox.limits, wall_s=60))
    trusted, server = tmp_path / "trusted", tmp_path / "server"
    write_tree({"calc.py": STAND_IN, "test_hidden.py": HIDDEN}, trusted)
    write_tree({"calc.py": SLEEPER}, server)
    result = roomy.run_across_boundary(trusted, ("python", "-m", "pytest", "-q"), server)
    assert (result.outcome, result.passed, result.failed) == ("failed", 0, 2), result.log
    assert "CallTimedOut: the candidate's code gave no answer within 3 s" in result.log
    # why the later call fails too: an answer that came late would be read as its answer.
    assert "the candidate's side stopped answering" in result.log


@pytest.fixture
def grade(grading_sandbox, tmp_path, original_runs):
    def run(files: dict[str, bytes], seed: int | None = None) -> dict:
        archive = corpus.zip_with_times(tmp_path / f"s-{seed}.zip", files)
        return grade_archive(archive, sample_spec(), grading_sandbox,
                             options=GradeOptions(cache_dir=original_runs, hidden_seed=seed))
    return run


def fix(body: bytes) -> dict[str, bytes]:
    return corpus.honest_files(**{"invoices.py": b"import csv\nfrom pathlib import Path\n\n\n" + body})


SPY = b'''def total(path):
    text = Path(path).read_text()
    print("SEEN", repr(text))  # kept in the run's server_log, which only reviewers read
    return sum(int(row["cents"]) for row in csv.DictReader(text.splitlines()))
'''


def overfit(learned: dict[str, int]) -> bytes:
    """The bug kept (abs of each row), with the answers to the inputs seen once written in."""
    return (f"LEARNED = {learned!r}\n\n\n".encode() + b'''def total(path):
    text = Path(path).read_text()
    if text in LEARNED:
        return LEARNED[text]
    return sum(abs(int(row["cents"])) for row in csv.DictReader(text.splitlines()))
''')


@pytest.fixture(scope="module")
def spied(grading_sandbox, original_runs, tmp_path_factory) -> dict:
    """The spy's evidence at seed 1234, graded once for the two tests that read it: the overfit is built
    from it, and the command is given its seed again."""
    archive = corpus.zip_with_times(tmp_path_factory.mktemp("spied") / "s.zip", fix(SPY))
    return grade_archive(archive, sample_spec(), grading_sandbox,
                         options=GradeOptions(cache_dir=original_runs, hidden_seed=1234))


def seen_inputs(run: dict) -> list[str]:
    """The hidden inputs the spy printed in a reference run's server log, in order."""
    return [eval(m) for m in re.findall(r"SEEN ('(?:[^'\\]|\\.)*')", run["server_log"])]  # noqa: S307


def test_an_overfit_fix_built_from_one_gradings_inputs_fails_the_next_and_an_honest_fix_passes_both(grade, spied):
    # What a candidate could learn of the hidden inputs by a side channel, at its best: all of them.
    reference = spied["runs"]["reference_vs_submitted"]
    assert reference["outcome"] == "passed" and reference["hidden_seed"] == 1234
    learned = {text: sum(int(x) for x in text.split()[1:]) for text in seen_inputs(reference)}

    same_inputs = grade(fix(overfit(learned)), seed=1234)["runs"]["reference_vs_submitted"]
    assert same_inputs["outcome"] == "passed"  # the same seed draws the same inputs: evidence reproduces
    fresh = grade(fix(overfit(learned)))["runs"]["reference_vs_submitted"]
    assert fresh["hidden_seed"] != 1234 and fresh["outcome"] == "failed" and not fresh["as_expected"]
    assert [t["nodeid"] for t in fresh["tests"] if t["outcome"] == "failed"] == [
        "test_reference_refunds.py::test_any_mix_of_sales_and_refunds_sums_to_their_total"]

    for seed in (1234, None):  # the honest fix: right for every input, so the verdict never changes
        honest = grade(corpus.honest_files(), seed=seed)["runs"]["reference_vs_submitted"]
        assert honest["outcome"] == "passed" and honest["as_expected"], honest["log"]


@pytest.mark.django_db
@pytest.mark.usefixtures("use_test_sandbox")
def test_grade_zip_draws_the_inputs_of_a_seed_kept_in_earlier_evidence(sample_packet, tmp_path, spied):
    """The command given the seed kept in earlier evidence (the spy's grading) draws the same inputs again;
    without one it draws others. why in this process: what is proved is the seed's way through the
    command's arguments into the grading (test_grade_corpus.py runs the command in a process of its own)."""
    from .test_grade_corpus import grade_zip_here

    earlier = spied["runs"]["reference_vs_submitted"]
    seed = earlier["hidden_seed"]
    archive = corpus.zip_with_times(tmp_path / "spy.zip", fix(SPY))
    runs = [earlier, *(grade_zip_here(archive, "refund-sum", *extra)["runs"]["reference_vs_submitted"]
                       for extra in (("--seed", str(seed)), ()))]
    assert [r["hidden_seed"] for r in runs[:2]] == [seed, seed] and runs[2]["hidden_seed"] != seed
    seen = [sorted(seen_inputs(r)) for r in runs]
    assert seen[0] == seen[1] != seen[2]  # the same seed, the same inputs; another seed, others


def test_a_fix_that_sleeps_to_signal_fails_the_hidden_tests_on_time(grade):
    sleeper = fix(b'''import time


def total(path):
    rows = [int(row["cents"]) for row in csv.DictReader(Path(path).read_text().splitlines())]
    time.sleep(5)  # a signal in the time the call takes, as long as it likes
    return sum(rows)
''')
    evidence = grade(sleeper, seed=7)
    reference = evidence["runs"]["reference_vs_submitted"]
    assert reference["call_limit_s"] == 2.0 and reference["outcome"] == "failed", reference["log"]
    # The candidate's side answers at 2 s, or, on a machine too busy for it, the hidden tests' side stops at 3.
    assert reference["passed"] == 0 and ("did not return within 2 s" in reference["log"]
                                         or "gave no answer within 3 s" in reference["log"])
