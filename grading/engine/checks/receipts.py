"""What the server witnessed of the gate, held against the uploaded zip.

The timeline (``timeline.py``) orders the steps by their times. This module
reads what else the server knows (every receipt up to the upload, accepted
or refused, with the log and the file hashes the gate sent, and the
invitation's deadline) and what the gate wrote on the candidate's side
(``artifacts/receipts.jsonl``), and names what does not fit:

- no gate receipt at all; an artifact of a step (red.log, the stamp,
  green.log) with no accepted receipt of that step;
- a refused step the server never accepted afterwards;
- red to green witnessed implausibly fast (``min_red_to_green``, 20 s by
  default: no time to ask a model, read the reply and apply a fix);
- a step witnessed after the deadline;
- ``artifacts/red.log`` that is not the log any red receipt stored;
- a red run that did not run on the bug: no red receipt from before the
  model window opened hashed the packet's production files as the original
  files (one that did is enough: a candidate may run red again);
- files changed after the green receipt (the passing run the server saw was
  not of the uploaded files);
- a receipts.jsonl line that claims a receipt the server does not have.

False alarms cost an honest candidate, so what honest work produces is a
*note* (a neutral sentence), never a *problem*: a step the gate ran without
the server (``--offline``, or the server unreachable) and recorded as "not
witnessed" in receipts.jsonl; a refused step that the server accepted later
(the gate said no, the candidate did what it asked); hashes that differ only
by line endings or a UTF-8 byte-order mark (a Windows checkout or editor,
``git archive``); files the green run had that a zip of tracked files left
out; documentation (``.md``, ``.txt``, ``.rst``) written after green.
Nothing here reads a zip time: the clocks are the timeline's business.

A hosted session's steps are captured by the server itself (a receipt's
``captured_by`` is "server"): there is no gate.py, so no receipts.jsonl is
asked for, and its red log is genuine by construction (``server_capture``)
when the server's run held up: a capture is judged as any rerun (canaries,
the witness, JUnit against text against exit code), and its receipt keeps
that judge's record (``integrity``).

Plain Python, no Django: the pipeline passes the receipts and the deadline.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from grading.engine.archive import JUNK_FILES, JUNK_PARTS
from grading.engine.spec import ARTIFACTS_DIR, BUNDLE_PATHS

from .artifacts import decode_text
from .timeline import EntryTime, Receipt, build_timeline

MIN_RED_TO_GREEN = timedelta(seconds=20)
# How the server words a step gate.py refused on the candidate's machine (sessions_app.actions writes
# these; the checks below read them): out of order (green before model...), or on the tests' outcome.
GATE_REFUSED_ORDER = "Out of order: gate.py refused this step on the candidate's machine"
GATE_REFUSED_OUTCOME = "gate.py refused this step on the candidate's machine"
GATE_REFUSED_OFFLINE = " (offline; sent when it was next online)"


def gate_refusal_kind(refusal: str | None) -> str | None:
    """ "order" or "outcome" for a step gate.py refused on the candidate's machine; None for the server's own."""
    if not refusal:
        return None
    if refusal.startswith(GATE_REFUSED_ORDER):
        return "order"
    if refusal.startswith(GATE_REFUSED_OUTCOME):
        return "outcome"
    return None


# What a receipt keeps of a log (gate.py's and sessions_app.actions' LOG_LIMIT).
LOG_LIMIT = 200_000
GATE_STEPS = ("red", "model", "green")
STEP_ARTIFACT = {"red": "red.log", "model": "model_allowed.at", "green": "green.log"}
RECEIPTS_LOG = f"{ARTIFACTS_DIR}/receipts.jsonl"
# Folders the gate leaves out when it hashes the tree (gate.py's SKIP_DIRS).
GATE_SKIP_DIRS = {
    ".venv",
    "venv",
    "env",
    ".git",
    ".hg",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    "node_modules",
    ".idea",
    ".vscode",
}
DOC_SUFFIXES = (".md", ".txt", ".rst")
MAX_LOG_LINES = 500
MAX_LINE_CHARS = 500
MAX_JSON_CHARS = 16 << 10  # the gate's lines are far shorter; a longer one is read as text
MAX_NAMED = 6
BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Check:
    """One comparison of a receipt with the zip: ``ok`` is None for a plain fact."""

    ok: bool | None
    text: str

    def to_dict(self) -> dict:
        return {"ok": self.ok, "text": self.text}


@dataclass(frozen=True)
class ReceiptRow:
    """A receipt as the review page lists it, with what it was compared with."""

    receipt: Receipt
    after_deadline: bool
    checks: tuple[Check, ...] = ()

    def to_dict(self) -> dict:
        r = self.receipt
        return {
            "id": r.id,
            "step": r.step,
            "at": r.at.isoformat(),
            "accepted": r.accepted,
            "refusal": r.refusal or None,
            "local_time": r.local_time or None,
            "after_deadline": self.after_deadline,
            "checks": [c.to_dict() for c in self.checks],
            "captured_by": r.captured_by,
        }


@dataclass(frozen=True)
class GateLogLine:
    """One line of artifacts/receipts.jsonl, as the gate writes it (or not)."""

    number: int
    text: str  # the line as written, cut to MAX_LINE_CHARS
    step: str | None = None
    local_time: str | None = None
    witnessed: bool | None = None  # None: not a line the gate writes
    why: str | None = None  # why it was not witnessed
    receipt: str | None = None  # the receipt id the server answered with
    refused: bool = False
    refusal: str | None = None
    known: bool | None = None  # the server holds that receipt (None: nothing to look up)

    def to_dict(self) -> dict:
        return {
            "line": self.number,
            "text": self.text,
            "step": self.step,
            "local_time": self.local_time,
            "witnessed": self.witnessed,
            "why": self.why,
            "receipt": self.receipt,
            "refused": self.refused,
            "refusal": self.refusal,
            "known": self.known,
        }


@dataclass(frozen=True)
class WitnessReport:
    rows: tuple[ReceiptRow, ...] = ()
    gate_log: tuple[GateLogLine, ...] = ()
    gate_log_cut: int = 0  # lines of receipts.jsonl not kept
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # for the stamp's headline: offline work (the server saw nothing of it)


def offline_warning(lines: Iterable[GateLogLine]) -> str | None:
    """The headline's warning when receipts.jsonl records steps the gate ran (or refused) without the server.

    why a warning, not a note: the order of those steps rests on the candidate's own files; "nothing
    runs backwards" would read as if the server had seen them. Not a problem: a network can fail.
    """
    offline = [line for line in lines if line.witnessed is False and line.step]
    if not offline:
        return None
    steps = []
    for line in offline:
        what = f"{line.step}{' (refused)' if line.refused else ''}"
        if what not in steps:
            steps.append(what)
    whys = sorted({_short(line.why or "no reason given", 60) for line in offline})
    return (
        f"Offline work: artifacts/receipts.jsonl records {len(offline)} step{'s' if len(offline) > 1 else ''} "
        f"the gate ran without the server ({', '.join(steps)}; {'; '.join(whys[:3])}). The server did not "
        "witness them: their order rests on the zip's own times and the stamp."
    )


def _fmt(value: datetime) -> str:
    return value.isoformat(sep=" ", timespec="seconds")


def _named(paths: Iterable[str]) -> str:
    paths = sorted(paths)
    shown = ", ".join(paths[:MAX_NAMED])
    return shown + (f" and {len(paths) - MAX_NAMED} more" if len(paths) > MAX_NAMED else "")


def _short(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def content_hashes(data: bytes) -> set[str]:
    """The sha256 of a file as it is and as a Windows checkout, an editor or ``git archive`` may turn it.

    Line endings LF or CRLF, with or without a UTF-8 byte-order mark: the
    same text, so the same file for every comparison with a receipt. Binary
    data (a NUL byte) is taken as it is.
    """
    digests = {hashlib.sha256(data).hexdigest()}
    if b"\0" in data:
        return digests
    body = data[len(BOM) :] if data.startswith(BOM) else data
    lf = body.replace(b"\r\n", b"\n")
    for text in (lf, lf.replace(b"\n", b"\r\n")):
        digests.add(hashlib.sha256(text).hexdigest())
        digests.add(hashlib.sha256(BOM + text).hexdigest())
    return digests


def same_log(zip_text: str, receipt_text: str) -> bool:
    """Is the zip's log the one a receipt stored (its last LOG_LIMIT characters)?

    Line endings, a byte-order mark, trailing white space and the encoding of
    non-ASCII characters are ignored: the gate writes red.log with the
    platform's defaults (CRLF and cp1252 on Windows) and sends the text.
    """

    def key(text: str) -> str:
        text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
        return "".join(c if c < "\x80" else "?" for c in text).rstrip()

    theirs, ours = key(zip_text), key(receipt_text)
    if not ours:
        return False
    if len(receipt_text) >= LOG_LIMIT:  # the receipt kept only the end
        return theirs.endswith(ours)
    return theirs == ours


def server_capture(red_log: str | None, receipts: Iterable[Receipt] | None) -> Receipt | None:
    """The accepted red receipt the server captured itself whose log is ``red_log``; None when there is none.

    A hosted session's red log is the server's own run of the packet's tests
    (the upload carries it from the receipt). Whether that run held up is
    the receipt's ``integrity`` (``capture_confirmed``).
    """
    if red_log is None:
        return None
    for r in reversed(list(receipts or ())):
        if r.step == "red" and r.accepted and r.captured_by == "server" and same_log(red_log, r.log_text):
            return r
    return None


def capture_confirmed(receipt: Receipt) -> str | None:
    """None when the server's run behind ``receipt`` held up; else why it cannot vouch for its log.

    why: the server's run executes the candidate's code, which shares
    pytest's interpreter; only its judge (canaries planted and run, the
    witness, JUnit against text against exit code) makes its log a real run.
    A receipt without the judge's record comes from before captures were judged.
    """
    record = receipt.integrity or {}
    if not record:
        return "the server's run was not judged (a capture from before captures were)"
    if record.get("tampered"):
        return f"the server's run was tampered with: {record['tampered'][0]}"
    if record.get("unconfirmed"):
        return f"the server's run cannot be confirmed: {record['unconfirmed'][0]}"
    if not record.get("canaries"):
        return "no canary test ran in the server's run"
    return None


def _compared_path(path: str) -> bool:
    """Files both the gate's hashes and the upload speak for: not artifacts, not junk, not our download's."""
    parts = path.split("/")
    if parts[0] == ARTIFACTS_DIR or path in BUNDLE_PATHS:
        return False
    if any(p in GATE_SKIP_DIRS or p in JUNK_PARTS for p in parts[:-1]):
        return False
    name = parts[-1]
    return not (name in JUNK_FILES or name.startswith("._") or name.endswith((".pyc", ".pyo")))


def parse_gate_log(data: bytes | None, receipts: Iterable[Receipt] = ()) -> tuple[tuple[GateLogLine, ...], int]:
    """The lines of artifacts/receipts.jsonl, and how many were cut.

    A line the gate wrote is a JSON object with ``step``, ``local_time`` and
    ``witnessed``; a witnessed one names the server's ``receipt`` id (and
    ``refusal`` when refused), one not witnessed says ``why``. A witnessed
    line's receipt is looked up among the server's receipts (``known``) when
    those carry ids. Anything else is kept as text (``witnessed`` None).
    """
    if not data:
        return (), 0
    ids = {(str(r.id), r.step) for r in receipts if r.id is not None}
    lines = [line for line in decode_text(data).split("\n") if line.strip()]
    parsed = []
    for number, line in enumerate(lines[:MAX_LOG_LINES], 1):
        text = line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"
        try:
            # why the bound and RecursionError: the log is the candidate's file, and
            # a line of nested brackets ended grading with a RecursionError.
            entry = json.loads(line) if len(line) <= MAX_JSON_CHARS else None
        except (ValueError, RecursionError):
            entry = None
        if not isinstance(entry, dict) or not isinstance(entry.get("witnessed"), bool):
            parsed.append(GateLogLine(number, text))
            continue

        def field(name: str, width: int = 300, entry: dict = entry) -> str | None:
            value = entry.get(name)
            return None if value is None or isinstance(value, (dict, list)) else str(value)[:width]

        step, receipt = field("step", 20), field("receipt", 40)
        witnessed = entry["witnessed"]
        known = None
        if witnessed and receipt is not None and ids:
            known = (receipt, step) in ids
        parsed.append(
            GateLogLine(
                number,
                text,
                step=step,
                local_time=field("local_time", 64),
                witnessed=witnessed,
                why=None if witnessed else (field("why") or "no reason given"),
                receipt=receipt,
                refused=entry.get("accepted") is False,
                refusal=field("refusal"),
                known=known,
            )
        )
    return tuple(parsed), max(0, len(lines) - MAX_LOG_LINES)


def _red_checks(r: Receipt, red_log: str | None, production: Mapping[str, bytes]) -> list[Check]:
    checks = []
    if red_log is None:
        checks.append(Check(None, "no artifacts/red.log in the zip to compare its log with"))
    elif same_log(red_log, r.log_text):
        checks.append(Check(True, "its log is artifacts/red.log"))
    else:
        checks.append(Check(False, "its log is not artifacts/red.log"))
    missing = [p for p in production if p not in r.tree_hashes]
    differ = [p for p in production if p in r.tree_hashes and r.tree_hashes[p] not in content_hashes(production[p])]
    if differ:
        checks.append(Check(False, f"it ran on a changed {_named(differ)}, not the packet's original (the bug)"))
    if missing:
        checks.append(Check(False, f"it holds no hash of {_named(missing)}"))
    if production and not differ and not missing:
        checks.append(Check(True, f"it ran on the packet's original {_named(production)} (the bug)"))
    return checks


def _green_changes(r: Receipt, files: Mapping[str, bytes]) -> tuple[list[str], list[str], list[str]]:
    """Files changed, added and removed since the green receipt's hashes (compared paths only)."""
    hashed = {p: h for p, h in r.tree_hashes.items() if _compared_path(p)}
    uploaded = {p: d for p, d in files.items() if _compared_path(p)}
    changed = [p for p in uploaded if p in hashed and hashed[p] not in content_hashes(uploaded[p])]
    added = [p for p in uploaded if p not in hashed]
    removed = [p for p in hashed if p not in uploaded]
    return changed, added, removed


