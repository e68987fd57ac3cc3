"""Pasted `name,email` lines: each bad line gets its own message."""

import pytest

from takehome.invites import parse_invite_lines


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Ada Lovelace, ada@example.com", [("Ada Lovelace", "ada@example.com")]),
        ("Ada,ADA@Example.com\n\n# comment\nBob,bob@example.com",
         [("Ada", "ada@example.com"), ("Bob", "bob@example.com")]),
        ('"Lovelace, Ada", ada@example.com', [("Lovelace, Ada", "ada@example.com")]),
        ("Ada, <ada@example.com>\r\n", [("Ada", "ada@example.com")]),
        ("Ada Lovelace <ada@example.com>", [("Ada Lovelace", "ada@example.com")]),
        ('"Lovelace, Ada" <ada@example.com>', [("Lovelace, Ada", "ada@example.com")]),
    ],
)
def test_good_lines(text, expected):
    rows, errors = parse_invite_lines(text)
    assert errors == []
    assert [(r.name, r.email) for r in rows] == expected


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("Ada ada@example.com", 1, "separated by one comma"),
        ("Ada, ada@example.com, extra", 1, "separated by one comma"),
        ("Ada, not-an-email", 1, "not a valid email"),
        (", ada@example.com", 1, "name is empty"),
        ("Ada, ada@example.com\nAda B, ADA@example.com", 2, "already on line 1"),
        ("Good, g@example.com\n\nBad, bad@", 3, "not a valid email"),
    ],
)
def test_bad_lines_are_reported_with_their_number(text, line, message):
    rows, errors = parse_invite_lines(text)
    assert len(errors) == 1
    assert errors[0].line == line
    assert message in str(errors[0])


def test_every_bad_line_gets_its_own_message():
    rows, errors = parse_invite_lines("a, a@example.com\nb\nc, c@\nd, d@example.com")
    assert [e.line for e in errors] == [2, 3]
    assert [r.email for r in rows] == ["a@example.com", "d@example.com"]
