"""Pure helpers of the review page: terminal text, diff order, timeline layout."""

import pytest

from grading.display import clean_terminal_text, highlight_diff, layout_timeline, order_files


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("\x1b[31mFAILED\x1b[0m x", "FAILED x"),
        ("a\r\nb\rc", "a\nb\nc"),
        ("\x1b]8;;http://x\x07link\x1b]8;;\x07", "link"),
        ("bell\x07 nul\x00", "bell\ufffd nul\ufffd"),
        ("tab\tkept\n", "tab\tkept\n"),
        (None, ""),
    ],
)
def test_clean_terminal_text(raw, shown):
    assert clean_terminal_text(raw) == shown


def test_highlight_diff_escapes_everything():
    html = highlight_diff("+<script>alert(1)</script>\n-&amp;\n")
    assert "<script>" not in html
    assert "&lt;script&gt;" in html and "&amp;amp;" in html


def test_test_files_come_first():
    files = [{"path": "b.py", "is_test": False}, {"path": "z_test.py", "is_test": True},
             {"path": "a.py", "is_test": False}, {"path": "test_a.py", "is_test": True}]
    assert [f["path"] for f in order_files(files)] == ["test_a.py", "z_test.py", "a.py", "b.py"]


def test_timeline_places_events_by_time_and_marks_the_ones_in_problems():
    events = [
        {"name": "receipt: red", "at": "2026-01-01T10:00:00+00:00", "source": "server receipt", "precision": "server clock"},
        {"name": "stamp value", "at": "2026-01-01T10:05:00+00:00", "source": "model_allowed.at (UTC)", "precision": "sub-second"},
        {"name": "green.log", "at": "2026-01-01T09:55:00", "source": "zip DOS time", "precision": "2 s"},
        {"name": "notes.md", "at": None, "source": "x", "precision": "x"},
    ]
    problems = ["zip times: red.log (10:00) is newer than green.log (09:55)"]
    layout = layout_timeline(events, problems)
    rows = {r["name"]: r for r in layout["rows"]}
    assert rows["green.log"]["x"] == layout["axis_left"]
    assert rows["stamp value"]["x"] == layout["axis_right"]
    assert layout["axis_left"] < rows["receipt: red"]["x"] < layout["axis_right"]
    assert rows["green.log"]["flagged"] and not rows["stamp value"]["flagged"]
    assert [r["kind"] for r in layout["rows"]] == ["receipt", "stamp", "zip"]
    assert layout["undated"] == ["notes.md"]


def test_timeline_with_one_time_draws_everything_in_the_middle():
    layout = layout_timeline([{"name": "red.log", "at": "2026-01-01T10:00:00"}] * 2, [])
    assert len({r["x"] for r in layout["rows"]}) == 1


def test_receipt_problems_mark_the_receipts():
    events = [{"name": "receipt: green", "at": "2026-01-01T10:00:00+00:00"},
              {"name": "receipt: red", "at": "2026-01-01T10:01:00+00:00"}]
    layout = layout_timeline(events, ["server receipts: 'green' (10:00) came before 'red' (10:01)"])
    assert all(r["flagged"] for r in layout["rows"])
