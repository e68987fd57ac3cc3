"""Pure helpers of the review page: terminal text, diff order, timeline layout."""

import pytest

from grading.engine.display import clean_terminal_text, highlight_diff, layout_timeline, order_files


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


def test_refused_receipts_are_drawn_apart_and_flagged_by_their_own_problems():
    events = [{"name": "receipt: green", "at": "2026-01-01T10:09:00+00:00"},
              {"name": "receipt: green (refused)", "at": "2026-01-01T10:02:00+00:00"},
              {"name": "receipt: red", "at": "2026-01-01T10:00:00+00:00"},
              {"name": "red.log", "at": "2026-01-01T10:00:00"},
              {"name": "model.md", "at": "2026-01-01T09:59:00"}]
    refused = ("server receipts: the 'green' step was refused once (last at 10:02: still red) "
               "and never accepted after it")
    rows = {r["name"]: r for r in layout_timeline(events, [refused])["rows"]}
    assert rows["receipt: green (refused)"]["kind"] == "refused" and rows["receipt: green (refused)"]["flagged"]
    assert not rows["receipt: green"]["flagged"] and not rows["receipt: red"]["flagged"]
    fast = "server receipts: red to green took 2.0 s (red receipt 10:00, green receipt 10:00:02); under 20 s ..."
    rows = {r["name"]: r for r in layout_timeline(events, [fast])["rows"]}
    assert rows["receipt: green"]["flagged"] and rows["receipt: red"]["flagged"]
    assert not rows["receipt: green (refused)"]["flagged"]
    reply = "zip times: model.md, the model's reply (09:59), is older than red.log (10:00): ..."
    rows = {r["name"]: r for r in layout_timeline(events, [reply])["rows"]}
    assert rows["model.md"]["flagged"] and rows["red.log"]["flagged"] and not rows["receipt: red"]["flagged"]
    stamp = "server receipts: model_allowed.at (the stamp) is in the zip but the server has no model receipt: ..."
    rows = {r["name"]: r for r in layout_timeline(events + [{"name": "model_allowed.at", "at": "2026-01-01T10:01:00"},
                                                            {"name": "allowed.at", "at": "2026-01-01T10:01:00"}],
                                                   [stamp])["rows"]}
    assert rows["model_allowed.at"]["flagged"] and not rows["allowed.at"]["flagged"]


@pytest.mark.parametrize("text, shown", [
    ("2026-11-30T10:01:00.100000+01:00", "2026-11-30 10:01:00 +01:00"),
    ("2026-11-30T04:01:00-05:30", "2026-11-30 04:01:00 -05:30"),
    ("2026-11-30T10:01:00", "2026-11-30 10:01:00"),
    ("yesterday <b>", "yesterday <b>"),
    (None, ""),
])
def test_the_candidates_clock_is_written_out(text, shown):
    from grading.engine.display import candidate_clock

    assert candidate_clock(text) == shown


def test_a_model_exchange_is_drawn_from_its_request_to_the_end_of_its_reply():
    from grading.engine.display import exchange_events, layout_timeline

    events = exchange_events([{"at": "2026-11-30T10:00:00+00:00", "latency_s": 120},
                              {"at": "not a time", "latency_s": "x"}, "junk"])
    assert [e["name"] for e in events] == ["model exchange 1 (120.0 s)", "model exchange 2 (0.0 s)"]
    layout = layout_timeline([{"name": "red.log", "at": "2026-11-30T09:58:00", "source": "zip"}, *events], [])
    red, exchange = layout["rows"]
    assert exchange["kind"] == "exchange" and red["x_end"] is None
    assert exchange["x_end"] == layout["axis_right"]  # the reply's end is the last time on the axis
    assert layout["undated"] == ["model exchange 2 (0.0 s)"]
