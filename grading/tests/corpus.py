"""Submissions built in code: honest, dishonest and hostile, for the sample packet.

Each builder returns {path: bytes} for a candidate's tree; `zip_with_times`
writes it with an extended-timestamp (UTC) time per entry, as zip tools on
Linux and macOS do, so the timeline has something to read.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from grading.spec import sample_spec

from .zips import RawEntry, extended_time, write_raw_zip

LOGS = Path(__file__).parent / "logs"
T0 = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)

HONEST_TEST = b'''from pathlib import Path

import invoices

FIXTURE = Path(__file__).parent / "sample.csv"


def test_refund_rows_subtract_their_negative_cents():
    # 1000 + 500 + (-200): a refund lowers the total.
    assert invoices.total(FIXTURE) == 1300
'''

OVERFIT_TEST = HONEST_TEST.replace(b"== 1300", b"== 1700").replace(b"# 1000 + 500 + (-200): a refund lowers the total.", b"# matches what the helper returns")

PROMPT = b"""invoices.py uses abs() on cents. Refunds are negative.
test_invoices.py should expect 1300 for sample.csv.
Propose a minimal patch. Do not add new files.
Do not drop rows. Do not pull in pandas.
"""
MODEL = b"Remove the abs() call: `n += int(row[\"cents\"])`. Alternatively drop negative rows.\n"
REFUSE = (b"The model also offered to drop the refund rows from the CSV. Dropping rows changes "
          b"revenue, it does not fix the sum, so I did not apply it.\n")


def red_log(name: str = "pytest9_orig_q.log") -> bytes:
    return (LOGS / name).read_bytes()


def honest_files(**overrides) -> dict[str, bytes]:
    """The ideal submission: red first, a named test, the stamp, the fix, green, a specific refusal."""
    spec = sample_spec()
    files = {
        "invoices.py": spec.solution["invoices.py"],
        "test_invoices.py": HONEST_TEST,
        "sample.csv": spec.fixture["sample.csv"],
        "artifacts/red.log": red_log(),
        "artifacts/prompt.txt": PROMPT,
        "artifacts/model_allowed.at": str((T0 + timedelta(minutes=3)).timestamp()).encode(),
        "artifacts/model.md": MODEL,
        "artifacts/green.log": red_log("pytest9_green_q.log"),
        "artifacts/refuse.md": REFUSE,
    }
    files.update(overrides)
    return {k: v for k, v in files.items() if v is not None}


# Minutes after T0 at which an honest candidate wrote each file.
HONEST_MINUTES = {
    "artifacts/red.log": 1,
    "test_invoices.py": 2,
    "artifacts/prompt.txt": 2,
    "artifacts/model_allowed.at": 3,
    "artifacts/model.md": 4,
    "invoices.py": 6,
    "artifacts/green.log": 7,
    "artifacts/refuse.md": 9,
}


def zip_with_times(path: Path, files: dict[str, bytes], minutes: dict[str, float] | None = None,
                   prefix: str = "") -> Path:
    """A zip whose entries carry UTC times T0 + minutes (default: the honest order)."""
    minutes = {**HONEST_MINUTES, **(minutes or {})}
    entries = []
    for name, data in files.items():
        when = T0 + timedelta(minutes=minutes.get(name, 0))
        entries.append(RawEntry(prefix + name, data, date_time=when.timetuple()[:6], extra=extended_time(when)))
    return write_raw_zip(path, entries)
