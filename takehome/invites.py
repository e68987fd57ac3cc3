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
        email = email.strip("<>").lower()
        if not name:
            errors.append(LineError(number, stripped, "the name is empty"))
            continue
        if len(name) > 200:
            errors.append(LineError(number, stripped[:60], "the name is longer than 200 characters"))
            continue
        try:
            validate_email(email)
        except ValidationError:
            errors.append(LineError(number, stripped, f"{email!r} is not a valid email address"))
            continue
        if email in seen:
            errors.append(LineError(number, stripped, f"{email} is already on line {seen[email]}"))
            continue
        seen[email] = number
        rows.append(InviteRow(number, name, email))
    return rows, errors
