"""Steps gate.py refused on the candidate's machine, and offline work, as the receipts check reads them (step 12).

An out-of-order step the gate stopped (green before model, model before red)
reaches the reviewer: a problem when that step was never accepted, a note
when it was (before or after: red run again once the model window was open is
honest). A refusal on the tests' outcome ("still red") is a note. Steps the
gate ran without the server make a warning for the stamp's headline.
"""

from __future__ import annotations

from grading.engine.checks.receipts import (
    GATE_REFUSED_OFFLINE,
    GATE_REFUSED_ORDER,
    GATE_REFUSED_OUTCOME,
    witness_timeline,
)
from grading.tests.reviewing import ideal_evidence, make_submission

from .test_checks_receipts import PRODUCTION, Folder, check, ideal

GREEN_FIRST = f"{GATE_REFUSED_ORDER}: Green before model is a skip, not a pass."
MODEL_FIRST = f"{GATE_REFUSED_ORDER}{GATE_REFUSED_OFFLINE}: No red log. The model waits."
RED_AFTER = f"{GATE_REFUSED_ORDER}: The model window is already open, so red was captured before it."
STILL_RED = f"{GATE_REFUSED_OUTCOME}: still red: the tests do not pass yet."


def gate_refused(folder: Folder, step: str, minutes: float, refusal: str) -> Folder:
    folder.post(step, minutes, "", accepted=False, refusal=refusal)
    folder.line({"step": step, "local_time": folder.local(minutes), "witnessed": True, "accepted": False,
                 "receipt": folder.next_id, "refusal": refusal})
    return folder


def test_an_inverted_step_never_done_in_order_is_a_problem():
    f = gate_refused(Folder().red(), "green", 2, GREEN_FIRST).finish()
    report = check(f)
    assert any("gate.py refused the 'green' step once" in p and "out of order" in p for p in report.problems)


def test_a_model_before_red_sent_late_is_named_with_its_mark():
    f = gate_refused(Folder(), "model", 1, MODEL_FIRST)
    report = check(f)
    assert any("offline; sent when it was next online" in p for p in report.problems)


def test_an_inverted_step_then_done_in_order_is_a_note_only():
    f = gate_refused(Folder().red().model().fix(), "green", 5, GREEN_FIRST).green().finish()
    report = check(f)
    assert not report.problems, report.problems
    assert any("gate.py refused the 'green' step once" in n and "accepted that step" in n for n in report.notes)


def test_honest_refusals_are_never_problems():
    # red again once the model window was open (red accepted before), and a green still red then passing
    f = Folder().red().model()
    gate_refused(f, "red", 4, RED_AFTER)
    gate_refused(f.fix(), "green", 5, STILL_RED)
    report = check(f.green().finish())
    assert not report.problems, report.problems
    assert len([n for n in report.notes if n.startswith("gate.py refused")]) == 2
    # still red until the end (time ran out): said, not accused
    f = gate_refused(Folder().red().model().fix(), "green", 5, STILL_RED).finish()
    assert not [p for p in check(f).problems if "gate.py refused" in p]


def test_offline_work_is_a_warning_for_the_headline():
    f = Folder().red().model(offline="--offline").fix().green(offline="server unreachable: timed out").finish()
    files = f.upload()
    timeline = witness_timeline({}, None, f.receipts, files, PRODUCTION)
    (warning,) = timeline["warnings"]
    assert warning.startswith("Offline work: artifacts/receipts.jsonl records 2 steps the gate ran without the "
                              "server (model, green;")
    assert not witness_timeline({}, None, ideal().receipts, ideal().upload(), PRODUCTION)["warnings"]
    # on the command line, without the server's record, the zip's own log says it all the same
    assert witness_timeline({}, None, None, files, PRODUCTION)["warnings"] == [warning]


def test_the_stamp_headline_shows_the_warning_instead_of_nothing_runs_backwards(rob, sample_packet):
    evidence = ideal_evidence()
    evidence["timeline"].update(problems=[], ok=True, warnings=["Offline work: artifacts/receipts.jsonl records "
                                                                "1 step the gate ran without the server (green)."])
    html = rob.get(f"/review/{make_submission(sample_packet, evidence=evidence).pk}/").content.decode()
    stamp = html.split('data-section="stamp"')[1].split('data-section="refusal"')[0]
    assert 'id="timeline-warnings"' in stamp and "⚠ Offline work" in stamp
    assert "Nothing runs backwards" not in stamp
    evidence["timeline"]["warnings"] = []
    html = rob.get(f"/review/{make_submission(sample_packet, name='Bo', evidence=evidence).pk}/").content.decode()
    assert "Nothing runs backwards" in html
