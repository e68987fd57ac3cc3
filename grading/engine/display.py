"""Shape the evidence for the reviewer's eyes: terminal text, the timeline drawing, diffs.

Pure: no Django. Everything here returns plain strings and dicts; the
template layer escapes them (the one exception, ``highlight_diff``, returns
HTML built by Pygments, which escapes every character of its input).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer

from .checks.model import content_text

# CSI (colours, cursor moves), OSC (titles, hyperlinks) and two-byte escapes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
# Control characters other than tab and newline, shown as a visible mark.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean_terminal_text(text: str | None) -> str:
    """A log as a person reads it: colour codes dropped, CRLF to LF, other controls made visible.

    Honest logs may carry colour codes (``--color=yes``); they say nothing a
    reviewer needs, and a raw ESC byte in a page is noise at best.
    """
    if not text:
        return ""
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("\N{REPLACEMENT CHARACTER}", text)


def clean_tree(value):
    """The evidence with every string passed through clean_terminal_text (keys too)."""
    if isinstance(value, str):
        return clean_terminal_text(value)
    if isinstance(value, dict):
        return {clean_tree(k): clean_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_tree(v) for v in value]
    return value


def had_terminal_codes(text: str | None) -> bool:
    return bool(text and _ANSI.search(text))


_DIFF_FORMATTER = HtmlFormatter(nowrap=True)


def highlight_diff(diff: str) -> str:
    """A unified diff as HTML spans (Pygments escapes every character it is given)."""
    return highlight(clean_terminal_text(diff), DiffLexer(), _DIFF_FORMATTER)


def order_files(files: Iterable[Mapping]) -> list[Mapping]:
    """The diff's files, test files first (the cell scored there is about the test), then by path."""
    return sorted(files, key=lambda f: (not f.get("is_test"), str(f.get("path", ""))))


# --- the timeline ---------------------------------------------------------------------

SVG_WIDTH = 820
LABEL_X = 8
AXIS_LEFT, AXIS_RIGHT = 230, SVG_WIDTH - 150
ROW_HEIGHT = 26
TOP = 34


def _parse(at: str | None) -> datetime | None:
    if not at:
        return None
    try:
        value = datetime.fromisoformat(at)
    except (TypeError, ValueError):
        return None
    # why naive: zip DOS times carry no zone; drawing them beside UTC values
    # on one axis is the honest picture of what the zip says (the legend says so).
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def stamp_read(events) -> datetime | None:
    """The time the grader read in model_allowed.at (its "stamp value" event): aware when the text was UTC."""
    for event in events or ():
        if isinstance(event, Mapping) and event.get("name") == "stamp value":
            at = event.get("at")
            try:
                return datetime.fromisoformat(at) if isinstance(at, str) else None
            except ValueError:
                return None
    return None


REFUSED = " (refused)"
EXCHANGE = "model exchange"
RECORDING = "session recording"  # a hosted session's marker (grading/engine/replay.py): a gate step or a test run


def _kind(event: Mapping) -> str:
    name = str(event.get("name", ""))
    if name.startswith("receipt:"):
        return "refused" if name.endswith(REFUSED) else "receipt"
    if name == "stamp value":
        return "stamp"
    if name.startswith(EXCHANGE) and event.get("source") == "server exchange":
        return "exchange"
    if event.get("source") == RECORDING:
        return "marker"
    return "zip"


def _mentioned(event: Mapping, problem: str) -> bool:
    """Whether a problem sentence of the timeline check is about this event."""
    name = str(event.get("name", ""))
    kind = _kind(event)
    if kind in ("receipt", "refused"):
        step = name.split(":", 1)[1].strip().removesuffix(REFUSED)
        if kind == "refused":
            return f"'{step}' step was refused" in problem
        return (f"'{step}'" in problem and "refused" not in problem) or f"{step} receipt" in problem
    if kind == "stamp":
        return "stamp's value" in problem
    if kind in ("exchange", "marker"):
        return False  # why: the timeline check knows nothing of exchanges or of the recording
    # why a word match: "red.log" must not be found inside another name
    return bool(name) and re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", problem) is not None


