"""Hidden reference tests: added under tests/ beside the candidate's code when checking the fix."""
from datetime import date

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
