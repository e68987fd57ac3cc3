"""Receipts held against the zip: every attack is named, honest work of every kind is not accused.

Each case plays a candidate's folder through the gate as gate.py does it (the
log it sends, a sha256 of every file at that moment, the line it appends to
artifacts/receipts.jsonl), or through plain POSTs, and checks the upload.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from grading.engine.checks.receipts import (
    LOG_LIMIT,
    check_receipts,
    content_hashes,
    parse_gate_log,
    same_log,
    witness_timeline,
)
from grading.engine.checks.timeline import Receipt
from grading.engine.spec import sample_spec
from grading.tests import corpus

T0 = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)
SPEC = sample_spec()
PRODUCTION = {p: SPEC.fixture[p] for p in SPEC.production_paths}
RED_LOG = corpus.red_log().decode()
GREEN_LOG = corpus.red_log("pytest9_green_q.log").decode()
DEADLINE = T0 + timedelta(minutes=90)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Folder:
    """A candidate's folder and the server's receipts, played step by step as gate.py does."""

    def __init__(self, newline: bytes = b"\n", ahead: timedelta = timedelta(0)):
        self.newline = newline
        self.ahead = ahead  # the candidate's clock against the server's
        self.files = {p: self.text(d) for p, d in SPEC.fixture.items()}
        self.files["gate.py"] = b"# the personalised gate\n"
        self.files["README.txt"] = b"Read me\n"
        self.receipts: list[Receipt] = []
        self.next_id = 40

    def text(self, data: bytes) -> bytes:
        return data.replace(b"\n", self.newline)

    def write(self, path: str, data: bytes) -> Folder:
        self.files[path] = self.text(data)
        return self

    def local(self, minutes: float) -> str:
        return (T0 + timedelta(minutes=minutes) + self.ahead).astimezone(timezone(timedelta(hours=1))).isoformat()

    def line(self, entry: dict) -> None:
        old = self.files.get("artifacts/receipts.jsonl", b"")
        self.files["artifacts/receipts.jsonl"] = old + self.text(json.dumps(entry, sort_keys=True).encode() + b"\n")

    def post(self, step: str, minutes: float, log: str, *, accepted: bool = True, refusal: str = "",
             hashes: dict | None = None) -> Receipt:
        """What the server stores for one POST (gate.py's, or a hand-made one with ``hashes``)."""
        self.next_id += 1
        receipt = Receipt(step, T0 + timedelta(minutes=minutes), local_time=self.local(minutes), accepted=accepted,
                          refusal=refusal, log_text=log[-LOG_LIMIT:], id=self.next_id,
                          tree_hashes={p: sha(d) for p, d in self.files.items()} if hashes is None else hashes)
        self.receipts.append(receipt)
        return receipt

    def step(self, step: str, minutes: float, log: str, *, offline: str = "", accepted: bool = True,
             refusal: str = "") -> Folder:
        entry = {"step": step, "local_time": self.local(minutes)}
        if offline:
            self.line({**entry, "witnessed": False, "why": offline})
            return self
        r = self.post(step, minutes, log, accepted=accepted, refusal=refusal)
        if accepted:
            self.line({**entry, "witnessed": True, "receipt": r.id, "server_time": r.at.isoformat()})
        else:
            self.line({**entry, "witnessed": True, "accepted": False, "receipt": r.id, "refusal": refusal})
        return self

    def red(self, minutes: float = 1, log: str = RED_LOG, **kw) -> Folder:
        self.write("artifacts/red.log", log.encode("utf-8"))
        return self.step("red", minutes, log, **kw)

    def model(self, minutes: float = 3, **kw) -> Folder:
        self.write("artifacts/prompt.txt", corpus.PROMPT)
        self.step("model", minutes, corpus.PROMPT.decode(), **kw)
        if kw.get("accepted", True):
            self.files["artifacts/model_allowed.at"] = str((T0 + timedelta(minutes=minutes)).timestamp()).encode()
        return self

    def fix(self) -> Folder:
        self.write("invoices.py", SPEC.solution["invoices.py"])
        return self.write("test_invoices.py", corpus.HONEST_TEST)

    def green(self, minutes: float = 7, **kw) -> Folder:
        self.write("artifacts/green.log", GREEN_LOG.encode())
        return self.step("green", minutes, GREEN_LOG, **kw)

    def finish(self) -> Folder:
        self.write("artifacts/model.md", corpus.MODEL)
        return self.write("artifacts/refuse.md", corpus.REFUSE)

    def upload(self, minutes: float = 10) -> dict[str, bytes]:
        """The uploaded tree, as the grader reads it: the download's own files left out."""
        self.next_id += 1
        self.receipts.append(Receipt("upload", T0 + timedelta(minutes=minutes), id=self.next_id))
        return {p: d for p, d in self.files.items() if p not in ("gate.py", "README.txt")}


def ideal(**kw) -> Folder:
    return Folder(**kw).red().model().fix().green().finish()


def check(folder: Folder, files: dict[str, bytes] | None = None, deadline=DEADLINE):
    files = folder.upload() if files is None else files
    return check_receipts(folder.receipts, files, PRODUCTION, deadline=deadline)


# --- honest work: no problem sentence, whatever the machine or the network -------------------------


def offline_everything() -> Folder:
    f = Folder().red(offline="--offline").model(offline="--offline").fix()
    return f.green(offline="--offline").finish()


def unreachable_model_then_again() -> Folder:
    f = Folder().red().model(offline="server unreachable: timed out").fix()
    f.green(8, refusal="Green before model is a skip, not a pass: run `python gate.py model` first.", accepted=False)
    return f.model(9).green(10).finish()


def red_twice() -> Folder:
    f = Folder().red(1, log=corpus.red_log("pytest9_orig_default.log").decode())
    f.write("test_invoices.py", corpus.HONEST_TEST)
    return f.red(2, log=corpus.red_log("pytest9_cand_q.log").decode()).model().fix().green().finish()


def red_again_while_exploring() -> Folder:
    # Red on the bug, then a print added to explore, red again; the print is gone before the fix.
    f = Folder().red(1)
    f.write("invoices.py", SPEC.fixture["invoices.py"] + b"print('debug')\n")
    f.red(2, log=corpus.red_log("pytest9_cand_q.log").decode())
    f.write("invoices.py", SPEC.fixture["invoices.py"])
    return f.model().fix().green().finish()


def red_refused_then_accepted() -> Folder:
    f = Folder().red(1, log="FAILED\n", accepted=False,
                     refusal="The red log does not look like pytest's own output (closing line).")
    return f.red(2).model().fix().green().finish()


def prompt_refused_then_accepted() -> Folder:
    f = Folder().red()
    f.post("model", 2, "", accepted=False, refusal="Write artifacts/prompt.txt first.")
    return f.model(3).fix().green().finish()


def long_red_log() -> Folder:
    log = "".join(f"captured line {i}\n" for i in range(20_000)) + RED_LOG
    assert len(log) > LOG_LIMIT
    return Folder().red(log=log).model().fix().green().finish()


def windows_cp1252_red_log() -> Folder:
    # gate.py's write_text on Windows: CRLF and the locale's code page; the receipt holds the text.
    log = RED_LOG.replace("AssertionError", "AssertionError: montant négatif")
    f = Folder(newline=b"\r\n")
    f.step("red", 1, log)
    f.files["artifacts/red.log"] = log.replace("\n", "\r\n").encode("cp1252")
    return f.model().fix().green().finish()


def git_archive_of_a_crlf_checkout() -> tuple[Folder, dict[str, bytes]]:
    # Worked in a CRLF checkout (core.autocrlf) with an untracked scratch file, then `git archive`: LF files,
    # no scratch file.
    f = Folder(newline=b"\r\n").red().model().fix()
    f.write("scratch.py", b"print('trying things')\n")
    f.green().finish()
    files = {p: d.replace(b"\r\n", b"\n") for p, d in f.upload().items() if p != "scratch.py"}
    return f, files


def docs_after_green() -> Folder:
    return ideal().write("NOTES.md", b"What I would do next.\n").write("artifacts/notes.md", b"slow model\n")


def notepad_bom() -> Folder:
    f = Folder()
    f.files["invoices.py"] = b"\xef\xbb\xbf" + SPEC.fixture["invoices.py"]  # opened and saved in Notepad
    return f.red().model().fix().green().finish()


def junk_the_zip_skips() -> tuple[Folder, dict[str, bytes]]:
    # The gate hashed Thumbs.db and a venv named env/; the archive skips Thumbs.db, env/ holds pyvenv.cfg.
    f = Folder().red().model().fix()
    f.write("Thumbs.db", b"\x00thumbs").write("env/pyvenv.cfg", b"home = /usr\n")
    f.green().finish()
    files = {p: d for p, d in f.upload().items() if p != "Thumbs.db" and not p.startswith("env/")}
    return f, files


HONEST = [
    ("ideal, every step witnessed", lambda: (ideal(), None), []),
    ("worked offline: every step --offline", lambda: (offline_everything(), None), ["records steps the gate ran"]),
    ("server unreachable at model, model and green again", lambda: (unreachable_model_then_again(), None),
     ["refused the 'green' step once"]),
    ("network lost after red: model and green not witnessed",
     lambda: (Folder().red().model(offline="server unreachable: [Errno -3] Temporary failure in name resolution")
              .fix().green(offline="server unreachable: timed out").finish(), None),
     ["model_allowed.at has no model receipt", "green.log has no green receipt"]),
    ("red run twice, red.log is the last", lambda: (red_twice(), None), []),
    ("red on the bug, then red again with a debug print", lambda: (red_again_while_exploring(), None), []),
    ("red refused once, then accepted", lambda: (red_refused_then_accepted(), None), ["refused the 'red' step"]),
    ("model refused for want of prompt.txt, then accepted", lambda: (prompt_refused_then_accepted(), None),
     ["refused the 'model' step"]),
    ("red log longer than a receipt keeps", lambda: (long_red_log(), None), []),
    ("Windows: CRLF files, red.log in cp1252", lambda: (windows_cp1252_red_log(), None), []),
    ("Windows checkout zipped with git archive", git_archive_of_a_crlf_checkout, ["not in the upload: scratch.py"]),
    ("documentation written after green", lambda: (docs_after_green(), None), ["NOTES.md (text, not code)"]),
    ("a BOM added by Notepad before red", lambda: (notepad_bom(), None), []),
    ("the candidate's clock 3 h behind", lambda: (ideal(ahead=timedelta(hours=-3)), None), []),
    ("out of time: red and model only", lambda: (Folder().red().model().finish(), None), []),
    ("junk the gate hashed and the zip skipped", junk_the_zip_skips, []),
]


@pytest.mark.parametrize("case,build,notes", HONEST, ids=[c[0] for c in HONEST])
def test_honest_work_has_no_problem(case, build, notes):
    folder, files = build()
    report = check(folder, files)
    assert report.problems == (), report.problems
    for words in notes:
        assert any(words in n for n in report.notes), report.notes
    if not notes:
        assert report.notes == ()


# --- attacks: each is named ----------------------------------------------------------------------------


def plain_posts(hashes: dict) -> Folder:
    """Three POSTs 0.2 s apart with a copied real red log; the zip is a finished tree made elsewhere."""
    f = Folder()
    f.post("red", 1, RED_LOG, hashes=hashes)
    f.post("model", 1 + 0.1 / 60, corpus.PROMPT.decode(), hashes=hashes)
    f.post("green", 1 + 0.2 / 60, GREEN_LOG, hashes=hashes)
    f.files = {p: d for p, d in corpus.honest_files().items()}
    return f


MADE_UP = {"invoices.py": "ab" * 32, "test_invoices.py": "cd" * 32, "artifacts/red.log": "ef" * 32}


def fix_first() -> Folder:
    # Fixed with the model, then ran red with a test that fails on the fixed code.
    f = Folder().fix().write("test_invoices.py", corpus.OVERFIT_TEST)
    return f.red(log=corpus.red_log("pytest9_cand_q.log").decode()).model().green().finish()


def red_log_swapped() -> Folder:
    f = ideal()
    f.write("artifacts/red.log", corpus.red_log("pytest8_orig_default.log"))
    return f


def changed_after_green() -> Folder:
    return ideal().write("invoices.py", SPEC.solution["invoices.py"] + b"\nimport os\n").write(
        "test_extra.py", b"def test(): pass\n")


def stamp_without_model_receipt() -> Folder:
    f = Folder().red().fix()
    f.write("artifacts/model_allowed.at", str(T0.timestamp() + 180).encode())
    return f.write("artifacts/green.log", GREEN_LOG.encode()).finish()


def forged_gate_log() -> Folder:
    f = stamp_without_model_receipt()
    f.line({"step": "model", "local_time": f.local(3), "witnessed": True, "receipt": 999,
            "server_time": (T0 + timedelta(minutes=3)).isoformat()})
    return f


def refused_never_accepted() -> Folder:
    f = Folder().red().model().fix()
    return f.green(refusal="still red: the green log does not end with pytest's passing summary.",
                   accepted=False).finish()


ATTACKS = [
    ("three plain POSTs, made-up hashes", lambda: plain_posts(MADE_UP), [
        "server receipts: red to green took 0.2 s",
        "server receipts: the red receipt (2026-11-30 09:01:00+00:00) hashed invoices.py differently",
        "server receipts: files changed after the green receipt",
    ]),
    ("three plain POSTs, no hashes at all", lambda: plain_posts({}), [
        "server receipts: the red receipt (2026-11-30 09:01:00+00:00) holds no hash of invoices.py",
        "server receipts: files changed after the green receipt (2026-11-30 09:01:00+00:00): invoices.py (added)",
    ]),
    ("red ran on the fixed code", fix_first, ["hashed invoices.py differently from the packet's original"]),
    ("red.log is not the witnessed log", red_log_swapped,
     ["server receipts: artifacts/red.log is not the log the server stored with the red receipt"]),
    ("code changed after green", changed_after_green,
     ["files changed after the green receipt (2026-11-30 09:07:00+00:00): invoices.py (changed), "
      "test_extra.py (added)"]),
    ("stamp and green.log with no receipt", stamp_without_model_receipt, [
        "server receipts: model_allowed.at (the stamp) is in the zip but the server has no model receipt",
        "server receipts: green.log is in the zip but the server has no green receipt",
    ]),
    ("receipts.jsonl claims a receipt the server lacks", forged_gate_log,
     ["artifacts/receipts.jsonl line 2 says the server witnessed the 'model' step as receipt 999"]),
    ("no receipt at all, no receipts.jsonl",
     lambda: Folder().fix().write("artifacts/red.log", RED_LOG.encode()).finish(),
     ["server receipts: the server witnessed no gate step (no red, model or green receipt), and "
      "artifacts/receipts.jsonl is not in the zip"]),
    ("a refused step never accepted", refused_never_accepted,
     ["server receipts: the 'green' step was refused once (last at 2026-11-30 09:07:00+00:00: still red"]),
]


@pytest.mark.parametrize("case,build,expected", ATTACKS, ids=[c[0] for c in ATTACKS])
def test_attacks_are_named(case, build, expected):
    report = check(build())
    for words in expected:
        assert any(words in p for p in report.problems), (words, report.problems)


def test_steps_after_the_deadline_are_named():
    report = check(ideal(), deadline=T0 + timedelta(minutes=5))
    assert report.problems == ("server receipts: the 'green' step was witnessed at 2026-11-30 09:07:00+00:00, "
                               "after the deadline (2026-11-30 09:05:00+00:00)",)
    rows = {r.receipt.step: r for r in report.rows}
    assert rows["green"].after_deadline and not rows["red"].after_deadline
    assert not rows["upload"].after_deadline  # an upload in the grace period is allowed


def test_several_steps_after_the_deadline_make_one_sentence():
    report = check(ideal(), deadline=T0)
    assert report.problems == ("server receipts: the 'red', 'model' and 'green' steps were witnessed after the "
                               "deadline (2026-11-30 09:00:00+00:00), the first at 2026-11-30 09:01:00+00:00",)


def test_receipts_without_the_gates_log_are_noted():
    folder = ideal()
    files = {p: d for p, d in folder.upload().items() if p != "artifacts/receipts.jsonl"}
    report = check_receipts(folder.receipts, files, PRODUCTION)
    assert report.problems == ()
    assert report.notes == ("The server holds 3 gate receipts, but the zip has no artifacts/receipts.jsonl, the log "
                            "the gate writes with every step.",)


def test_red_to_green_threshold_is_a_parameter():
    folder = Folder().red(1).model(1.1).fix().green(1.5).finish()
    files = folder.upload()
    assert any("red to green took 30.0 s" in p for p in
               check_receipts(folder.receipts, files, PRODUCTION, min_red_to_green=timedelta(minutes=1)).problems)
    assert check_receipts(folder.receipts, files, PRODUCTION, min_red_to_green=timedelta(seconds=20)).problems == ()


def test_each_receipt_is_listed_with_what_it_was_compared_with():
    report = check(unreachable_model_then_again())
    rows = [r.to_dict() for r in report.rows]
    assert [(r["step"], r["accepted"]) for r in rows] == [
        ("red", True), ("green", False), ("model", True), ("green", True), ("upload", True)]
    red, refused, model, green, _ = rows
    assert [c["text"] for c in red["checks"]] == ["its log is artifacts/red.log",
                                                  "it ran on the packet's original invoices.py (the bug)"]
    assert refused["refusal"].startswith("Green before model") and refused["checks"] == []
    assert model["checks"] == [{"ok": True, "text": "its prompt is artifacts/prompt.txt"}]
    assert green["checks"] == [{"ok": True, "text": "the uploaded files are the ones it hashed"}]
    assert red["at"] == "2026-11-30T09:01:00+00:00" and red["local_time"].endswith("+01:00")


def test_the_gate_log_marks_what_was_not_witnessed():
    folder = unreachable_model_then_again()
    lines, cut = parse_gate_log(folder.upload()["artifacts/receipts.jsonl"], folder.receipts)
    assert cut == 0
    assert [(l.step, l.witnessed, l.refused, l.known) for l in lines] == [
        ("red", True, False, True), ("model", False, False, None), ("green", True, True, True),
        ("model", True, False, True), ("green", True, False, True)]
    assert lines[1].why == "server unreachable: timed out"


def test_a_gate_log_that_is_not_json_is_shown_as_text():
    data = b'{"step": "red", "witnessed": false}\nnot json at all\n[1, 2]\n\n' + b"x" * 2000 + b"\n"
    lines, _ = parse_gate_log(data)
    assert [l.witnessed for l in lines] == [False, None, None, None]
    assert lines[0].why == "no reason given" and lines[1].text == "not json at all"
    assert len(lines[3].text) == 500


def test_a_huge_gate_log_is_cut():
    lines, cut = parse_gate_log(b'{"step": "red", "witnessed": false, "why": "--offline"}\n' * 600)
    assert len(lines) == 500 and cut == 100


@pytest.mark.parametrize("zip_text,receipt,same", [
    ("F\n1 failed in 0.01s\n", "F\n1 failed in 0.01s\n", True),
    ("F\r\n1 failed in 0.01s\r\n", "F\n1 failed in 0.01s\n", True),
    ("\ufeffF\n1 failed in 0.01s\n\n", "F\n1 failed in 0.01s", True),
    ("n\ufffdgatif", "négatif", True),  # cp1252 bytes read as UTF-8
    ("F\n2 failed in 0.01s\n", "F\n1 failed in 0.01s\n", False),
    ("F\n1 failed in 0.01s\n", "", False),
    ("x" * 10 + "y" * LOG_LIMIT, "y" * LOG_LIMIT, True),
    ("x" * 10 + "y" * LOG_LIMIT, "z" + "y" * (LOG_LIMIT - 1), False),
])
def test_same_log(zip_text, receipt, same):
    assert same_log(zip_text, receipt) is same


def test_content_hashes_forgive_line_endings_and_a_bom_only():
    lf = b"a = 1\nb = 2\n"
    for variant in (lf, lf.replace(b"\n", b"\r\n"), b"\xef\xbb\xbf" + lf):
        assert sha(variant) in content_hashes(lf)
    assert sha(b"a = 1\nb = 3\n") not in content_hashes(lf)
    assert content_hashes(b"\x00\r\n") == {sha(b"\x00\r\n")}


def test_the_timeline_carries_the_receipts_the_gate_log_and_the_notes():
    folder = unreachable_model_then_again()
    files = folder.upload()
    data = witness_timeline({}, None, folder.receipts, files, PRODUCTION, deadline=DEADLINE)
    assert data["ok"] is True and data["problems"] == [] and data["receipts_known"] is True
    assert [e["name"] for e in data["events"]][:3] == ["receipt: red", "receipt: green (refused)", "receipt: model"]
    assert len(data["receipts"]) == 5 and len(data["gate_log"]) == 5
    assert data["notes"] and data["deadline"] == DEADLINE.isoformat() and data["min_red_to_green_s"] == 20.0
    json.dumps(data)  # stored as JSON


def test_a_blank_model_md_older_than_red_is_not_a_reply():
    times = {"artifacts/model.md": corpus_time(0), "artifacts/red.log": corpus_time(6)}
    for reply, ok in ((b" \r\n", True), (b"", True), (corpus.MODEL, False)):
        data = witness_timeline(times, None, None, {"artifacts/model.md": reply}, PRODUCTION)
        assert data["ok"] is ok, (reply, data["problems"])


def corpus_time(seconds: float):
    from grading.engine.checks.timeline import ZipTime

    at = T0 + timedelta(seconds=seconds)
    return ZipTime(local=at.replace(tzinfo=None), utc=at)


def test_without_the_servers_record_nothing_is_held_against_the_receipts():
    files = offline_everything().upload()
    data = witness_timeline({}, None, None, files, PRODUCTION)
    assert data["receipts_known"] is False and data["problems"] == [] and data["receipts"] == []
    assert [line["why"] for line in data["gate_log"]] == ["--offline"] * 3


def test_a_models_reply_under_the_none_policy_is_a_note_not_a_problem():
    times = {"artifacts/red.log": corpus_time(0), "artifacts/model.md": corpus_time(60),
             "artifacts/green.log": corpus_time(120)}
    files = {"artifacts/model.md": corpus.MODEL}
    none = witness_timeline(times, None, None, files, PRODUCTION, model_step=False)
    assert none["problems"] == [] and any("this packet has no model step" in n for n in none["notes"])
    provided = witness_timeline(times, None, None, files, PRODUCTION)
    assert provided["problems"] == ["green.log is there but model_allowed.at is missing or empty"]
    assert not any("no model step" in n for n in provided["notes"])


def test_red_to_green_too_fast_under_the_none_policy_speaks_of_a_fix_not_a_model():
    red = Receipt("red", T0, tree_hashes={p: sha(d) for p, d in PRODUCTION.items()})
    green = Receipt("green", T0 + timedelta(seconds=5))
    data = witness_timeline({}, None, [red, green], {}, PRODUCTION, model_step=False)
    assert any("under 20 s leaves no time to read the failure and write a fix" in p for p in data["problems"])


def test_under_the_none_policy_red_must_still_come_before_green():
    times = {"artifacts/red.log": corpus_time(600), "artifacts/green.log": corpus_time(120)}
    data = witness_timeline(times, None, None, {}, PRODUCTION, model_step=False)
    assert [p for p in data["problems"] if p.startswith("zip times: red.log")] == [
        f"zip times: red.log ({(T0 + timedelta(seconds=600)).isoformat(sep=' ')}) is newer than green.log "
        f"({(T0 + timedelta(seconds=120)).isoformat(sep=' ')})"]
