"""When an invoice falls due under its payment terms."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from itertools import islice

from dateutil.rrule import DAILY, FR, MO, TH, TU, WE, rrule, rruleset

from .holidays import load_holidays

TERMS_RE = re.compile(r"^\s*net\s*(\d{1,3})\s*$", re.IGNORECASE)
BUSINESS_DAYS = (MO, TU, WE, TH, FR)


def parse_terms(text: str) -> int:
    """The number of business days in terms such as "Net 30"."""
    match = TERMS_RE.match(text)
    if match is None:
        raise ValueError(f"unknown payment terms {text!r}: expected something like 'Net 30'")
    return int(match.group(1))


def due_date(issued: date, terms: str, holidays: Iterable[date] | None = None) -> date:
    """The day an invoice issued on ``issued`` falls due: ``terms`` business days later.

    Business days are Monday to Friday, less the office's closures
    (``holidays``; by default the ones in holidays.txt). "Net 0" is due the day it is issued.
    """
    days = parse_terms(terms)
    if days == 0:
        return issued
    if holidays is None:
        holidays = load_holidays()
    calendar = rruleset()
    # The day of issue never counts: the first business day is the one after it.
    first = datetime.combine(issued + timedelta(days=1), time())
    calendar.rrule(rrule(DAILY, dtstart=first, byweekday=BUSINESS_DAYS))
    for closed in holidays:
        calendar.exdate(datetime.combine(closed, time()))
    return next(islice(calendar, days - 1, None)).date()
