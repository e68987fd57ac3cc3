"""Parsing pasted invitation lines: plain Python, no database."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

MAX_LINES = 500
ADDRESS_RE = re.compile(r"^(?P<name>[^<>]*)<(?P<email>[^<>]+)>$")


@dataclass(frozen=True)
class InviteRow:
    line: int
    name: str
    email: str


@dataclass(frozen=True)
class LineError:
    line: int
    text: str
    message: str

    def __str__(self) -> str:
        return f"Line {self.line} ({self.text!r}): {self.message}"


def parse_invite_lines(text: str) -> tuple[list[InviteRow], list[LineError]]:
    """Read `name,email` lines (or `Name <email>`); return the good rows and one error per bad line.

    Blank lines and lines starting with # are ignored. A name may contain a
    comma if it is quoted ("Lovelace, Ada",ada@example.com). Emails are
    compared case-insensitively, and a repeated email is an error on its
    second line.
    """
    rows: list[InviteRow] = []
    errors: list[LineError] = []
    seen: dict[str, int] = {}
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        return [], [LineError(MAX_LINES + 1, "…", f"Paste at most {MAX_LINES} lines at a time.")]
    for number, raw in enumerate(lines, start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        fields = [f.strip() for f in next(csv.reader([stripped], skipinitialspace=True))]
        addressed = ADDRESS_RE.match(stripped)
        if len(fields) == 1 and addressed:  # the mail-client form: Ada Lovelace <ada@example.com>
            fields = [addressed["name"].strip().strip('"'), addressed["email"]]
        if len(fields) != 2:
            errors.append(LineError(number, stripped, "expected a name and an email separated by one comma"))
            continue
        name, email = fields
        checked = _check_row(number, stripped, name, email.strip("<>").lower(), seen)
        if isinstance(checked, LineError):
            errors.append(checked)
        else:
            rows.append(checked)
    return rows, errors


def rows_from_pairs(pairs: list[tuple[str, str]]) -> tuple[list[InviteRow], list[LineError]]:
    """The same checks as parse_invite_lines on (name, email) pairs already apart (the API's JSON); pair n is line n."""
    if len(pairs) > MAX_LINES:
        return [], [LineError(MAX_LINES + 1, "…", f"Send at most {MAX_LINES} candidates at a time.")]
    rows: list[InviteRow] = []
    errors: list[LineError] = []
    seen: dict[str, int] = {}
    for number, (name, email) in enumerate(pairs, start=1):
        checked = _check_row(number, f"{name} <{email}>", name.strip(), email.strip().lower(), seen)
        if isinstance(checked, LineError):
            errors.append(checked)
        else:
            rows.append(checked)
    return rows, errors


def _check_row(number: int, text: str, name: str, email: str, seen: dict[str, int]) -> InviteRow | LineError:
    """One candidate's name and email checked; ``seen`` (email: line) catches a repeat and is added to."""
    if not name:
        return LineError(number, text, "the name is empty")
    if len(name) > 200:
        return LineError(number, text[:60], "the name is longer than 200 characters")
    try:
        validate_email(email)
    except ValidationError:
        return LineError(number, text, f"{email!r} is not a valid email address")
    if email in seen:
        return LineError(number, text, f"{email} is already on line {seen[email]}")
    seen[email] = number
    return InviteRow(number, name, email)
