"""The hosted terminal's recording, as an asciicast v2 file (plain Python, no Django).

One file per invitation. The first writer puts the header line
``{"version": 2, "width", "height", "timestamp"}``; every later line is one
event ``[t, code, data]`` with ``t`` in seconds since the header's timestamp and
``code`` one of "o" (output), "i" (input), "r" (resize, data "COLSxROWS") or
"m" (a marker such as "red captured"). A reconnect appends to the same file,
so a reviewer replays the whole session on one clock.

Several processes write the same file (the terminal's consumer, the server's
captures through ``append_marker``): each line is written whole under an
exclusive flock on the file, in append mode.

Past ``max_bytes`` the output and input are no longer recorded; one marker says
so. Markers are still appended: they are small, and the reviewer needs them.
The reader skips a torn last line (a writer killed mid-line).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

CAP_MARKER = "recording stopped: the size cap was reached"


@dataclass(frozen=True)
class Header:
    width: int
    height: int
    timestamp: float


@dataclass(frozen=True)
class Event:
    time: float
    code: str  # "o", "i", "r" or "m"
    data: str


def _locked_append(path: Path, lines: list[str], header: Header | None = None) -> tuple[Header, int]:
    """Append ``lines`` (each without its newline) under the file's lock; write ``header`` first when the file is new.

    Returns the header in the file and the file's size after the write.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size == 0:
            # whole seconds, as the file says it, so every writer counts from the same instant
            width, height = (header.width, header.height) if header else (80, 24)
            header = Header(width, height, float(int(time.time())))
            lines = [
                json.dumps(
                    {"version": 2, "width": header.width, "height": header.height, "timestamp": int(header.timestamp)}
                ),
                *lines,
            ]
        else:
            header = read_header(path)
        data = "".join(line + "\n" for line in lines).encode()
        if data:
            os.write(fd, data)
        return header, size + len(data)
    finally:
        os.close(fd)  # releases the lock


def read_header(path: Path) -> Header:
    """The header of an existing recording; ValueError when the first line is not one."""
    with open(path, "rb") as f:
        first = f.readline()
    try:
        head = json.loads(first)
        if not isinstance(head, dict) or head.get("version") != 2:
            raise ValueError
        return Header(int(head["width"]), int(head["height"]), float(head["timestamp"]))
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{path.name} does not start with an asciicast v2 header") from None


def _event_line(header: Header, code: str, data: str, now: float | None = None) -> str:
    t = max(0.0, (time.time() if now is None else now) - header.timestamp)
    return json.dumps([round(t, 6), code, data], ensure_ascii=False)


def append_marker(path: Path | str, label: str) -> None:
    """Append one marker ``[t, "m", label]`` (the header first if the file is new)."""
    path = Path(path)
    header = read_header(path) if path.exists() and path.stat().st_size else None
    if header is None:
        _locked_append(path, [], None)
        header = read_header(path)
    _locked_append(path, [_event_line(header, "m", label)])


class Recorder:
    """Records one terminal connection into ``path``, up to ``max_bytes`` of file."""

    def __init__(self, path: Path | str, width: int, height: int, max_bytes: int):
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.header, size = _locked_append(self.path, [], Header(width, height, time.time()))
        # A file already over the cap was stopped by an earlier connection, which said so.
        self.stopped = size >= max_bytes

    def _write(self, code: str, data: str) -> None:
        if self.stopped or not data:
            return
        line = _event_line(self.header, code, data)
        _, size = _locked_append(self.path, [line])
        if size >= self.max_bytes:
            self.stopped = True
            _locked_append(self.path, [_event_line(self.header, "m", CAP_MARKER)])

    def output(self, data: str) -> None:
        self._write("o", data)

    def input(self, data: str) -> None:
        self._write("i", data)

    def resize(self, cols: int, rows: int) -> None:
        self._write("r", f"{cols}x{rows}")


def read_events(path: Path | str) -> tuple[Header, list[Event]]:
    """The header and events of a recording, for the reviewer's replay.

    A line that does not parse is skipped: the last one may be torn by a writer
    that died mid-line. ValueError when the file has no header.
    """
    path = Path(path)
    header = read_header(path)
    events: list[Event] = []
    with open(path, "rb") as f:
        f.readline()
        for raw in f:
            try:
                t, code, data = json.loads(raw)
                if code not in ("o", "i", "r", "m") or not isinstance(data, str):
                    continue
                events.append(Event(float(t), code, data))
            except (ValueError, TypeError):
                continue
    return header, events


def copy_written(path: Path | str, dest: Path | str) -> int:
    """Copy the lines written to the recording so far into ``dest`` (made anew); returns how many bytes.

    The size is read under the writers' lock, where no line is half-written, and only that much is
    copied: the file only grows at its end, so what lies before never changes, and writers go on
    meanwhile. FileNotFoundError when there is no recording.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.fstat(fd).st_size
        fcntl.flock(fd, fcntl.LOCK_UN)
        with open(fd, "rb", closefd=False) as source, open(dest, "wb") as out:
            left = size
            while left:
                chunk = source.read(min(left, 1 << 20))
                if not chunk:
                    break
                out.write(chunk)
                left -= len(chunk)
        return size - left
    finally:
        os.close(fd)
