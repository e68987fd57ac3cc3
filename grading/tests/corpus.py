"""Submissions built in code: honest, dishonest and hostile, for the sample packets.

Each builder returns {path: bytes} for a candidate's tree; `zip_with_times`
writes it with an extended-timestamp (UTC) time per entry, as zip tools on
Linux and macOS do, so the timeline has something to read. refund-sum is the
default; `BUSINESS_DAYS` describes the second sample (a src-layout package
with tests/) the same way, for the builders' ``packet`` argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from grading.engine.spec import SAMPLE_PACKETS_DIR, PacketSpec, sample_spec

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


# Minutes after T0 at which an honest candidate wrote each file (refund-sum).
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


@dataclass(frozen=True)
class Sample:
    """What an honest submission to one sample packet holds, beside the packet's own files."""

    slug: str
    test_path: str  # the test file the candidate changes
    honest_test: bytes
    red_log: str  # a log under LOGS
    green_log: str
    prompt: bytes
    model: bytes
    refuse: bytes
    minutes: dict[str, float]

    def spec(self) -> PacketSpec:
        return sample_spec(self.slug)

    def spec_dir(self) -> Path:
        return SAMPLE_PACKETS_DIR / self.slug


REFUND_SUM = Sample("refund-sum", "test_invoices.py", HONEST_TEST, "pytest9_orig_q.log", "pytest9_green_q.log",
                    PROMPT, MODEL, REFUSE, HONEST_MINUTES)

_TERMS_TEST = sample_spec("business-days").fixture["tests/test_terms.py"]
# The fixture's tests (one fails: the Monday invoice), plus one that names the rule the bug breaks.
BUSINESS_DAYS = Sample(
    "business-days",
    "tests/test_terms.py",
    _TERMS_TEST + b'''

@pytest.mark.parametrize(("issued", "terms", "due"), [
    (date(2026, 3, 2), "Net 1", date(2026, 3, 3)),  # Monday: the issue day does not count
    (date(2026, 3, 7), "Net 5", date(2026, 3, 13)),  # Saturday: counted from Monday
    (date(2026, 3, 3), "Net 30", date(2026, 4, 16)),  # six weeks, over Good Friday and Easter Monday
])
def test_due_date_counts_business_days_after_the_issue_day(closures, issued, terms, due):
    assert due_date(issued, terms, holidays=closures) == due
''',
    "business-days/pytest9_orig_q.log",
    "business-days/pytest9_green_q.log",
    b"""payterms.due_date counts the issue day when an invoice is issued on a weekday.
tests/test_terms.py expects Net 1 from Monday 2 March 2026 to be due Tuesday 3 March.
Propose a minimal patch to src/payterms/terms.py. Keep python-dateutil; no new dependency.
Do not touch holidays.txt or the existing tests.
""",
    b"Start the rule on the day after issue: `dtstart=issued + timedelta(days=1)`. "
    b"Or simpler: keep dtstart and use `count + 1` occurrences.\n",
    b"The model also offered to take one more occurrence (count + 1). That is right for a weekday issue but "
    b"a day late for an invoice issued on a Saturday, so I did not apply it.\n",
    {**{k: v for k, v in HONEST_MINUTES.items() if k not in ("test_invoices.py", "invoices.py")},
     "tests/test_terms.py": 2, "src/payterms/terms.py": 6},
)


def honest_files(packet: Sample = REFUND_SUM, **overrides) -> dict[str, bytes]:
    """The ideal submission: red first, a named test, the stamp, the fix, green, a specific refusal."""
    spec = packet.spec()
    files = {
        **spec.solution,
        packet.test_path: packet.honest_test,
        **{p: d for p, d in spec.fixture.items() if p not in spec.solution and p != packet.test_path},
        "artifacts/red.log": red_log(packet.red_log),
        "artifacts/prompt.txt": packet.prompt,
        "artifacts/model_allowed.at": str((T0 + timedelta(minutes=3)).timestamp()).encode(),
        "artifacts/model.md": packet.model,
        "artifacts/green.log": red_log(packet.green_log),
        "artifacts/refuse.md": packet.refuse,
    }
    files.update(overrides)
    return {k: v for k, v in files.items() if v is not None}


def zip_with_times(path: Path, files: dict[str, bytes], minutes: dict[str, float] | None = None,
                   prefix: str = "", packet: Sample = REFUND_SUM) -> Path:
    """A zip whose entries carry UTC times T0 + minutes (default: the packet's honest order)."""
    minutes = {**packet.minutes, **(minutes or {})}
    entries = []
    for name, data in files.items():
        when = T0 + timedelta(minutes=minutes.get(name, 0))
        entries.append(RawEntry(prefix + name, data, date_time=when.timetuple()[:6], extra=extended_time(when)))
    return write_raw_zip(path, entries)
