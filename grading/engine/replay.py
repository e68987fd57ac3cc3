"""Read a hosted session's recording (asciicast v2) for the reviewer's replay: when it began and its markers.

The recording is written by the terminal (grading/engine/asciicast.py): a header
line ``{"version": 2, "width", "height", "timestamp"}``, then one event per
line, ``[t, code, data]`` with ``t`` in seconds since the header's
timestamp. Markers are ``[t, "m", label]`` ("red captured", "green
captured", "submitted", ...): only the server writes them, each for a step it
ran or witnessed itself. pytest's closing line seen in the terminal's output
("1 failed in 0.05s" or "==== 2 passed in 0.1s ====") becomes a marker too,
but one labelled as printed, "printed: 1 failed", at the moment that line
was printed: anything in the shell can print it (``echo``, ``cat`` of an old
log), so it says what the screen showed, never that a test run happened.
The reviewer's page lists them as buttons that seek the player, and draws
them on the timeline at ``timestamp + t``.

Only the markers and the last event's time are kept; output and input
events are skipped as they are read, so a long session costs one pass over
the file and no memory. Lines that are not events are skipped, never fatal:
a recording cut short by a crash still replays up to its last whole line.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import BinaryIO

# Read no further than this: the terminal caps what it records, and a file past it is not ours to parse whole.
MAX_READ_BYTES = 64 << 20
MAX_LABEL = 200
MAX_LINE = 4096  # a partial output line kept between events; longer is no pytest summary
# why not "test run": the server ran none of these; it only saw the line on the screen
PRINTED = "printed: "
# pytest's closing line, its colours and "=" rule taken off: counts, then " in <seconds>s".
SUMMARY_RE = re.compile(
    r"^=*\s*((?:\d+ (?:failed|passed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun)(?:, )?)+"
    r"|no tests ran) in \d+(?:\.\d+)?s\b"
)
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


class UnreadableRecording(Exception):
    """The file is there but is no asciicast v2 recording; the message says why, for the reviewer."""


@dataclass(frozen=True)
class Marker:
    t: float  # seconds since the recording began
    label: str

    @property
    def clock(self) -> str:
        """The moment as the player's own clock shows it: m:ss, or h:mm:ss past an hour."""
        whole = int(self.t)
        hours, rest = divmod(whole, 3600)
        minutes, seconds = divmod(rest, 60)
        return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"

    @property
    def is_red(self) -> bool:
        return self.label.lower().startswith("red")

    printed: bool = False  # read from the terminal's output, not written by the server

    @property
    def by_server(self) -> bool:
        """A step the server ran or witnessed itself (a capture, a submit), not a line the shell printed."""
        return not self.printed


@dataclass(frozen=True)
class Recording:
    started_at: datetime | None  # the header's timestamp (UTC); None when it has none
    width: int
    height: int
    duration: float  # the last event's time
    markers: tuple[Marker, ...]
    cut_at_bytes: int | None = None  # read only this far (MAX_READ_BYTES)

    @property
    def has_printed(self) -> bool:
        return any(m.printed for m in self.markers)

    @property
    def red(self) -> Marker | None:
        """The first marker of red's capture: where "Jump to red" seeks."""
        return next((m for m in self.markers if m.is_red and m.by_server), None)

    def marker_events(self) -> list[dict]:
        """The markers as timeline events (the evidence's event shape), on the server's clock."""
        if self.started_at is None:
            return []
        return [
            {
                "name": f"recording: {m.label}",
                "at": (self.started_at + timedelta(seconds=m.t)).isoformat(),
                "source": "session recording",
                "precision": "server clock, of a line the terminal printed" if m.printed else "server clock",
            }
            for m in self.markers
        ]


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def _header(line: bytes) -> dict:
    try:
        header = json.loads(line)
    except (UnicodeDecodeError, ValueError):
        raise UnreadableRecording("its first line is not JSON, so it is no asciicast recording.") from None
    if not isinstance(header, dict) or header.get("version") != 2:
        raise UnreadableRecording("its first line is not an asciicast version 2 header.")
    return header


def read_recording(path: Path, max_bytes: int = MAX_READ_BYTES) -> Recording | None:
    """The recording at ``path``, or None when there is none; UnreadableRecording when it is not one.

    A recording read before and unchanged since (same size and modification time) is not read again:
    the review page asks on every view, and a finished session's file no longer changes.
    """
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableRecording(f"it cannot be read ({exc.strerror}).") from None
    return _read(str(path), stat.st_size, stat.st_mtime_ns, max_bytes)


@functools.lru_cache(maxsize=64)
def _read(path: str, size: int, mtime_ns: int, max_bytes: int) -> Recording | None:
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableRecording(f"it cannot be opened ({exc.strerror}).") from None
    with handle:
        return parse_recording(handle, max_bytes)


def parse_recording(handle: BinaryIO, max_bytes: int = MAX_READ_BYTES) -> Recording:
    """The recording read from ``handle`` (a file open in binary, at its start); UnreadableRecording when it is
    not one. Reads no further than ``max_bytes``."""
    first = handle.readline(max_bytes)
    header = _header(first)
    stamp = _number(header.get("timestamp"))
    started_at = datetime.fromtimestamp(stamp, tz=UTC) if stamp is not None else None
    width, height = (int(_number(header.get(k)) or 0) for k in ("width", "height"))
    markers: list[Marker] = []
    runs = _TestRuns()
    duration = 0.0
    read = len(first)
    cut = None
    while line := handle.readline(max_bytes - read + 1):
        read += len(line)
        if read > max_bytes:
            cut = max_bytes
            break
        try:
            event = json.loads(line)
        except (UnicodeDecodeError, ValueError):
            continue
        if not isinstance(event, list) or len(event) != 3:
            continue
        t = _number(event[0])
        if t is None:
            continue
        duration = max(duration, t)
        if event[1] == "m":
            label = str(event[2]).strip()[:MAX_LABEL] or "marker"
            markers.append(Marker(t, label))
        elif event[1] == "o" and isinstance(event[2], str):
            markers += runs.feed(t, event[2])
        elif event[1] == "i" and isinstance(event[2], str):
            runs.typed(event[2])
        elif event[1] == "r":
            runs.armed = False
    return Recording(started_at, width, height, duration, tuple(sorted(markers, key=lambda m: m.t)), cut)


class _TestRuns:
    """pytest's closing lines in the terminal's output, whole lines only, across output events.

    Each becomes a marker labelled as printed: the terminal's output is the
    candidate's to shape, so a line found in it proves only that it was shown.

    A closing line counts only between an Enter typed and the next key: the
    screen is also redrawn with old output when an editor exits (after its own
    keys) or a browser attaches again (after the connection's resize event),
    and an old "1 failed" drawn again is no test run.
    """

    def __init__(self) -> None:
        self.partial = ""
        self.armed = False

    def typed(self, data: str) -> None:
        self.armed = data.endswith(("\r", "\n"))

    def feed(self, t: float, data: str) -> list[Marker]:
        *lines, self.partial = re.split(r"[\r\n]", self.partial + data)
        self.partial = self.partial[-MAX_LINE:]
        found = []
        for line in lines:
            match = SUMMARY_RE.match(ANSI_RE.sub("", line).strip())
            if match and self.armed:
                self.armed = False  # one run per command
                found.append(Marker(t, PRINTED + match.group(1).rstrip(", ")[:MAX_LABEL], printed=True))
        return found