def check_receipts(
    receipts: Iterable[Receipt],
    files: Mapping[str, bytes],
    production: Mapping[str, bytes],
    *,
    deadline: datetime | None = None,
    min_red_to_green: timedelta = MIN_RED_TO_GREEN,
    model_step: bool = True,
) -> WitnessReport:
    """Compare the server's receipts with the uploaded files; name what does not fit.

    ``receipts`` are every receipt of the invitation up to the upload,
    refused ones included; ``files`` the uploaded tree ({path: bytes}, the
    download's gate.py and README.txt already left out); ``production`` the
    packet's original production files (the fixture's version of each path
    the reference solution replaces). ``model_step`` False: the packet has no
    model step (policy "none"). The rules are in the module docstring.
    """
    receipts = sorted(receipts, key=lambda r: r.at)
    gate = [r for r in receipts if r.step in GATE_STEPS]
    accepted = {step: [r for r in gate if r.step == step and r.accepted] for step in GATE_STEPS}
    log_lines, cut = parse_gate_log(files.get(RECEIPTS_LOG), receipts)
    offline: dict[str, list[GateLogLine]] = {}
    for line in log_lines:
        if line.witnessed is False and line.step:
            offline.setdefault(line.step, []).append(line)
    red_text = files.get(f"{ARTIFACTS_DIR}/red.log")
    red_log = decode_text(red_text) if red_text is not None else None
    prompt = files.get(f"{ARTIFACTS_DIR}/prompt.txt")
    problems: list[str] = []
    notes: list[str] = []

    def offline_steps() -> str:
        return "; ".join(f"{line.step}: {_short(line.why or '', 60)}" for lines in offline.values() for line in lines)

    # No receipt at all, or a step's artifact with no receipt of that step.
    # why not for a hosted session: the server captured its steps itself; there is no gate.py to keep a log.
    hosted = any(r.captured_by == "server" for r in gate)
    if gate and RECEIPTS_LOG not in files and not hosted:
        notes.append(
            f"The server holds {len(gate)} gate receipt{'s' if len(gate) > 1 else ''}, but the zip has no "
            "artifacts/receipts.jsonl, the log the gate writes with every step."
        )
    if not gate:
        if offline:
            notes.append(
                f"The server witnessed no gate step; artifacts/receipts.jsonl records steps the gate ran "
                f"without it ({offline_steps()}). The order rests on the zip's times and the stamp alone."
            )
        else:
            where = "records none" if RECEIPTS_LOG in files else "is not in the zip"
            steps = "red, model or green" if model_step else "red or green"
            problems.append(
                f"server receipts: the server witnessed no gate step (no {steps} receipt), "
                f"and artifacts/receipts.jsonl {where}: nothing shows the gate was run"
            )
    else:
        for step, artifact in STEP_ARTIFACT.items():
            if f"{ARTIFACTS_DIR}/{artifact}" not in files or accepted[step]:
                continue
            if any(r.step == step for r in gate):
                continue  # refused: said below
            if step in offline:
                notes.append(
                    f"{artifact} has no {step} receipt: artifacts/receipts.jsonl says the gate ran the "
                    f"{step} step without the server ({_short(offline[step][-1].why or '', 80)})."
                )
            elif step == "model":
                problems.append(
                    "server receipts: model_allowed.at (the stamp) is in the zip but the server has no "
                    "model receipt: the model window was opened without the server seeing it"
                )
            else:
                problems.append(
                    f"server receipts: {artifact} is in the zip but the server has no {step} receipt: "
                    f"the {step} step was never witnessed"
                )

    # Steps gate.py refused on the candidate's machine (sent with the step's name): out of order is a
    # problem unless the step was accepted before or after it (a red run again once the model window
    # was open; a green before the model, then done in order); a refusal on the tests' outcome ("still
    # red") is what honest work meets, so a note.
    for step in GATE_STEPS:
        local = [r for r in gate if r.step == step and not r.accepted and gate_refusal_kind(r.refusal)]
        if not local:
            continue
        times = "once" if len(local) == 1 else f"{len(local)} times"
        last = local[-1]
        order = [r for r in local if gate_refusal_kind(r.refusal) == "order"]
        said = f"{times} (last at {_fmt(last.at)}: {_short(last.refusal, 200)})"
        if order and not accepted[step]:
            problems.append(
                f"server receipts: gate.py refused the '{step}' step {said}, out of order, and the "
                "server never accepted that step"
            )
        elif accepted[step]:
            notes.append(
                f"gate.py refused the '{step}' step {said}; the server accepted that step at "
                f"{', '.join(_fmt(r.at) for r in accepted[step][:3])}."
            )
        else:
            notes.append(f"gate.py refused the '{step}' step {said}, and the server never accepted that step.")

    # Refused steps: a problem unless the server accepted that step later.
    for step in GATE_STEPS:
        refused = [r for r in gate if r.step == step and not r.accepted and not gate_refusal_kind(r.refusal)]
        if not refused:
            continue
        later = [r for r in accepted[step] if r.at > refused[-1].at]
        times = "once" if len(refused) == 1 else f"{len(refused)} times"
        last = refused[-1]
        late = f", after the deadline ({_fmt(deadline)})" if deadline is not None and last.at > deadline else ""
        if later:
            notes.append(
                f"The server refused the '{step}' step {times} (last at {_fmt(last.at)}: "
                f"{_short(last.refusal)}), then accepted it at {_fmt(later[0].at)}."
            )
        else:
            problems.append(
                f"server receipts: the '{step}' step was refused {times} (last at {_fmt(last.at)}"
                f"{late}: {_short(last.refusal)}) and never accepted after it"
            )

    # Red to green too fast to have asked a model anything (or, without a model step, to write a fix).
    if accepted["green"] and accepted["red"]:
        green = accepted["green"][0]
        reds = [r for r in accepted["red"] if r.at <= green.at]
        if reds and green.at - reds[-1].at < min_red_to_green:
            gap = (green.at - reds[-1].at).total_seconds()
            problems.append(
                f"server receipts: red to green took {gap:.1f} s (red receipt {_fmt(reds[-1].at)}, green "
                f"receipt {_fmt(green.at)}); under {min_red_to_green.total_seconds():g} s leaves no time "
                + (
                    "to ask a model, read the reply and apply a fix"
                    if model_step
                    else "to read the failure and write a fix"
                )
            )

    # Steps after the deadline, in one sentence.
    if deadline is not None:
        after = {step: [r for r in accepted[step] if r.at > deadline] for step in GATE_STEPS}
        first_after = {step: rs[0] for step, rs in after.items() if rs}
        if len(first_after) == 1:
            ((step, r),) = first_after.items()
            problems.append(
                f"server receipts: the '{step}' step was witnessed at {_fmt(r.at)}, after the "
                f"deadline ({_fmt(deadline)})"
            )
        elif first_after:
            names = [f"'{step}'" for step in first_after]
            first_late = min(r.at for r in first_after.values())
            problems.append(
                f"server receipts: the {', '.join(names[:-1])} and {names[-1]} steps were witnessed "
                f"after the deadline ({_fmt(deadline)}), the first at {_fmt(first_late)}"
            )

    # The red receipts' logs and hashes against the zip. Checks are kept per
    # receipt object (receipts hold a dict, so they cannot be keys themselves).
    rows_checks: dict[int, list[Check]] = {}
    for r in accepted["red"]:
        rows_checks[id(r)] = _red_checks(r, red_log, production)
    if red_log is not None and accepted["red"] and not any(same_log(red_log, r.log_text) for r in accepted["red"]):
        which = (
            f"the red receipt ({_fmt(accepted['red'][0].at)})"
            if len(accepted["red"]) == 1
            else f"any of the {len(accepted['red'])} red receipts"
        )
        if "red" in offline:
            notes.append(
                f"artifacts/red.log is not the log the server stored with {which}; artifacts/receipts.jsonl "
                "records a red step the gate ran without the server."
            )
        else:
            problems.append(
                f"server receipts: artifacts/red.log is not the log the server stored with {which}: "
                "the red run the server witnessed printed something else"
            )
    if accepted["red"] and production:
        # A red run before the model window opened must have run on the original files; when none
        # did, the last of them is named (an earlier one on the bug is enough: a candidate may run red again).
        opened = accepted["model"][0].at if accepted["model"] else None
        before = [r for r in accepted["red"] if opened is None or r.at <= opened] or accepted["red"]

        def off(r: Receipt) -> tuple[list[str], list[str]]:
            return (
                [p for p in production if p in r.tree_hashes and r.tree_hashes[p] not in content_hashes(production[p])],
                [p for p in production if p not in r.tree_hashes],
            )

        red = before[-1]
        differ, missing = ([], []) if any(off(r) == ([], []) for r in before) else off(red)
        if differ:
            problems.append(
                f"server receipts: the red receipt ({_fmt(red.at)}) hashed {_named(differ)} differently "
                "from the packet's original: the red run the server witnessed did not run on the bug"
            )
        if missing:
            problems.append(
                f"server receipts: the red receipt ({_fmt(red.at)}) holds no hash of {_named(missing)}: "
                "nothing shows the red run ran on the bug"
            )

    # The model receipt's prompt: a fact, since a prompt may be tidied afterwards.
    for r in accepted["model"]:
        if prompt is None:
            rows_checks[id(r)] = [Check(None, "no artifacts/prompt.txt in the zip to compare its prompt with")]
        elif same_log(decode_text(prompt), r.log_text):
            rows_checks[id(r)] = [Check(True, "its prompt is artifacts/prompt.txt")]
        else:
            rows_checks[id(r)] = [Check(None, "its prompt differs from artifacts/prompt.txt")]

    # The last green receipt's hashes against the uploaded tree.
    if accepted["green"]:
        green = accepted["green"][-1]
        changed, added, removed = _green_changes(green, files)
        code = [p for p in changed + added if not p.endswith(DOC_SUFFIXES)]
        docs = [p for p in changed + added if p.endswith(DOC_SUFFIXES)]
        checks = []
        if code:
            described = [f"{p} ({'changed' if p in changed else 'added'})" for p in sorted(code)]
            problems.append(
                f"server receipts: files changed after the green receipt ({_fmt(green.at)}): "
                f"{_named(described)}; the passing run the server witnessed was not of the uploaded files"
            )
            checks.append(Check(False, f"files changed after it: {_named(code)}"))
        if docs:
            notes.append(f"Written after the green receipt ({_fmt(green.at)}): {_named(docs)} (text, not code).")
            checks.append(Check(None, f"text written after it: {_named(docs)}"))
        if removed:
            notes.append(
                f"The green run had files that are not in the upload: {_named(removed)} (a zip of tracked "
                "files only, such as git archive, leaves untracked ones out)."
            )
            checks.append(Check(None, f"not in the upload: {_named(removed)}"))
        if not checks:
            checks.append(Check(True, "the uploaded files are the ones it hashed"))
        rows_checks[id(green)] = checks

    # The gate's own log: a line may not claim a receipt the server does not have.
    for line in log_lines:
        if line.known is False:
            problems.append(
                f"artifacts/receipts.jsonl line {line.number} says the server witnessed the "
                f"'{line.step}' step as receipt {line.receipt}, but the server holds no such receipt "
                "for this candidate"
            )

    rows = tuple(
        ReceiptRow(
            r,
            after_deadline=deadline is not None and r.at > deadline and r.step != "upload",
            checks=tuple(rows_checks.get(id(r), ())),
        )
        for r in receipts
    )
    warning = offline_warning(log_lines)
    return WitnessReport(
        rows=rows,
        gate_log=log_lines,
        gate_log_cut=cut,
        problems=tuple(problems),
        notes=tuple(notes),
        warnings=(warning,) if warning else (),
    )


