"""Do red, stamp and green run forward in time?

Three kinds of clock, trusted in this order:

1. the server's gate receipts (aware UTC, the server's clock): the strongest;
   when receipts show two steps in order, the zip times of that pair are not
   held against the candidate (editors and copies touch files afterwards);
2. the stamp's value (``time.time()`` written by the gate, UTC, a decimal
   comma accepted; a naive ISO value is taken as the candidate's local time,
   like a DOS time);
3. the zip entries' times: the extended-timestamp field (UTC) when there is
   one, the DOS time (no zone, 2 s steps) otherwise.

Comparison rule: like with like. Two zip entries are compared in UTC when both
have it, else by their DOS times (same machine, same zone). The stamp's UTC
value is compared with a UTC zip time directly, and with a DOS time only when
they differ by more than 14 hours (the widest offset from UTC) plus 2 s.
Differences within 2 s count as equal (DOS resolution). Equal times are never
a problem: ``git archive`` gives every entry one time. When all the zip times
of red.log, model_allowed.at and green.log are equal, the zip shows no order
and the stamp's value is not compared with them either. Receipts allow five
minutes between the candidate's clock and the server's; when every receipt's
``local_time`` (the gate sends the candidate's clock, aware ISO) agrees on one
offset from the server within those five minutes, the stamp is moved by that
offset before it is compared with receipts (a machine whose clock is hours
off is honest; scattered local times prove nothing and move nothing).

The model's reply (model.md) is held to the same clocks: it must not be
older than red.log (zip times, like with like, unless red.log's own zip time
is later than the stamp file's or green.log's while receipts show those steps
in order: then red.log was touched after its run and its time says nothing),
nor than the stamp's value (only when the zip shows an order), nor than the
red receipt on the server's clock (only for a UTC zip time, and only when the
receipts' ``local_time`` gives the candidate's clock offset). A blank
model.md is a placeholder, not a reply: it is not compared.

A packet whose model policy is "none" has no model step: green.log without
a stamp is no problem there, and red before green is what is checked.

Refused receipts are events too (``receipt: <step> (refused)``), but never
count as a step: every order check uses accepted receipts only.

Also: the stamp's value must not be later than model_allowed.at's own zip
time (the file is written when the value is taken; copies only make it
newer), with 2 s (or 14 h across clocks) plus five minutes of slack; this
holds even when the zip shows no order, and catches a value typed far in the
future. Zip times before 1980-01-02 are no date (reproducible zips) and are
not compared with the stamp. Two DOS times that run backwards by at most an
hour, both on the same date between 00:00 and 04:00 wall time, may straddle
the autumn clock change and are not held against the candidate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

SAME = timedelta(seconds=2)
ZONE = timedelta(hours=14)
CLOCK_SKEW = timedelta(minutes=5)
DST = timedelta(hours=1)
NO_DATE = datetime(1980, 1, 2)  # DOS "no date" (1980-01-01) and reproducible-build zips
STEPS = ("red", "model", "green", "upload")
ORDER = ("red.log", "prompt.txt", "model_allowed.at", "model.md", "green.log", "refuse.md", "notes.md")


class EntryTime(Protocol):
    # read-only, so that a frozen dataclass (grading.engine.archive.EntryTime) is one
    @property
    def utc(self) -> datetime | None:
        """Aware UTC, from the extended-timestamp field."""

    @property
    def local(self) -> datetime:
        """Naive DOS time, zone unknown."""


@dataclass(frozen=True)
class ZipTime:
    """A zip entry's times, for callers without their own type."""

    local: datetime
    utc: datetime | None = None


@dataclass(frozen=True)
class Receipt:
    """The server's record of one gate step (or of the upload), accepted or refused.

    ``log_text`` is what the gate sent with the step (the test run's output for
    red and green, the prompt for model; the last 200,000 characters), and
    ``tree_hashes`` the sha256 of every file of the candidate's folder then.
    ``captured_by`` is "server" when the server ran the tests itself (a hosted
    session), "candidate" when the gate on the candidate's machine sent the log.
    ``integrity``: a server capture's integrity record (grading.engine.integrity),
    empty for a receipt from before the server judged its captures.
    """

    step: str
    at: datetime
    local_time: str | None = None
    accepted: bool = True
    refusal: str = ""
    log_text: str = ""
    tree_hashes: Mapping[str, str] = field(default_factory=dict)
    id: int | None = None
    captured_by: str = "candidate"
    integrity: Mapping = field(default_factory=dict)

    @property
    def event_name(self) -> str:
        return f"receipt: {self.step}" if self.accepted else f"receipt: {self.step} (refused)"


