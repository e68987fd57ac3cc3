"""Hand-written asciicast v2 recordings, laid out where a hosted session's recording lives."""

import json
from pathlib import Path

from grading.pages import recording_path

STARTED = 1_796_126_400.0  # 2026-12-01 12:00:00 UTC


def write_cast(path: Path, events, started: float = STARTED, width: int = 80, height: int = 24) -> Path:
    """A recording: the header, then one ``[t, code, data]`` line per event."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"version": 2, "width": width, "height": height, "timestamp": started})]
    lines += [json.dumps(list(e)) for e in events]
    path.write_text("\n".join(lines) + "\n")
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


def cast_for(submission, events=SESSION, **kwargs) -> Path:
    return write_cast(recording_path(submission.invitation), events, **kwargs)
