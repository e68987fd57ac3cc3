"""The reviewer's replay of a hosted session (step 10): reading the recording, serving it to the desk only,
and the stamp section's player, markers and timeline marks."""

import json
import re
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from grading.engine.replay import UnreadableRecording, read_recording
from grading.pages import recording_name, session_replay
from sessions_app.models import Submission
from shared import stored

from .casts import SESSION, cast_for, write_cast


@pytest.fixture(autouse=True)
def _storage(media_root):
    """Recordings are read from the storage, here a folder of the test's own."""


# --- reading a recording ------------------------------------------------------------------


def test_the_markers_and_the_start_are_read(tmp_path):
    recording = read_recording(write_cast(tmp_path / "s.cast", SESSION))
    assert recording.started_at == datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert (recording.width, recording.height, recording.duration) == (80, 24, 12.0)
    assert [(m.t, m.label) for m in recording.markers] == [
        (2.4, "printed: 1 failed"), (4.5, "red captured"), (8.8, "printed: 1 passed"), (9.25, "green captured")]
    assert recording.red.t == 4.5 and recording.red.clock == "0:04"
    assert [e["name"] for e in recording.marker_events()] == [
        "recording: printed: 1 failed", "recording: red captured", "recording: printed: 1 passed",
        "recording: green captured"]
    assert recording.marker_events()[1]["at"] == "2026-12-01T12:00:04.500000+00:00"


def test_each_test_run_is_found_in_the_output_across_events_and_colours(tmp_path):
    events = [
        (0.9, "i", "python -m pytest\r"),
        (1.0, "o", "$ python -m pytest\r\n"),
        (2.0, "o", "\x1b[31m==== \x1b[31m\x1b[1m1 failed\x1b[0m, \x1b[32m2 pas"),
        (2.5, "o", "sed\x1b[0m\x1b[31m in 0.10s\x1b[0m\x1b[31m ====\x1b[0m\r\n$ "),
        (3.0, "o", "echo '3 passed in 1s'\r\n"),  # a command line, not pytest's closing line
        (3.9, "i", "pytest tests/empty\r"),
        (4.0, "o", "===== no tests ran in 0.01s =====\n"),
        (5.0, "i", "1 failed in 9s\r"),  # typed, not printed
    ]
    recording = read_recording(write_cast(tmp_path / "s.cast", events))
    assert [(m.t, m.label) for m in recording.markers] == [
        (2.5, "printed: 1 failed, 2 passed"), (4.0, "printed: no tests ran")]
    assert recording.red is None


def test_old_output_drawn_again_is_no_test_run(tmp_path):
    """An editor's exit and a browser attaching again redraw the screen, old closing lines and all."""
    screen = "$ python -m pytest -q\r\nF\r\n1 failed in 0.03s\r\n$ nano invoices.py"
    events = [
        (1.0, "i", "python -m pytest -q\r"),
        (2.0, "o", "F\r\n1 failed in 0.03s\r\n$ "),
        (3.0, "i", "nano invoices.py\r"),
        (3.5, "o", "\x1b[?1049h  GNU nano 7.2   invoices.py\r\n"),
        (5.0, "i", "\x0f"), (5.2, "i", "\r"), (5.5, "i", "\x18"),  # save (Enter at its prompt), exit
        (5.6, "o", "\x1b[?1049l\x1b[H\x1b[2J" + screen + "\r\n$ "),  # nano's exit: the old screen again
        (6.0, "i", "\r"),  # an empty line
        (9.0, "r", "80x24"),  # a browser attaching again
        (9.1, "o", "\x1b[H\x1b[2J" + screen + "\r\n$ \r\n$ "),
    ]
    recording = read_recording(write_cast(tmp_path / "s.cast", events))
    assert [(m.t, m.label) for m in recording.markers] == [(2.0, "printed: 1 failed")]


