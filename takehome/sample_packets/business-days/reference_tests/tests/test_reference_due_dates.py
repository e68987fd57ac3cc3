"""Hidden reference tests: added under tests/ beside the candidate's code when checking the fix."""
import os
import random
from datetime import date, timedelta

import pytest

from payterms import due_date


@pytest.mark.parametrize(("issued", "terms", "due"), [
    (date(2026, 3, 2), "Net 1", date(2026, 3, 3)),  # Monday: due Tuesday
    (date(2026, 3, 6), "Net 10", date(2026, 3, 20)),  # Friday: two weeks later
    (date(2026, 3, 4), "Net 2", date(2026, 3, 6)),  # Wednesday: due Friday
])
def test_the_issue_day_does_not_count_on_a_weekday(issued, terms, due):
    assert due_date(issued, terms, holidays=()) == due


@pytest.mark.parametrize(("issued", "terms", "due"), [
    (date(2026, 3, 7), "Net 5", date(2026, 3, 13)),  # Saturday: Monday to Friday
    (date(2026, 3, 8), "Net 1", date(2026, 3, 9)),  # Sunday: due Monday
])
def test_a_weekend_issue_counts_from_monday(issued, terms, due):
    assert due_date(issued, terms, holidays=()) == due


def test_long_terms_count_business_days_not_calendar_days():
    assert due_date(date(2026, 3, 3), "Net 30", holidays=()) == date(2026, 4, 14)


def test_the_office_closures_are_skipped(closures):
    # Good Friday and Easter Monday fall between Thursday 2 April and the due date.
    assert due_date(date(2026, 4, 2), "Net 1", holidays=closures) == date(2026, 4, 7)
    assert due_date(date(2026, 3, 3), "Net 30", holidays=closures) == date(2026, 4, 16)


def test_the_closures_file_is_the_default():
    assert due_date(date(2026, 12, 23), "Net 2") == date(2026, 12, 29)


def _rng():
    # The grader sets TAKEHOME_HIDDEN_SEED afresh for each grading and keeps it in the evidence, so
    # these inputs differ from one upload to the next; a run without it draws a seed of its own.
    seed = os.environ.get("TAKEHOME_HIDDEN_SEED")
    return random.Random(int(seed) if seed is not None else None)


def _counted_by_hand(issued, days, closed):
    """The due date, one calendar day at a time: the day of issue never counts."""
    due = issued
    while days:
        due += timedelta(days=1)
        if due.weekday() < 5 and due not in closed:
            days -= 1
    return due


def test_any_issue_day_terms_and_closures():
    rng = _rng()
    for _ in range(8):
        issued = date(2026, 1, 1) + timedelta(days=rng.randrange(365))
        days = rng.randint(1, 45)
        closed = tuple(sorted({issued + timedelta(days=rng.randint(1, 70)) for _ in range(rng.randint(0, 4))}))
        expected = _counted_by_hand(issued, days, set(closed))
        assert due_date(issued, f"Net {days}", holidays=closed) == expected, (issued, days, closed)