@dataclass(frozen=True)
class Event:
    name: str
    at: datetime | None
    source: str
    precision: str
    local_time: str | None = None

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "at": self.at.isoformat() if self.at else None,
            "source": self.source,
            "precision": self.precision,
            "local_time": self.local_time,
        }


@dataclass(frozen=True)
class Timeline:
    ok: bool
    events: tuple[Event, ...] = ()
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"ok": self.ok, "events": [e.to_dict() for e in self.events], "problems": list(self.problems)}


def parse_stamp(text: str | None) -> datetime | None:
    """The stamp's time: aware UTC from a float or aware ISO; naive from a naive ISO."""
    s = (text or "").strip().lstrip("\ufeff").strip()
    if not s:
        return None
    if s.count(",") == 1 and "." not in s and s.replace(",", "").isdigit():
        s = s.replace(",", ".")  # a decimal comma, as some locales print time.time()
    try:
        seconds = float(s)
    except ValueError:
        try:
            value = datetime.fromisoformat(s)
        except ValueError:
            return None
        return value.astimezone(UTC) if value.tzinfo else value
    if not math.isfinite(seconds) or seconds <= 0:
        return None
    if seconds > 1e11:  # milliseconds, as JavaScript's Date.now() writes
        seconds /= 1000
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _fmt(value: datetime) -> str:
    return value.isoformat(sep=" ", timespec="seconds")


def _zip_pair(a: EntryTime, b: EntryTime) -> tuple[datetime, datetime]:
    """Two entries' times on the same clock: UTC when both have it, else their DOS times."""
    if a.utc is not None and b.utc is not None:
        return a.utc, b.utc
    return a.local, b.local


def _stamp_slack(stamp: datetime, entry: EntryTime) -> tuple[datetime, timedelta]:
    """The entry's time comparable with the stamp, and how far apart they may be."""
    if stamp.tzinfo is None:
        return entry.local, SAME
    if entry.utc is not None:
        return entry.utc, SAME
    # Unknown zone: drop the zone from both and allow the widest offset.
    return entry.local.replace(tzinfo=None), ZONE + SAME


def _dst_fold(earlier: datetime, later: datetime) -> bool:
    """Two wall-clock times that may straddle an autumn clock change (back one hour).

    Only for DOS times (no zone): both in the small hours, the later at most
    one hour (plus DOS resolution) behind the earlier.
    """
    return (
        earlier.tzinfo is None
        and earlier - later <= DST + SAME
        and all(t.hour < 4 for t in (earlier, later))
        and earlier.date() == later.date()
    )