def layout_timeline(events: Iterable[Mapping], problems: Iterable[str]) -> dict:
    """Positions for an inline SVG of the timeline: one row per event, x by time.

    Returns {width, height, axis_left, axis_right, rows, start, end, undated}.
    Each row: {name, source, precision, when, x, y, kind, flagged, label_x,
    anchor, x_end}; ``kind`` is receipt, refused (a refused receipt), stamp,
    exchange (a model exchange), marker (a hosted session recording's marker) or zip. An event with ``until`` (an exchange's
    reply end) has ``x_end`` there, else None. Events without a time are
    listed under ``undated``.
    """
    problems = list(problems)
    dated: list[tuple[Mapping, datetime, datetime | None]] = []
    undated: list[Mapping] = []
    for event in events:
        when = _parse(event.get("at"))
        if when:
            dated.append((event, when, _parse(event.get("until"))))
        else:
            undated.append(event)
    times = [w for _, w, _ in dated] + [u for _, _, u in dated if u]
    start, end = min(times, default=None), max(times, default=None)
    span = (end - start).total_seconds() if start and end else 0

    def x_of(when: datetime) -> float:
        if start and span > 0:
            return AXIS_LEFT + (AXIS_RIGHT - AXIS_LEFT) * (when - start).total_seconds() / span
        return (AXIS_LEFT + AXIS_RIGHT) / 2

    rows = []
    for i, (event, when, until) in enumerate(dated):
        y = TOP + i * ROW_HEIGHT
        x = x_of(when)
        rows.append(
            {
                "name": str(event.get("name", "")),
                "source": str(event.get("source", "")),
                "precision": str(event.get("precision", "")),
                "local_time": event.get("local_time"),
                "when": when.strftime("%Y-%m-%d %H:%M:%S"),
                "x": round(x, 1),
                "y": y,
                "kind": _kind(event),
                "flagged": any(_mentioned(event, p) for p in problems),
                "points": f"{x:.1f},{y - 6} {x + 6:.1f},{y} {x:.1f},{y + 6} {x - 6:.1f},{y}",
                # why: a label near the right edge would run out of the drawing.
                "label_x": round(x - 9, 1) if x > AXIS_RIGHT - 70 else round(x + 9, 1),
                "anchor": "end" if x > AXIS_RIGHT - 70 else "start",
                "x_end": round(x_of(until), 1) if until else None,
            }
        )
    return {
        "width": SVG_WIDTH,
        "height": TOP + max(len(rows), 1) * ROW_HEIGHT + 8,
        "axis_left": AXIS_LEFT,
        "axis_right": AXIS_RIGHT,
        "axis_y": TOP - 20,
        "rows": rows,
        "start": start.strftime("%Y-%m-%d %H:%M:%S") if start else None,
        "end": end.strftime("%H:%M:%S") if end else None,
        "undated": [str(e.get("name", "")) for e in undated],
    }


def no_times_words(*, archive_accepted: bool, receipts: int, receipts_known: bool, undated: int) -> str:
    """What the stamp section says when its timeline has nothing to draw.

    "No times at all" only when there is nothing at all; otherwise what is
    missing, and where the rest is (the server's receipts, listed below the
    drawing even when they are not drawn in it: a refused archive's evidence
    holds no events, and its receipts come from the database).
    """
    if archive_accepted and not receipts and not undated:
        if not receipts_known:
            return "No times at all: no artifacts and no stamp, and graded without the server's receipts."
        return "No times at all: no artifacts, no stamp, no receipts."
    if not archive_accepted:
        said = "Nothing to draw: the archive was refused, so no artifact or stamp was read from it"
    elif undated:
        said = "Nothing to draw: nothing read from the zip has a time"
    else:
        said = "Nothing to draw: no artifact or stamp in the zip has a time"
    if receipts:
        return f"{said}; the server's receipts ({receipts}) are listed below."
    return f"{said}, and the server holds no receipt."


def _when(at) -> str:
    value = _parse(at if isinstance(at, str) else None)
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else ""


def candidate_clock(text) -> str:
    """The candidate's clock as the gate sent it (aware ISO), written out for reading; anything else as it is."""
    if not isinstance(text, str) or not text:
        return ""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        return text
    if value.tzinfo is None:
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return value.strftime("%Y-%m-%d %H:%M:%S ") + value.strftime("%z")[:3] + ":" + value.strftime("%z")[3:5]


def receipt_rows(receipts: Iterable[Mapping]) -> list[dict]:
    """The evidence's receipts as the page lists them: both clocks written out for reading."""
    return [
        {**r, "when": _when(r.get("at")), "at_utc": _aware(r.get("at")), "local": candidate_clock(r.get("local_time"))}
        for r in receipts
        if isinstance(r, Mapping)
    ]


