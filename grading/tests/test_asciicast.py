"""The hosted terminal's recording (grading/engine/asciicast.py): asciicast v2 lines, the size cap, markers, the reader."""

import json
import multiprocessing
import time

import pytest

from grading.engine import asciicast


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_header_is_written_once_and_a_second_connection_appends_on_the_same_clock(tmp_path):
    cast = tmp_path / "session.cast"
    first = asciicast.Recorder(cast, 100, 30, max_bytes=1 << 20)
    assert first.header == asciicast.read_header(cast)  # one clock for every writer
    first.output("$ ")
    first.input("ls\n")
    first.resize(120, 40)
    second = asciicast.Recorder(cast, 80, 24, max_bytes=1 << 20)  # a reconnect, at another size
    second.output("again")
    header, *events = lines(cast)
    assert header == {"version": 2, "width": 100, "height": 30, "timestamp": header["timestamp"]}
    assert abs(header["timestamp"] - time.time()) < 5
    assert [e[1:] for e in events] == [["o", "$ "], ["i", "ls\n"], ["r", "120x40"], ["o", "again"]]
    assert all(0 <= e[0] < 5 for e in events)


def test_past_the_cap_output_and_input_stop_with_one_marker_saying_so_and_markers_go_on(tmp_path):
    cast = tmp_path / "session.cast"
    recorder = asciicast.Recorder(cast, 80, 24, max_bytes=2000)
    for _ in range(100):
        recorder.output("x" * 100)
    recorder.input("typed after the cap\n")
    size = cast.stat().st_size
    assert size < 2000 + 300  # the line that crossed the cap, and the marker
    asciicast.Recorder(cast, 80, 24, max_bytes=2000).output("a reconnect records nothing more")
    asciicast.append_marker(cast, "green captured")
    events = lines(cast)[1:]
    assert [e[1:] for e in events if e[1] == "m"] == [["m", asciicast.CAP_MARKER], ["m", "green captured"]]
    assert not any("typed after" in e[2] or "reconnect" in e[2] for e in events)


def test_a_marker_on_a_new_file_writes_the_header_first(tmp_path):
    cast = tmp_path / "sub" / "session.cast"
    asciicast.append_marker(cast, "red captured")
    header, events = asciicast.read_events(cast)
    assert header.width == 80 and header.height == 24
    assert [(e.code, e.data) for e in events] == [("m", "red captured")]


def test_the_reader_skips_a_torn_last_line_and_lines_that_are_not_events(tmp_path):
    cast = tmp_path / "session.cast"
    recorder = asciicast.Recorder(cast, 80, 24, max_bytes=1 << 20)
    recorder.output("kept")
    with open(cast, "a") as f:
        f.write('[1.0, "x", "unknown code"]\n[1.5, "o", "torn')
    header, events = asciicast.read_events(cast)
    assert [(e.code, e.data) for e in events] == [("o", "kept")]


def test_a_file_without_a_header_is_refused_with_a_message(tmp_path):
    cast = tmp_path / "session.cast"
    cast.write_text('[0.1, "o", "no header"]\n')
    with pytest.raises(ValueError, match="does not start with an asciicast v2 header"):
        asciicast.read_events(cast)


def _mark(path, label, count):
    for i in range(count):
        asciicast.append_marker(path, f"{label} {i}")


def test_writers_in_several_processes_never_tear_each_others_lines(tmp_path):
    cast = tmp_path / "session.cast"
    recorder = asciicast.Recorder(cast, 80, 24, max_bytes=1 << 24)
    others = [multiprocessing.Process(target=_mark, args=(cast, f"p{n}", 200)) for n in range(3)]
    for process in others:
        process.start()
    for _ in range(200):
        recorder.output("y" * 3000)  # lines far longer than a pipe's atomic write
    for process in others:
        process.join(30)
    events = lines(cast)[1:]  # every line parses
    assert sum(1 for e in events if e[1] == "m") == 600
    assert sum(1 for e in events if e[1] == "o") == 200
