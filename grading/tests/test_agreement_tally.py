"""The agreement tally: kept as reviews are submitted, equal to what the pure figures say of the same marks."""

from __future__ import annotations

import importlib
import random
import threading
from collections import defaultdict
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from grading.actions import do_rebuild_agreement, do_submit_review
from grading.engine.agreement import table_from_pairs
from grading.models import AgreementTally, Cell, Mark
from grading.pages import pair_agreements
from grading.tests.reviewing import make_submission, score
from takehome.models import Packet, PacketVersion


def expected_figures(packet) -> dict[tuple[str, str, str], tuple]:
    """What grading.engine.agreement says of the submitted marks, built in Python from every mark of the packet."""
    marks: dict[int, dict[str, dict[str, bool]]] = defaultdict(dict)
    found = Mark.objects.filter(
        review__submitted_at__isnull=False, review__submission__invitation__packet_version__packet=packet
    ).values_list("review__submission_id", "review__reviewer__username", "cell", "passed")
    for submission_id, name, cell, passed in found:
        marks[submission_id].setdefault(name, {})[cell] = passed
    pairs: dict[tuple[str, str, str], list] = defaultdict(list)
    for by_reviewer in marks.values():
        names = sorted(by_reviewer)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                for cell in Cell.values:
                    if cell in by_reviewer[a] and cell in by_reviewer[b]:
                        pairs[(a, b, cell)].append((by_reviewer[a][cell], by_reviewer[b][cell]))
    return {key: astuple(table_from_pairs(found)) for key, found in pairs.items()}


def astuple(table) -> tuple:
    return table.both_pass, table.a_pass_b_fail, table.a_fail_b_pass, table.both_fail


def shown_figures(packet) -> dict[tuple[str, str, str], tuple]:
    """What the debrief reads from the tally."""
    return {(p.reviewer_a, p.reviewer_b, cell): astuple(p.table)
            for cell, found in pair_agreements(packet).items() for p in found}


def random_marks(rng: random.Random) -> dict[str, bool]:
    return {cell: rng.random() < 0.6 for cell in Cell.values}


@pytest.mark.django_db
@pytest.mark.parametrize("seed", range(4))
def test_tally_equals_the_pure_figures_after_random_reviews(seed, sample_packet, make_reviewer):
    rng = random.Random(seed)
    other = Packet.objects.create(slug="other", title="Other")
    PacketVersion.objects.create(packet=other, number=1, prompt="Fix it.")
    reviewers = [make_reviewer(name) for name in ("rob", "ann", "cy", "dee")]
    submissions = [make_submission(rng.choice([sample_packet, other]), f"Candidate {i}") for i in range(12)]
    work = [(s, r) for s in submissions for r in reviewers if rng.random() < 0.6]
    rng.shuffle(work)  # every pair meets in both orders: sometimes a submits first, sometimes b
    for s, r in work:
        score(s, r, random_marks(rng), submit=rng.random() < 0.85)  # some stay drafts: never counted
    for packet in (sample_packet, other):
        assert shown_figures(packet) == expected_figures(packet)
    assert shown_figures(sample_packet), "the random reviews made no pair: the test proves nothing"


@pytest.mark.django_db
def test_a_pair_counts_once_in_both_orders(sample_packet, reviewer, ann):
    first, second = make_submission(sample_packet, "A"), make_submission(sample_packet, "B")
    score(first, ann, random_marks(random.Random(1)))
    score(first, reviewer, random_marks(random.Random(2)))
    score(second, reviewer, random_marks(random.Random(3)))
    score(second, ann, random_marks(random.Random(4)))
    do_submit_review(second, ann)  # submitted again: already final, adds nothing
    assert AgreementTally.objects.count() == 4  # one row per cell, not one per order
    assert shown_figures(sample_packet) == expected_figures(sample_packet)
    assert all(sum(t) == 2 for t in shown_figures(sample_packet).values())


def run_while_held(hold, then) -> None:
    """Run `hold` in a transaction left open while `then` starts in another thread, then commit it.

    `then` gets a second to run to its end; when it waits on a lock instead,
    the first transaction commits after that second and lets it through.
    """
    held, done, errors = threading.Event(), threading.Event(), []

    def first():
        try:
            with transaction.atomic():
                hold()
                held.set()
                done.wait(timeout=1)  # not a measurement: how long to leave the second one waiting
        except Exception as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)
        finally:
            held.set()
            connection.close()

    def second():
        try:
            held.wait()
            then()
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            done.set()
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_submitting_at_once_count_their_pair_once(sample_packet, reviewer, ann):
    submission = make_submission(sample_packet)
    score(submission, reviewer, random_marks(random.Random(1)), submit=False)
    score(submission, ann, random_marks(random.Random(2)), submit=False)
    # rob's submission is not yet committed when ann's starts: ann's must wait for it, or neither
    # would see the other's review and the pair would never be counted.
    run_while_held(lambda: do_submit_review(submission, reviewer), lambda: do_submit_review(submission, ann))
    assert shown_figures(sample_packet) == expected_figures(sample_packet)
    assert {sum(t) for t in shown_figures(sample_packet).values()} == {1}


@pytest.mark.django_db(transaction=True)
def test_a_review_submitted_twice_at_once_counts_once(sample_packet, reviewer, ann):
    submission = make_submission(sample_packet)
    score(submission, ann, random_marks(random.Random(1)))
    score(submission, reviewer, random_marks(random.Random(2)), submit=False)
    run_while_held(lambda: do_submit_review(submission, reviewer), lambda: do_submit_review(submission, reviewer))
    assert {sum(t) for t in shown_figures(sample_packet).values()} == {1}


@pytest.mark.django_db
def test_rebuild_and_the_migration_give_the_kept_tally(sample_packet, reviewer, ann, cy):
    rng = random.Random(5)
    for i in range(6):
        s = make_submission(sample_packet, f"Candidate {i}")
        for r in (reviewer, ann, cy):
            score(s, r, random_marks(rng), submit=rng.random() < 0.8)
    kept = shown_figures(sample_packet)
    assert kept == expected_figures(sample_packet)
    AgreementTally.objects.all().delete()
    call_command("rebuild_agreement", stdout=open("/dev/null", "w"))
    assert shown_figures(sample_packet) == kept
    AgreementTally.objects.all().delete()
    migration = importlib.import_module("grading.migrations.0005_agreement_tally")
    from django.apps import apps

    migration.fill_tally(apps, SimpleNamespace(connection=connection))  # what the migration's step needs
    assert shown_figures(sample_packet) == kept
    assert do_rebuild_agreement() == len(kept)
