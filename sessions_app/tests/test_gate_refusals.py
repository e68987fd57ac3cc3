"""The downloaded gate.py tells the server of every step it refuses (step 12), against a live server.

Before, a green before the model or a model before red stopped on the
candidate's machine and never reached the reviewer. Now each is a refused
receipt; one refused offline waits in artifacts/unsent.jsonl and is sent,
marked so, the next time the gate reaches the server.
"""

import pytest

from grading.engine.checks.receipts import GATE_REFUSED_OFFLINE, GATE_REFUSED_ORDER, GATE_REFUSED_OUTCOME
from sessions_app.models import GateReceipt

from .helpers import do_honest_work, gate_tree, point_gate_at, receipts_jsonl, run_gate

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tree(live_server, settings, sample_packet, tmp_path):
    return gate_tree(live_server, settings, sample_packet, tmp_path)


def test_an_inverted_step_reaches_the_server_as_a_refused_receipt(tree):
    r = run_gate(tree, "green")
    assert r.returncode != 0 and "Green before model is a skip, not a pass." in r.stderr
    (receipt,) = GateReceipt.objects.all()
    assert (receipt.step, receipt.accepted) == ("green", False)
    assert receipt.refusal == f"{GATE_REFUSED_ORDER}: Green before model is a skip, not a pass."
    assert receipt.local_time and "invoices.py" in receipt.tree_hashes
    (line,) = receipts_jsonl(tree)
    assert line["witnessed"] is True and line["accepted"] is False and line["receipt"] == receipt.pk

    assert run_gate(tree, "red").returncode == 0
    do_honest_work(tree)
    assert run_gate(tree, "model").returncode == 0
    r = run_gate(tree, "green")  # no fix yet: the tests still fail, refused on their outcome
    assert r.returncode != 0 and "still red" in r.stderr and "FAILED" in r.stderr
    last = GateReceipt.objects.order_by("pk").last()
    assert last.step == "green" and last.refusal.startswith(f"{GATE_REFUSED_OUTCOME}: still red")
    # nothing refused counts as a step
    assert list(GateReceipt.objects.filter(accepted=True).values_list("step", flat=True)) == ["red", "model"]


def test_a_step_refused_offline_is_sent_marked_when_the_gate_is_next_online(tree, live_server):
    r = run_gate(tree, "model", "--offline")
    assert r.returncode != 0 and "No red log. The model waits." in r.stderr
    assert not GateReceipt.objects.exists()
    (line,) = receipts_jsonl(tree)
    assert line["witnessed"] is False and line["why"] == "--offline" and line["accepted"] is False
    assert (tree / "artifacts" / "unsent.jsonl").exists()

    point_gate_at(tree, "http://127.0.0.1:9")  # the server out of reach: refused, and kept to send
    r = run_gate(tree, "green")
    assert r.returncode != 0 and "Green before model" in r.stderr
    assert not GateReceipt.objects.exists()
    assert len((tree / "artifacts" / "unsent.jsonl").read_text().splitlines()) == 2

    point_gate_at(tree, live_server.url)
    r = run_gate(tree, "status")
    assert r.returncode == 0 and "Steps refused while offline were sent to the server." in r.stdout
    model, green = GateReceipt.objects.order_by("pk")
    assert model.step == "model" and not model.accepted
    assert model.refusal == f"{GATE_REFUSED_ORDER}{GATE_REFUSED_OFFLINE}: No red log. The model waits."
    assert model.local_time == line["local_time"]  # the candidate's clock when it was refused
    assert green.step == "green" and GATE_REFUSED_OFFLINE in green.refusal
    assert not (tree / "artifacts" / "unsent.jsonl").exists()
    late = [x for x in receipts_jsonl(tree) if x.get("sent_late")]
    assert [(x["step"], x["receipt"]) for x in late] == [("model", model.pk), ("green", green.pk)]

    # sent once only
    assert run_gate(tree, "status").returncode == 0
    assert GateReceipt.objects.count() == 2

    # and the honest path afterwards is untouched
    assert run_gate(tree, "red").returncode == 0
    do_honest_work(tree)
    assert run_gate(tree, "model").returncode == 0
    assert list(GateReceipt.objects.filter(accepted=True).values_list("step", flat=True)) == ["red", "model"]
