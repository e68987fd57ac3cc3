"""Read a hosted session's recording (asciicast v2) for the reviewer's replay: when it began and its markers.

The recording is written by the terminal (grading/asciicast.py): a header
line ``{"version": 2, "width", "height", "timestamp"}``, then one event per
line, ``[t, code, data]`` with ``t`` in seconds since the header's
timestamp. Markers are ``[t, "m", label]`` ("red captured", "green
captured", "submitted", ...). The reviewer's page lists them as buttons that
seek the player, and draws them on the timeline at ``timestamp + t``.

Only the markers and the last event's time are kept; output and input
events are skipped as they are read, so a long session costs one pass over
the file and no memory. Lines that are not events are skipped, never fatal:
a recording cut short by a crash still replays up to its last whole line.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

# Read no further than this: the terminal caps what it records, and a file past it is not ours to parse whole.
MAX_READ_BYTES = 64 << 20
MAX_LABEL = 200


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


@dataclass(frozen=True)
class Recording:
    started_at: datetime | None  # the header's timestamp (UTC); None when it has none
    width: int
    height: int
    duration: float  # the last event's time
    markers: tuple[Marker, ...]
    cut_at_bytes: int | None = None  # read only this far (MAX_READ_BYTES)

    @property
    def red(self) -> Marker | None:
        """The first marker of red's capture: where "Jump to red" seeks."""
        return next((m for m in self.markers if m.is_red), None)

    def marker_events(self) -> list[dict]:
        """The markers as timeline events (the evidence's event shape), on the server's clock."""
        if self.started_at is None:
            return []
        return [{"name": f"recording: {m.label}", "at": (self.started_at + timedelta(seconds=m.t)).isoformat(),
                 "source": "session recording", "precision": "server clock"} for m in self.markers]


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
    """The recording at ``path``, or None when there is none; UnreadableRecording when it is not one."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableRecording(f"it cannot be opened ({exc.strerror}).") from None
    with handle:
        header = _header(handle.readline(max_bytes))
        stamp = _number(header.get("timestamp"))
        started_at = datetime.fromtimestamp(stamp, tz=UTC) if stamp is not None else None
        width, height = (int(_number(header.get(k)) or 0) for k in ("width", "height"))
        markers: list[Marker] = []
        duration = 0.0
        read = handle.tell()
        cut = None
        for line in handle:
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
    return Recording(started_at, width, height, duration, tuple(sorted(markers, key=lambda m: m.t)), cut)