def with_witness(rows: list[dict], exchanges: Iterable[Mapping]) -> list[dict]:
    """The receipt rows, each with who witnessed it (receipt_witness) for the page's column."""
    times = {e.get("at") for e in exchanges or () if isinstance(e, Mapping)}
    return [{**r, "witness": receipt_witness(r, times)} for r in rows]


WITNESS_WORDS = {
    "server": "captured by the server (it ran the step itself in the hosted workspace)",
    "window": "witnessed by the server's model window (it saw the request go out)",
    "gate": "sent by the candidate's gate.py (the log and file hashes came from the candidate's machine)",
    "refused": "refused only: the server never accepted this step",
    "none": "nothing: the server witnessed no such step",
}


def receipt_witness(receipt: Mapping, exchange_times: Collection[object]) -> str:
    """Who witnessed one receipt: "server" (captured), "window" (the model window's record) or "gate"."""
    if receipt.get("captured_by") == "server":
        return "server"
    # why the time: the model window writes its receipt at the exchange's own time (no gate sends one)
    if receipt.get("step") == "model" and receipt.get("at") in exchange_times:
        return "window"
    return "gate"


def step_witnesses(
    receipts: Iterable[Mapping], exchanges: Iterable[Mapping], *, model_step: bool = True, work_mode: str = "zip"
) -> list[dict]:
    """Per gate step, how the server witnessed it: the strongest of its accepted receipts, or nothing.

    ``unexpected``: a hosted-only version's step that came from outside the
    workspace (gate.py), which such a version does not offer.
    """
    times = {e.get("at") for e in exchanges or () if isinstance(e, Mapping)}
    rows = []
    for step in ("red", "model", "green") if model_step else ("red", "green"):
        mine = [r for r in receipts if isinstance(r, Mapping) and r.get("step") == step]
        kinds = {receipt_witness(r, times) for r in mine if r.get("accepted")}
        how = next((k for k in ("server", "window", "gate") if k in kinds), "refused" if mine else "none")
        rows.append(
            {
                "step": step,
                "how": how,
                "words": WITNESS_WORDS[how],
                "unexpected": work_mode == "hosted" and "gate" in kinds,
            }
        )
    return rows


def _aware(at) -> datetime | None:
    """A server time as an aware UTC datetime (the page adds the reader's local time beside it)."""
    value = _parse(at if isinstance(at, str) else None)
    return value.replace(tzinfo=UTC) if value else None


def gate_log_rows(lines) -> list[dict] | None:
    """The lines of receipts.jsonl with the candidate's clock written out; None when the evidence has none."""
    if not isinstance(lines, list):
        return None
    return [{**line, "local": candidate_clock(line.get("local_time"))} for line in lines if isinstance(line, Mapping)]


# --- the model window ------------------------------------------------------------------

SLOW_S = 30.0  # why: past this a reply is slow enough that a reviewer should see it without looking


def _seconds(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def exchange_events(exchanges) -> list[dict]:
    """The model section's exchanges as timeline events: sent at ``at``, the reply ending ``latency_s`` later."""
    events = []
    for number, e in enumerate(exchanges if isinstance(exchanges, list) else [], start=1):
        if not isinstance(e, Mapping):
            continue
        sent = _parse(e.get("at") if isinstance(e.get("at"), str) else None)
        latency = _seconds(e.get("latency_s"))
        events.append(
            {
                "name": f"{EXCHANGE} {number} ({latency:.1f} s)",
                "at": e.get("at") if sent else None,
                "until": (sent + timedelta(seconds=latency)).isoformat() if sent else None,
                "source": "server exchange",
                "precision": "server clock",
            }
        )
    return events


def _sent_text(message: Mapping) -> str:
    """A message as the page shows it: its text, then anything else it carried, written out.

    why: exchanges recorded before the window rebuilt requests kept what was
    then passed on as sent (image parts, extra keys); a reviewer sees all of it.
    """
    content = message.get("content")
    others = (
        [
            p
            for p in content
            if not (isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str))
        ]
        if isinstance(content, list)
        else []
    )
    if not isinstance(content, (str, list)) and content is not None:
        others.append(content)
    extra = {k: v for k, v in message.items() if k not in ("role", "content")}
    if extra:
        others.append(extra)
    return content_text(content) + "".join(
        f"\n[also sent] {json.dumps(o, ensure_ascii=False, default=str)}" for o in others
    )