def _candidate_offset(receipts: list[Receipt]) -> timedelta | None:
    """How far the candidate's clock ran from the server's, from the receipts' ``local_time``.

    The gate sends its own clock (aware ISO) with each step; the offset is
    used only when every readable receipt agrees on it within CLOCK_SKEW
    (a wrong clock is steady; scattered values prove nothing).
    """
    offsets = []
    for r in receipts:
        try:
            local = datetime.fromisoformat((r.local_time or "").strip().replace("Z", "+00:00"))
        except ValueError:
            continue
        if local.tzinfo is not None:
            offsets.append(local - r.at)
    if not offsets or max(offsets) - min(offsets) > CLOCK_SKEW:
        return None
    offsets.sort()
    return offsets[len(offsets) // 2]


def _first_receipts(receipts: Iterable[Receipt]) -> dict[str, Receipt]:
    first: dict[str, Receipt] = {}
    for r in sorted(receipts, key=lambda r: r.at):
        first.setdefault(r.step, r)
    return first


def build_timeline(
    times: Mapping[str, EntryTime],
    stamp_text: str | None,
    receipts: Iterable[Receipt] = (),
    *,
    reply_written: bool = True,
    model_step: bool = True,
) -> Timeline:
    """Collect every time we know of the three steps and state what runs backwards.

    ``times`` maps artifact names (``red.log`` or ``artifacts/red.log``) to zip
    entry times; ``stamp_text`` is model_allowed.at's text; ``receipts`` are
    the server's. ``reply_written`` False says model.md is blank (a placeholder
    made early is no reply): its time is shown but not compared.
    ``model_step`` False says the packet has no model step (policy "none"):
    no stamp is expected, and red before green is what is checked. The
    comparison rule is in the module docstring.
    """
    entries = {name.rsplit("/", 1)[-1]: t for name, t in times.items()}
    everything = list(receipts)
    # why: a refused step never happened as far as the order goes; it is shown, not counted
    receipts = [r for r in everything if r.accepted]
    stamp = parse_stamp(stamp_text)
    events: list[Event] = []
    problems: list[str] = []

    for r in sorted(everything, key=lambda r: (r.at, STEPS.index(r.step) if r.step in STEPS else 9)):
        events.append(Event(r.event_name, r.at, "server receipt", "server clock", r.local_time))
    if stamp is not None:
        zone = "UTC" if stamp.tzinfo else "candidate's local time, zone unknown"
        events.append(Event("stamp value", stamp, f"model_allowed.at ({zone})", "sub-second"))
    for name in sorted(entries, key=lambda n: (ORDER.index(n) if n in ORDER else 99, n)):
        t = entries[name]
        if t.utc is not None:
            events.append(Event(name, t.utc, "zip extended timestamp (UTC)", "1 s"))
        else:
            events.append(Event(name, t.local, "zip DOS time (zone unknown)", "2 s"))

    first = _first_receipts(receipts)
    # Receipts first: the server's clock, stated as such.
    for i, earlier in enumerate(STEPS):
        for later in STEPS[i + 1 :]:
            a, b = first.get(earlier), first.get(later)
            if a and b and b.at < a.at:
                problems.append(f"server receipts: '{later}' ({_fmt(b.at)}) came before '{earlier}' ({_fmt(a.at)})")

    def receipts_in_order(x: str, y: str) -> bool:
        return x in first and y in first and first[x].at <= first[y].at

    red, stamp_file, green = (entries.get(n) for n in ("red.log", "model_allowed.at", "green.log"))
    if green is not None and stamp is None and model_step:
        what = "missing or empty" if not (stamp_text or "").strip() else "not a time"
        problems.append(f"green.log is there but model_allowed.at is {what}")
    elif stamp is None and (stamp_text or "").strip():
        problems.append("model_allowed.at does not hold a time the grader can read")

    # Zip entries among themselves (like with like).
    checks = (
        (red, stamp_file, "red.log", "model_allowed.at", ("red", "model"), "was written after"),
        (red, green, "red.log", "green.log", ("red", "green"), "is newer than"),
        (stamp_file, green, "model_allowed.at", "green.log", ("model", "green"), "is newer than"),
    )
    pairs_seen = []
    for before, after, b_name, a_name, steps, verb in checks:
        pair = _zip_pair(before, after) if before is not None and after is not None else None
        if pair is None:
            continue
        pairs_seen.append(abs(pair[0] - pair[1]) <= SAME)
        if pair[0] > pair[1] + SAME and not receipts_in_order(*steps) and not _dst_fold(*pair):
            problems.append(f"zip times: {b_name} ({_fmt(pair[0])}) {verb} {a_name} ({_fmt(pair[1])})")
    zip_shows_order = bool(pairs_seen) and not all(pairs_seen)

    # The stamp's value against the zip times, only when the zip shows an order.
    if stamp is not None and zip_shows_order:
        for entry, name, steps in ((red, "red.log", ("red", "model")), (green, "green.log", ("model", "green"))):
            found = _stamp_slack(stamp, entry) if entry is not None else None
            if found is None or receipts_in_order(*steps):
                continue
            when, slack = found
            value = stamp.replace(tzinfo=None) if slack > SAME else stamp
            if name == "red.log" and when > value + slack:
                problems.append(f"the stamp's value ({_fmt(stamp)}) is before red.log's zip time ({_fmt(when)})")
            if name == "green.log" and value > when + slack:
                problems.append(f"green.log's zip time ({_fmt(when)}) is older than the stamp's value ({_fmt(stamp)})")

    # The model's reply against the red run and the stamp.
    if reply_written:
        problems += _reply_problems(entries, stamp, zip_shows_order, first, _candidate_offset(everything))

    # The stamp's value against model_allowed.at's own zip time: the file was
    # written when the value was taken, and copies only make it newer, so a
    # value later than the file (a stamp typed by hand, far in the future)
    # cannot be. A time before 1980-01-02 is no date.
    if stamp is not None and stamp_file is not None:
        when, slack = _stamp_slack(stamp, stamp_file)
        if when.replace(tzinfo=None) >= NO_DATE:
            value = stamp.replace(tzinfo=None) if slack > SAME else stamp
            if value > when + slack + CLOCK_SKEW:
                problems.append(
                    f"the stamp's value ({_fmt(stamp)}) is later than model_allowed.at's own zip time ({_fmt(when)})"
                )

    # The stamp's value against the server's receipts, on the server's clock
    # when the receipts show the candidate's clock was steadily off.
    if stamp is not None:
        offset = _candidate_offset(everything) if stamp.tzinfo else None
        slack = CLOCK_SKEW if stamp.tzinfo else CLOCK_SKEW + ZONE
        value = stamp - offset if offset is not None else stamp
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        if "red" in first and value + slack < first["red"].at:
            problems.append(
                f"server receipts: the stamp's value ({_fmt(stamp)}) is before the red "
                f"receipt ({_fmt(first['red'].at)})"
            )
        if "green" in first and first["green"].at + slack < value:
            problems.append(
                f"server receipts: the green receipt ({_fmt(first['green'].at)}) is before "
                f"the stamp's value ({_fmt(stamp)})"
            )
        if "upload" in first and first["upload"].at + slack < value:
            problems.append(
                f"server receipts: the stamp's value ({_fmt(stamp)}) is in the future of the "
                f"upload ({_fmt(first['upload'].at)})"
            )

    return Timeline(ok=not problems, events=tuple(events), problems=tuple(problems))


def _reply_problems(
    entries: Mapping[str, EntryTime],
    stamp: datetime | None,
    zip_shows_order: bool,
    first: Mapping[str, Receipt],
    offset: timedelta | None,
) -> list[str]:
    """model.md (the model's reply) older than the red run or than the stamp.

    A reply saved before the red run is the "fix with the model first, revert,
    run red, restore" order. Each comparison keeps the rules above: like with
    like, 2 s of resolution, equal times prove nothing, and a red.log whose
    zip time is evidently not its run's (newer than a later step's file while
    the receipts show that step after red) is not compared.
    """
    reply, red = entries.get("model.md"), entries.get("red.log")
    if reply is None:
        return []
    problems = []

    def touched_after(later_name: str, step: str) -> bool:
        later = entries.get(later_name)
        pair = _zip_pair(red, later) if red is not None and later is not None else None
        return (
            pair is not None
            and pair[0] > pair[1] + SAME
            and "red" in first
            and step in first
            and first["red"].at <= first[step].at
        )

    pair = _zip_pair(red, reply) if red is not None else None
    if (
        pair is not None
        and pair[0] > pair[1] + SAME
        and not _dst_fold(*pair)
        and not touched_after("model_allowed.at", "model")
        and not touched_after("green.log", "green")
    ):
        problems.append(
            f"zip times: model.md, the model's reply ({_fmt(pair[1])}), is older than red.log "
            f"({_fmt(pair[0])}): the reply was saved before the red run"
        )

    if stamp is not None and zip_shows_order:
        when, slack = _stamp_slack(stamp, reply)
        if when.replace(tzinfo=None) >= NO_DATE:
            value = stamp.replace(tzinfo=None) if slack > SAME else stamp
            if when + slack < value:
                problems.append(
                    f"model.md's zip time ({_fmt(when)}) is older than the stamp's value "
                    f"({_fmt(stamp)}): the reply was saved before the model window opened"
                )

    # On the server's clock: only a UTC time, moved by a known, steady offset.
    if (
        "red" in first
        and offset is not None
        and reply.utc is not None
        and reply.utc.replace(tzinfo=None) >= NO_DATE
        and reply.utc - offset + CLOCK_SKEW < first["red"].at
    ):
        problems.append(
            f"server receipts: model.md's zip time ({_fmt(reply.utc)}) is before the red receipt "
            f"({_fmt(first['red'].at)}): the reply was saved before the red run"
        )
    return problems
