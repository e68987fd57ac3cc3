"""Timeline check: honest archives of every kind are in order, backwards ones are not."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from grading.engine.checks.timeline import Receipt, ZipTime, build_timeline, parse_stamp

UTC = UTC
T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)  # the red run, in UTC


def utc(minutes: float, seconds: float = 0) -> ZipTime:
    """An entry with an extended timestamp (and its DOS time in UTC+2)."""
    at = T0 + timedelta(minutes=minutes, seconds=seconds)
    return ZipTime(utc=at, local=(at + timedelta(hours=2)).replace(tzinfo=None))


def dos(minutes: float, offset_hours: float = 0, seconds: float = 0) -> ZipTime:
    """An entry with a bare DOS time, written in a zone ``offset_hours`` from UTC."""
    at = T0 + timedelta(minutes=minutes, seconds=seconds, hours=offset_hours)
    return ZipTime(local=at.replace(tzinfo=None, second=at.second - at.second % 2))


def stamp(minutes: float) -> str:
    return repr((T0 + timedelta(minutes=minutes)).timestamp() + 0.347)


def receipt(step: str, minutes: float) -> Receipt:
    return Receipt(step, T0 + timedelta(minutes=minutes), local_time=None)


IDEAL = {"red.log": utc(0), "prompt.txt": utc(3), "model_allowed.at": utc(5), "model.md": utc(9),
         "green.log": utc(30), "refuse.md": utc(40)}
GIT_ARCHIVE_NEXT_DAY = {n: utc(24 * 60) for n in IDEAL}
HONEST = [
    ("ideal, UTC zip times", IDEAL, stamp(5), []),
    ("ideal, with receipts", IDEAL, stamp(5),
     [receipt("red", 0), receipt("model", 5), receipt("green", 30), receipt("upload", 45)]),
    ("artifacts/ prefixed names", {f"artifacts/{n}": t for n, t in IDEAL.items()}, stamp(5), []),
    ("DOS times, candidate in UTC+9", {"red.log": dos(0, 9), "model_allowed.at": dos(5, 9),
                                       "green.log": dos(30, 9)}, stamp(5), []),
    ("DOS times, candidate in UTC-10", {"red.log": dos(0, -10), "model_allowed.at": dos(5, -10),
                                        "green.log": dos(30, -10)}, stamp(5), []),
    ("DOS times, UTC+14", {"red.log": dos(0, 14), "model_allowed.at": dos(1, 14),
                           "green.log": dos(2, 14)}, stamp(1), []),
    ("git archive: every entry the commit's time", GIT_ARCHIVE_NEXT_DAY, stamp(5), []),
    ("git archive with DOS times only", {n: dos(24 * 60, 3) for n in IDEAL}, stamp(5), []),
    ("stamp and red in the same 2 s", {"red.log": dos(0, seconds=3), "model_allowed.at": dos(0, seconds=1),
                                       "green.log": dos(1)}, stamp(0), []),
    ("mixed: only some entries have UTC", {"red.log": utc(0), "model_allowed.at": dos(5, 2),
                                           "green.log": utc(30)}, stamp(5), []),
    ("red.log re-saved after green, receipts in order",
     {"red.log": utc(50), "model_allowed.at": utc(5), "green.log": utc(30)}, stamp(5),
     [receipt("red", 0), receipt("model", 5), receipt("green", 30), receipt("upload", 55)]),
    ("stamp with whitespace and CRLF", IDEAL, "  " + stamp(5) + "\r\n", []),
    ("stamp in ISO format, UTC", IDEAL, (T0 + timedelta(minutes=5)).isoformat(), []),
    ("stamp in ISO format with Z", IDEAL, "2024-05-01T10:05:00Z", []),
    ("naive ISO stamp, same zone as DOS times",
     {"red.log": dos(0, 2), "model_allowed.at": dos(5, 2), "green.log": dos(30, 2)},
     "2024-05-01T12:05:00", []),
    ("candidate clock 3 minutes ahead of the server", IDEAL, stamp(5 + 3),
     [receipt("red", 0), receipt("model", 5), receipt("green", 30), receipt("upload", 31)]),
    ("out of time: red only", {"red.log": utc(0), "notes.md": utc(80)}, None, []),
    ("red run twice, receipts", IDEAL, stamp(5),
     [receipt("red", 0), receipt("model", 5), receipt("red", 20), receipt("green", 30), receipt("upload", 45)]),
    ("nothing at all", {}, None, []),
]


@pytest.mark.parametrize("case,times,stamp_text,receipts", HONEST, ids=[c[0] for c in HONEST])
def test_honest_timeline_is_ok(case, times, stamp_text, receipts):
    timeline = build_timeline(times, stamp_text, receipts)
    assert timeline.ok, timeline.problems
    assert timeline.to_dict()["problems"] == []


BACKWARDS = [
    ("green older than red (UTC)", {"red.log": utc(30), "model_allowed.at": utc(31), "green.log": utc(0)},
     stamp(31), [], "zip times: red.log (2024-05-01 10:30:00+00:00) is newer than green.log"),
    ("green older than red (DOS)", {"red.log": dos(30, 5), "model_allowed.at": dos(31, 5),
                                    "green.log": dos(0, 5)}, None, [], "zip times: red.log"),
    ("stamp file before red", {"red.log": utc(10), "model_allowed.at": utc(5), "green.log": utc(30)},
     stamp(5), [], "zip times: red.log (2024-05-01 10:10:00+00:00) was written after model_allowed.at"),
    ("green older than stamp file", {"red.log": utc(0), "model_allowed.at": utc(40), "green.log": utc(30)},
     stamp(40), [], "zip times: model_allowed.at (2024-05-01 10:40:00+00:00) is newer than green.log"),
    ("hand-written stamp value before red", {"red.log": utc(10), "model_allowed.at": utc(60),
                                             "green.log": utc(61)}, stamp(5), [],
     "the stamp's value (2024-05-01 10:05:00+00:00) is before red.log's zip time"),
    ("stamp value a day before red's DOS time", {"red.log": dos(24 * 60), "model_allowed.at": dos(24 * 60 + 5),
                                                 "green.log": dos(24 * 60 + 9)}, stamp(0), [],
     "the stamp's value"),
    ("green's DOS time a day before the stamp", {"red.log": dos(-3000), "model_allowed.at": dos(-2),
                                                 "green.log": dos(-1500)}, stamp(0), [],
     "green.log's zip time"),
    ("green with no stamp", {"red.log": utc(0), "green.log": utc(30)}, None, [],
     "green.log is there but model_allowed.at is missing or empty"),
    ("green with an empty stamp", {"red.log": utc(0), "green.log": utc(30)}, " \n", [],
     "green.log is there but model_allowed.at is missing or empty"),
    ("green with a stamp that is not a time", IDEAL, "ok, model allowed", [],
     "green.log is there but model_allowed.at is not a time"),
    ("receipts: model before red", GIT_ARCHIVE_NEXT_DAY, stamp(5),
     [receipt("model", 5), receipt("red", 10), receipt("green", 30), receipt("upload", 45)],
     "server receipts: 'model'"),
    ("receipts: green before model", GIT_ARCHIVE_NEXT_DAY, stamp(5),
     [receipt("red", 0), receipt("green", 3), receipt("model", 5), receipt("upload", 45)],
     "server receipts: 'green'"),
    ("stamp in the future of the upload", GIT_ARCHIVE_NEXT_DAY, stamp(2 * 24 * 60),
     [receipt("red", 0), receipt("upload", 45)], "server receipts: the stamp's value"),
    ("stamp value before the red receipt", GIT_ARCHIVE_NEXT_DAY, stamp(-60),
     [receipt("red", 0), receipt("model", 5), receipt("upload", 45)],
     "server receipts: the stamp's value (2024-05-01 09:00:00+00:00) is before the red receipt"),
]


@pytest.mark.parametrize("case,times,stamp_text,receipts,problem", BACKWARDS, ids=[c[0] for c in BACKWARDS])
def test_backwards_timeline_is_a_problem(case, times, stamp_text, receipts, problem):
    timeline = build_timeline(times, stamp_text, receipts)
    assert not timeline.ok
    assert any(p.startswith(problem) for p in timeline.problems), timeline.problems


def test_events_and_dict_shape():
    timeline = build_timeline({"red.log": dos(0), "green.log": utc(30), "model_allowed.at": utc(5)},
                              stamp(5), [Receipt("upload", T0 + timedelta(hours=1), "2024-05-01 12:00")])
    data = timeline.to_dict()
    assert data["ok"] is True and data["problems"] == []
    assert [e["name"] for e in data["events"]] == [
        "receipt: upload", "stamp value", "red.log", "model_allowed.at", "green.log"]
    assert data["events"][0] == {"name": "receipt: upload", "at": "2024-05-01T11:00:00+00:00",
                                 "source": "server receipt", "precision": "server clock",
                                 "local_time": "2024-05-01 12:00"}
    assert data["events"][1]["at"] == "2024-05-01T10:05:00.347000+00:00"
    assert data["events"][2]["at"] == "2024-05-01T10:00:00"  # no offset: zone unknown
    assert data["events"][2]["source"] == "zip DOS time (zone unknown)"


@pytest.mark.parametrize("text,expected", [
    ("1714557900.5", datetime(2024, 5, 1, 10, 5, 0, 500000, tzinfo=UTC)),
    ("1714557900500", datetime(2024, 5, 1, 10, 5, 0, 500000, tzinfo=UTC)),
    ("\ufeff1714557900\n", datetime(2024, 5, 1, 10, 5, tzinfo=UTC)),
    ("2024-05-01T12:05:00+02:00", datetime(2024, 5, 1, 10, 5, tzinfo=UTC)),
    ("2024-05-01 12:05:00", datetime(2024, 5, 1, 12, 5)),
    ("", None), (None, None), ("nan", None), ("-1", None), ("1e400", None), ("tomorrow", None),
])
def test_parse_stamp(text, expected):
    assert parse_stamp(text) == expected


# Found in review ---------------------------------------------------------------

def skewed(step: str, minutes: float, ahead: timedelta, zone: timedelta = timedelta(hours=2)) -> Receipt:
    """A receipt whose local_time is the candidate's clock, ``ahead`` of the server's."""
    at = T0 + timedelta(minutes=minutes)
    local = (at + ahead).astimezone(timezone(zone)).isoformat(timespec="seconds")
    return Receipt(step, at, local_time=local)


def steps(ahead: timedelta) -> list[Receipt]:
    return [skewed("red", 0, ahead), skewed("model", 5, ahead), skewed("green", 30, ahead),
            skewed("upload", 45, ahead)]


def wall(y: int, mo: int, d: int, h: int, mi: int) -> ZipTime:
    return ZipTime(local=datetime(y, mo, d, h, mi))


NO_DATE = ZipTime(local=datetime(1980, 1, 1))
REVIEW_HONEST = [
    ("stamp with a decimal comma", IDEAL, stamp(5).replace(".", ","), []),
    # The candidate's clock is wrong by hours; the gate's local_time shows it.
    ("candidate clock 2 h ahead, receipts say so", {n: utc(t.utc and (t.utc - T0).total_seconds() / 60 + 120)
                                                    for n, t in IDEAL.items()}, stamp(5 + 120),
     steps(timedelta(hours=2))),
    ("candidate clock 3 h behind, receipts say so", GIT_ARCHIVE_NEXT_DAY, stamp(5 - 180),
     steps(timedelta(hours=-3))),
    # Europe, last Sunday of October: 03:00 becomes 02:00; DOS times only.
    ("DOS times across the autumn clock change",
     {"red.log": wall(2024, 10, 27, 2, 50), "model_allowed.at": wall(2024, 10, 27, 2, 55),
      "green.log": wall(2024, 10, 27, 2, 10)}, "1729990500.1", []),
    ("reproducible zip: every entry 1980-01-01", {n: NO_DATE for n in IDEAL}, stamp(5), []),
    ("DOS times across midnight on New Year's Eve",
     {"red.log": wall(2024, 12, 31, 23, 58), "model_allowed.at": wall(2024, 12, 31, 23, 59),
      "green.log": wall(2025, 1, 1, 0, 20)}, "1735689540.0", []),
]


@pytest.mark.parametrize("case,times,stamp_text,receipts", REVIEW_HONEST, ids=[c[0] for c in REVIEW_HONEST])
def test_more_honest_timelines_are_ok(case, times, stamp_text, receipts):
    timeline = build_timeline(times, stamp_text, receipts)
    assert timeline.ok, timeline.problems


REVIEW_BACKWARDS = [
    ("stamp typed far in the future, git archive, no receipts", GIT_ARCHIVE_NEXT_DAY, stamp(3 * 24 * 60), [],
     "the stamp's value (2024-05-04 10:00:00+00:00) is later than model_allowed.at's own zip time"),
    ("stamp value later than its own file (UTC)", IDEAL, stamp(25), [],
     "the stamp's value (2024-05-01 10:25:00+00:00) is later than model_allowed.at's own zip time"),
    ("a steady offset does not excuse a stamp before the red receipt", GIT_ARCHIVE_NEXT_DAY, stamp(5 - 180 - 60),
     steps(timedelta(hours=-3)), "server receipts: the stamp's value"),
    ("scattered local times prove no offset", GIT_ARCHIVE_NEXT_DAY, stamp(5 - 180),
     [skewed("red", 0, timedelta(hours=-3)), skewed("model", 5, timedelta(0)), skewed("upload", 45, timedelta(0))],
     "server receipts: the stamp's value"),
    ("DOS green an hour before red at noon is no clock change",
     {"red.log": wall(2024, 10, 27, 12, 50), "model_allowed.at": wall(2024, 10, 27, 12, 55),
      "green.log": wall(2024, 10, 27, 12, 10)}, None, [], "zip times: red.log"),
]


@pytest.mark.parametrize("case,times,stamp_text,receipts,problem", REVIEW_BACKWARDS,
                         ids=[c[0] for c in REVIEW_BACKWARDS])
def test_more_backwards_timelines_are_problems(case, times, stamp_text, receipts, problem):
    timeline = build_timeline(times, stamp_text, receipts)
    assert not timeline.ok
    assert any(p.startswith(problem) for p in timeline.problems), timeline.problems


@pytest.mark.parametrize("text,expected", [
    ("1714557900,5", datetime(2024, 5, 1, 10, 5, 0, 500000, tzinfo=UTC)),
    ("1,714,557,900", None),
])
def test_parse_stamp_decimal_comma(text, expected):
    assert parse_stamp(text) == expected


# The model's reply and refused receipts ---------------------------------------------------

def refused(step: str, minutes: float) -> Receipt:
    return Receipt(step, T0 + timedelta(minutes=minutes), accepted=False, refusal="Green before model is a skip")


# Fix with the model first, revert, run red, restore, green: the reply is older than the red run.
FIX_FIRST = {"model.md": utc(0), "prompt.txt": utc(0, -30), "red.log": utc(0, 6), "model_allowed.at": utc(0, 7),
             "green.log": utc(0, 8)}
REPLY_HONEST = [
    ("reply in the same 2 s as red.log", {**IDEAL, "model.md": utc(0, 1)}, stamp(0), []),
    ("git archive: reply and red.log equal", {n: utc(60) for n in FIX_FIRST}, stamp(0), []),
    ("prompt written before red is fine", {**IDEAL, "prompt.txt": utc(-10)}, stamp(5), []),
    ("red.log touched after green, receipts in order", {**IDEAL, "red.log": utc(50)}, stamp(5),
     [receipt("red", 0), receipt("model", 5), receipt("green", 30), receipt("upload", 55)]),
    ("DOS times across the autumn clock change",
     {"red.log": wall(2024, 10, 27, 2, 50), "model_allowed.at": wall(2024, 10, 27, 2, 55),
      "model.md": wall(2024, 10, 27, 2, 5), "green.log": wall(2024, 10, 27, 2, 10)}, "1729990500.1", []),
    ("DOS times, candidate in UTC-10, reply after the stamp",
     {"red.log": dos(0, -10), "model_allowed.at": dos(5, -10), "model.md": dos(9, -10), "green.log": dos(30, -10)},
     stamp(5), []),
    ("clock 3 h behind, said by the receipts", {n: utc((t.utc - T0).total_seconds() / 60 - 180)
                                                 for n, t in IDEAL.items()}, stamp(5 - 180),
     steps(timedelta(hours=-3))),
    ("reproducible zip, receipts with local times", {n: NO_DATE for n in IDEAL}, stamp(5), steps(timedelta(0))),
    ("a refused green before the model step counts for nothing", GIT_ARCHIVE_NEXT_DAY, stamp(5),
     [receipt("red", 0), refused("green", 2), receipt("model", 5), receipt("green", 30)]),
]


@pytest.mark.parametrize("case,times,stamp_text,receipts", REPLY_HONEST, ids=[c[0] for c in REPLY_HONEST])
def test_honest_replies_are_ok(case, times, stamp_text, receipts):
    timeline = build_timeline(times, stamp_text, receipts)
    assert timeline.ok, timeline.problems


REPLY_BACKWARDS = [
    ("fix with the model first, zip times", FIX_FIRST, stamp(7 / 60), [],
     "zip times: model.md, the model's reply (2024-05-01 10:00:00+00:00), is older than red.log "
     "(2024-05-01 10:00:06+00:00): the reply was saved before the red run"),
    ("fix with the model first, DOS times", {n: dos(0, 2, (t.utc - T0).total_seconds()) for n, t in FIX_FIRST.items()},
     None, [], "zip times: model.md, the model's reply"),
    ("fix with the model first, receipts in order", FIX_FIRST, stamp(7 / 60),
     [Receipt("red", T0 + timedelta(seconds=6)), Receipt("model", T0 + timedelta(seconds=7)),
      Receipt("green", T0 + timedelta(seconds=8))], "zip times: model.md, the model's reply"),
    ("reply saved before the stamp", {**IDEAL, "model.md": utc(2)}, stamp(5), [],
     "model.md's zip time (2024-05-01 10:02:00+00:00) is older than the stamp's value"),
    ("reply before the red receipt, red.log touched later", {**IDEAL, "red.log": utc(50), "model.md": utc(-30)},
     stamp(5), steps(timedelta(0)),
     "server receipts: model.md's zip time (2024-05-01 09:30:00+00:00) is before the red receipt"),
]


@pytest.mark.parametrize("case,times,stamp_text,receipts,problem", REPLY_BACKWARDS,
                         ids=[c[0] for c in REPLY_BACKWARDS])
def test_a_reply_older_than_the_red_run_is_a_problem(case, times, stamp_text, receipts, problem):
    timeline = build_timeline(times, stamp_text, receipts)
    assert not timeline.ok
    assert any(p.startswith(problem) for p in timeline.problems), timeline.problems


def test_refused_receipts_are_events_but_not_steps():
    timeline = build_timeline(GIT_ARCHIVE_NEXT_DAY, stamp(5), [receipt("red", 0), refused("model", 1),
                                                               receipt("model", 5), receipt("green", 30)])
    names = [e.name for e in timeline.events if e.source == "server receipt"]
    assert names == ["receipt: red", "receipt: model (refused)", "receipt: model", "receipt: green"]
    assert timeline.ok
    # A refused green is no green: the stamp is not held against it.
    late = build_timeline(GIT_ARCHIVE_NEXT_DAY, stamp(5), [receipt("red", 0), refused("green", 1),
                                                           receipt("model", 5)])
    assert late.ok, late.problems


def test_a_blank_reply_made_early_is_no_reply():
    # A candidate who made empty artifact files at the start and never pasted a reply.
    assert build_timeline(FIX_FIRST, stamp(7 / 60), reply_written=False).ok
    assert not build_timeline(FIX_FIRST, stamp(7 / 60)).ok