def _options_text(options) -> str:
    """The request's other keys as sent ("max_tokens 4096 · temperature 0.2"), the stream's own keys aside."""
    if not isinstance(options, Mapping):
        return ""
    return " · ".join(
        f"{key} {json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value}"
        for key, value in options.items()
        if key not in ("model", "stream", "stream_options")
    )


def exchange_rows(exchanges) -> list[dict]:
    """The exchanges as the page lists them: each message's text, the server's time, slow replies marked.

    Each names its conversation and its turn in it ("Conversation 1, turn 2") and the file the server
    wrote its reply to; a turn after the first sent the conversation's earlier turns again, which are
    the exchanges above it: those messages are set apart (``earlier``) so the page can fold them.
    Evidence taken before conversations were recorded has no ``conversation``: no turn, nothing folded.
    """
    rows = []
    turns: dict[int, int] = {}
    for number, e in enumerate(exchanges if isinstance(exchanges, list) else [], start=1):
        if not isinstance(e, Mapping):
            continue
        sent = found if isinstance(found := e.get("messages"), list) else []
        messages = [{"role": str(m.get("role", "")), "text": _sent_text(m)} for m in sent if isinstance(m, Mapping)]
        latency = _seconds(e.get("latency_s"))
        number_of = e.get("conversation")
        conversation = number_of if isinstance(number_of, int) and number_of > 0 else None
        turn = None
        earlier: list[dict] = []
        if conversation is not None:
            turn = turns[conversation] = turns.get(conversation, 0) + 1
            last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=0)
            if turn > 1:  # why only then: a first turn's messages before the prompt (a system one) are new
                earlier, messages = messages[:last_user], messages[last_user:]
        rows.append(
            {
                "number": number,
                "conversation": conversation,
                "turn": turn,
                "earlier": earlier,
                "artifact": str(e.get("artifact") or ""),
                "at_utc": _aware(e.get("at")),
                "when": _when(e.get("at")),
                "messages": messages,
                "options": _options_text(e.get("options")),
                "client_gone": e.get("client_gone") is True,
                "unfinished": e.get("finished") is False,
                "reply": str(e.get("reply") or ""),
                "model": str(e.get("model") or ""),
                "tokens_in": e.get("tokens_in"),
                "tokens_out": e.get("tokens_out"),
                "latency_s": round(latency, 1),
                "slow": latency >= SLOW_S,
                "error": str(e.get("error") or ""),
            }
        )
    return rows


def comparison_rows(model) -> list[dict]:
    """prompt.txt and model.md beside what went through the window: {name, what, result, exchange, diff}."""
    if not isinstance(model, Mapping):
        return []
    rows = []
    for key, name, what in (
        ("prompt_matches", "prompt.txt", "what was sent"),
        ("reply_matches", "model.md", "the reply received"),
    ):
        c = found if isinstance(found := model.get(key), Mapping) else {}
        rows.append(
            {
                "name": name,
                "what": what,
                "result": str(c.get("result") or "absent"),
                "exchange": c.get("exchange"),
                "diff": str(c.get("diff") or ""),
            }
        )
    return rows


# --- the reruns ------------------------------------------------------------------------

# The reruns that speak for the test (the cell "Test names the bug") and those that speak for the fix.
TEST_RUNS = ("tests_vs_original", "tests_vs_solution")
FIX_RUNS = ("submitted", "reference_vs_submitted")


def is_tampered(evidence: Mapping) -> bool:
    """Whether any rerun of this evidence (decoy runs included) was tampered with."""
    return bool(tampered_runs(evidence.get("runs") or {}))


def tampered_runs(runs: Mapping) -> list[dict]:
    """Every rerun (decoy runs included) whose outcome is ``tampered``, with the reasons found."""
    found = []
    for name in (*FIX_RUNS, *TEST_RUNS):
        run = runs.get(name) or {}
        if run.get("outcome") == "tampered":
            found.append({"run": name, "reasons": list((run.get("integrity") or {}).get("tampered") or [])})
    for decoy in (runs.get("tests_vs_decoys") or {}).get("decoys") or []:
        if decoy.get("outcome") == "tampered":
            found.append(
                {
                    "run": f"decoy {decoy.get('name', '')}",
                    "reasons": list((decoy.get("integrity") or {}).get("tampered") or []),
                }
            )
    return found