def witness_timeline(
    times: Mapping[str, EntryTime],
    stamp_text: str | None,
    receipts: Iterable[Receipt] | None,
    files: Mapping[str, bytes],
    production: Mapping[str, bytes],
    *,
    deadline: datetime | None = None,
    min_red_to_green: timedelta = MIN_RED_TO_GREEN,
    model_step: bool = True,
) -> dict:
    """The evidence's ``timeline``: the order of the steps and what the receipts say of the zip.

    ``receipts`` None means the server's record is not known here (``grade_zip``
    on the command line): the order is checked on the zip alone and no
    receipt-based problem is raised. Problems of both kinds go in one list,
    the timeline's first; ``notes`` hold what honest work may show.
    ``model_step`` False (policy "none"): no stamp is expected, and a model's
    reply in the zip is a note for the reviewer.
    """
    known = receipts is not None
    receipts = list(receipts or ())
    reply = files.get(f"{ARTIFACTS_DIR}/model.md")
    written = reply is not None and bool(decode_text(reply).strip())
    timeline = build_timeline(
        times, stamp_text, receipts, reply_written=reply is None or written, model_step=model_step
    )
    if known:
        report = check_receipts(
            receipts, files, production, deadline=deadline, min_red_to_green=min_red_to_green, model_step=model_step
        )
    else:
        lines, cut = parse_gate_log(files.get(RECEIPTS_LOG))
        warning = offline_warning(lines)
        report = WitnessReport(gate_log=lines, gate_log_cut=cut, warnings=(warning,) if warning else ())
    problems = [*timeline.problems, *report.problems]
    notes = list(report.notes)
    if written and not model_step:
        # why a note: the reviewer judges it; a model.md may also be the candidate's own notes
        notes.append(
            "artifacts/model.md is in the zip, but this packet has no model step (its policy is none): "
            "the candidate may have used a model where the packet forbids one."
        )
    return {
        **timeline.to_dict(),
        "ok": not problems,
        "problems": problems,
        "notes": notes,
        "warnings": list(report.warnings),
        "receipts_known": known,
        "receipts": [row.to_dict() for row in report.rows],
        "gate_log": [line.to_dict() for line in report.gate_log],
        "gate_log_cut": report.gate_log_cut,
        "deadline": deadline.isoformat() if deadline is not None else None,
        "min_red_to_green_s": min_red_to_green.total_seconds(),
    }
