"""The review page says, per gate step, how the server witnessed it (step 12): its own capture, the model
window, the candidate's gate.py, or nothing; a hosted-only packet's step from gate.py is marked."""

import re

from grading.tests.reviewing import ideal_evidence, make_submission
from takehome.tests.factories import make_packet


def evidence_with(receipts: list[dict], exchanges: list[dict] | None = None) -> dict:
    evidence = ideal_evidence()
    evidence["timeline"].update(receipts_known=True, receipts=receipts, gate_log=[], problems=[], notes=[], ok=True)
    evidence["model"] = {**(evidence.get("model") or {}), "policy": "provided", "exchanges": exchanges or []}
    return evidence


def receipt(id, step, at, captured_by="candidate", accepted=True):
    return {"id": id, "step": step, "at": f"2026-11-30T14:{at}+00:00", "accepted": accepted, "refusal": None,
            "local_time": None, "after_deadline": False, "checks": [], "captured_by": captured_by}


def witnesses(html: str) -> dict[str, str]:
    return dict(re.findall(r'<li data-step="(\w+)" data-witness="(\w+)">', html.split('id="step-witnesses"')[1]))


def test_each_step_says_who_witnessed_it(rob, db):
    packet = make_packet(work_mode="both")
    exchange = {"at": "2026-11-30T14:03:00+00:00", "messages": [], "reply": "r", "model": "m", "tokens_in": 1,
                "tokens_out": 1, "latency_s": 1.0, "error": ""}
    evidence = evidence_with([receipt(1, "red", "01:00", "server"), receipt(2, "model", "03:00")], [exchange])
    html = rob.get(f"/review/{make_submission(packet, evidence=evidence).pk}/").content.decode()
    assert witnesses(html) == {"red": "server", "model": "window", "green": "none"}
    assert "captured by the server" in html and "nothing: the server witnessed no such step" in html
    assert '<td data-witness="server">server capture</td>' in html
    assert '<td data-witness="window">the model window</td>' in html
    assert "hosted workspace only, yet" not in html


def test_a_hosted_only_packets_step_from_gate_py_is_marked(rob, db):
    packet = make_packet(work_mode="hosted")
    evidence = evidence_with([receipt(1, "red", "01:00"), receipt(2, "model", "03:00"),
                              receipt(3, "green", "05:00", accepted=False)])
    html = rob.get(f"/review/{make_submission(packet, evidence=evidence).pk}/").content.decode()
    assert witnesses(html) == {"red": "gate", "model": "gate", "green": "refused"}
    assert "sent by the candidate&#x27;s gate.py" in html
    assert html.count("this packet is worked in a hosted workspace only, yet a receipt of this step came from "
                      "gate.py") == 2
    assert '<td data-witness="gate">candidate\'s gate.py</td>' in html