def test_a_summary_line_only_printed_is_never_a_test_run(tmp_path):
    """echo, cat of an old log, a script: whatever prints pytest's closing line is labelled as printed."""
    events = [
        (1.0, "i", 'echo "=== 1 failed in 0.05s ==="\r'),
        (1.1, "o", 'echo "=== 1 failed in 0.05s ==="\r\n=== 1 failed in 0.05s ===\r\n$ '),
        (2.0, "i", "cat old/red.log\r"),
        (2.1, "o", "FAILED test_invoices.py::test_refunds\r\n\x1b[31m==== 1 failed, 3 passed in 0.20s ====\x1b[0m\r\n$ "),
        (3.0, "i", "python -c 'print(\"red captured\")'\r"),
        (3.1, "o", "red captured\r\n$ "),
    ]
    recording = read_recording(write_cast(tmp_path / "s.cast", events))
    assert [(m.t, m.label, m.printed) for m in recording.markers] == [
        (1.1, "printed: 1 failed", True), (2.1, "printed: 1 failed, 3 passed", True)]
    assert not any(m.label.startswith("test run") or m.by_server for m in recording.markers)
    assert recording.red is None  # "Jump to red" seeks only to the server's own capture
    assert [e["precision"] for e in recording.marker_events()] == ["server clock, of a line the terminal printed"] * 2


def test_the_review_page_labels_printed_lines_as_printed(client, reviewer, submission):
    cast_for(submission, [(1.0, "i", 'echo "=== 1 failed in 0.05s ==="\r'),
                          (1.1, "o", "=== 1 failed in 0.05s ===\r\n$ ")])
    stamp, _ = review(client, reviewer, submission)
    assert "test run: 1 failed" not in stamp and ">printed: 1 failed" in stamp
    assert 'id="replay-printed-note"' in stamp and "Jump to red" not in stamp
    assert 'data-event="recording: printed: 1 failed"' in stamp


def test_no_file_is_no_recording(tmp_path):
    assert read_recording(tmp_path / "absent.cast") is None


@pytest.mark.parametrize("first_line", [b"not json\n", b"[1, 2]\n", b'{"version": 1}\n', b"\xff\xfe\n"])
def test_a_file_that_is_no_asciicast_v2_says_so(tmp_path, first_line):
    path = tmp_path / "bad.cast"
    path.write_bytes(first_line + b'[1.0, "m", "red captured"]\n')
    with pytest.raises(UnreadableRecording):
        read_recording(path)


def test_broken_lines_are_skipped_and_a_cut_file_still_reads(tmp_path):
    path = write_cast(tmp_path / "s.cast", SESSION)
    with path.open("ab") as out:
        out.write(b'garbage\n[1]\n["x", "m", "bad time"]\n[-3, "m", "negative"]\n[13.0, "m", "submitted"]\n[14.0, "o", "trunc')
    recording = read_recording(path)
    assert [m.label for m in recording.markers if m.by_server] == ["red captured", "green captured", "submitted"]


def test_reading_stops_at_the_byte_limit(tmp_path):
    path = write_cast(tmp_path / "s.cast", [(float(i), "o", "x" * 100) for i in range(100)] + [(200.0, "m", "late")])
    recording = read_recording(path, max_bytes=2000)
    assert recording.markers == () and recording.cut_at_bytes == 2000


# --- serving it to the desk only -------------------------------------------------------------


def cast_url(submission) -> str:
    return reverse("grading:session-cast", args=[submission.pk])


def test_a_reviewer_gets_the_recording_and_a_recruiter_too(client, reviewer, recruiter, submission):
    name = cast_for(submission)
    assert name == recording_name(submission.invitation) == f"recordings/inv-{submission.invitation.pk}.cast"
    for user in (reviewer, recruiter):
        client.force_login(user)
        response = client.get(cast_url(submission))
        assert response.status_code == 200
        with stored.open(name) as handle:
            assert b"".join(response.streaming_content) == handle.read()
        assert response["Cache-Control"] == "private, no-store"


def test_no_recording_is_a_404(client, reviewer, submission):
    client.force_login(reviewer)
    assert client.get(cast_url(submission)).status_code == 404
    assert client.get(reverse("grading:session-cast", args=[999999])).status_code == 404


