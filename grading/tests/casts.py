"""Hand-written asciicast v2 recordings, and stored where the review page reads a hosted session's recording."""

import json
from pathlib import Path

from grading.pages import recording_name
from shared import stored

STARTED = 1_796_126_400.0  # 2026-12-01 12:00:00 UTC


def cast_bytes(events, started: float = STARTED, width: int = 80, height: int = 24) -> bytes:
    """A recording: the header, then one ``[t, code, data]`` line per event."""
    lines = [json.dumps({"version": 2, "width": width, "height": height, "timestamp": started})]
    lines += [json.dumps(list(e)) for e in events]
    return ("\n".join(lines) + "\n").encode()


def write_cast(path: Path, events, **kwargs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(cast_bytes(events, **kwargs))
    return path


# A short session: the failing run, red captured at 4.5 s, the fix, green captured at 9.25 s.
SESSION = [
    (0.2, "o", "$ "),
    (1.0, "i", "python -m pytest -q\r"),
    (1.1, "o", "python -m pytest -q\r\n"),
    (2.4, "o", "F\r\n\x1b[31mFAILED test_invoices.py::test_refunds\x1b[0m\r\n1 failed in 0.05s\r\n$ "),
    (4.5, "m", "red captured"),
    (6.0, "o", "nano invoices.py\r\n"),
    (8.0, "i", "\x1b[A\r"),  # the same command again, from the shell's history
    (8.8, "o", ".\r\n\x1b[32m1 passed in 0.04s\x1b[0m\r\n$ "),
    (9.25, "m", "green captured"),
    (12.0, "o", "$ "),
]


def cast_for(submission, events=SESSION, **kwargs) -> str:
    """The submission's session recorded as ``events``, stored as its workspace host stores it; its stored name."""
    name = recording_name(submission.invitation)
    stored.save(name, cast_bytes(events, **kwargs))
    return name