def test_a_candidate_with_their_link_open_or_anyone_else_gets_nothing(client, groups, submission):
    cast_for(submission)
    token = submission.invitation.link_token()
    assert client.get(reverse("sessions_app:landing", args=[token])).status_code == 200
    response = client.get(cast_url(submission))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    client.force_login(User.objects.create_user("nobody", password="x"))
    response = client.get(cast_url(submission))
    assert response.status_code == 403 and b"red captured" not in response.content


# --- the stamp section --------------------------------------------------------------------------


def review(client, reviewer, submission) -> tuple[str, object]:
    client.force_login(reviewer)
    response = client.get(reverse("grading:review-detail", args=[submission.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    return html.split('id="section-stamp"')[1].split('id="section-refusal"')[0], response


def test_a_recording_puts_the_player_and_its_markers_in_the_stamp_section(client, reviewer, submission):
    cast_for(submission)
    stamp, response = review(client, reviewer, submission)
    assert 'id="replay-player"' in stamp and f'data-src="{cast_url(submission)}"' in stamp
    buttons = stamp.split('id="replay-markers"')[1].split("</ul>")[0]
    assert re.findall(r'data-moment="([^"]+)">', buttons) == [
        "red captured, at 0:04", "printed: 1 failed, at 0:02", "red captured, at 0:04",
        "printed: 1 passed, at 0:08", "green captured, at 0:09"]
    assert buttons.index(">Jump to red") < buttons.index(">printed: 1 failed") < buttons.index(">red captured") \
        < buttons.index(">printed: 1 passed") < buttons.index(">green captured")
    assert 'id="jump-to-red" data-seek="4.500"' in buttons
    # the timeline marks each gate step of the recording
    for mark in ("red captured", "green captured", "printed: 1 failed", "printed: 1 passed"):
        assert f'data-event="recording: {mark}"' in stamp
    # the player's scripts on this page only, and WebAssembly allowed for it, no inline script
    assert "asciinema-player.min.js" in response.content.decode() and "replay.js" in response.content.decode()
    policy = response["Content-Security-Policy"]
    assert "'wasm-unsafe-eval'" in policy and "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy


def test_an_upload_without_a_recording_has_no_player(client, reviewer, submission):
    stamp, response = review(client, reviewer, submission)
    assert 'id="replay"' not in stamp
    assert "asciinema-player" not in response.content.decode()
    assert "wasm-unsafe-eval" not in response["Content-Security-Policy"]


def test_a_hosted_submission_without_its_recording_says_so(client, reviewer, submission):
    Submission.objects.filter(pk=submission.pk).update(via="hosted")
    submission.refresh_from_db()
    stamp, response = review(client, reviewer, submission)
    assert "No recording of this session was found on the server." in stamp
    assert "asciinema-player" not in response.content.decode()


def test_an_unreadable_recording_is_a_sentence_not_a_traceback(client, reviewer, submission):
    stored.save(recording_name(submission.invitation), (json.dumps({"version": 3}) + "\n").encode())
    assert session_replay(submission).problem.startswith("The session's recording cannot be played")
    stamp, _ = review(client, reviewer, submission)
    assert 'id="replay-problem"' in stamp and "asciicast version 2 header" in stamp


def test_a_recording_without_markers_says_no_gate_step_was_taken(client, reviewer, submission):
    cast_for(submission, [e for e in SESSION if e[1] == "i"])
    stamp, _ = review(client, reviewer, submission)
    assert 'id="replay-player"' in stamp and "no gate step was taken" in stamp and "Jump to red" not in stamp


def test_a_recording_that_grows_is_read_again(tmp_path):
    path = write_cast(tmp_path / "s.cast", SESSION)
    assert read_recording(path) is read_recording(path)  # unchanged: read once
    with path.open("a") as out:
        out.write(json.dumps([13.0, "m", "submitted"]) + "\n")
    assert read_recording(path).markers[-1].label == "submitted"


def test_a_stored_recording_that_grows_is_read_again(submission):
    cast_for(submission)
    first = session_replay(submission).recording
    assert session_replay(submission).recording is first  # unchanged: read once
    cast_for(submission, [*SESSION, (13.0, "m", "submitted")])
    assert session_replay(submission).recording.markers[-1].label == "submitted"
