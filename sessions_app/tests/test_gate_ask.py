"""python gate.py ask, and the model step as each policy has it: the downloaded gate run as a candidate
runs it, against a live server and the fake upstream (conftest.py)."""

import pytest

from conftest import require
from sessions_app.actions import do_start_session
from sessions_app.models import GateReceipt, ModelExchange
from takehome.models import PacketVersion
from takehome.tests.factories import InvitationFactory

from .conftest import REPLY
from .helpers import (
    apply_fix,
    do_honest_work,
    download_tree,
    point_gate_at,
    receipts_jsonl,
    run_gate,
    runner_python,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tree_with(live_server, settings, sample_packet, tmp_path):
    """The downloaded folder of a started invitation to the sample packet under a model policy."""
    require(runner_python().exists(), f"{runner_python()} is missing: run `make runner`")
    settings.SITE_URL = live_server.url
    version = sample_packet.latest_version()

    def make(policy: str):
        PacketVersion.objects.filter(pk=version.pk).update(model_policy=policy)
        invitation = InvitationFactory(packet_version=version)
        do_start_session(invitation)
        return download_tree(live_server.url, invitation.raw_token, tmp_path)

    return make


def artifacts(tree) -> set[str]:
    return {p.name for p in (tree / "artifacts").iterdir()}


def test_ask_before_red_says_the_servers_words_and_writes_nothing(tree_with, upstream):
    tree = tree_with("provided")
    (tree / "artifacts").mkdir()
    (tree / "artifacts" / "prompt.txt").write_text("Why is the refund total wrong?\n")
    r = run_gate(tree, "ask")
    assert r.returncode != 0 and "No red run has been witnessed yet" in r.stderr, r.stdout + r.stderr
    assert artifacts(tree) == {"prompt.txt"} and upstream.got == []


def test_ask_streams_the_reply_keeps_every_one_and_opens_green(tree_with, upstream):
    tree = tree_with("provided")
    assert run_gate(tree, "red").returncode == 0
    do_honest_work(tree)
    r = run_gate(tree, "ask")
    assert r.returncode == 0, r.stdout + r.stderr
    assert REPLY in r.stdout and "artifacts/model.md" in r.stdout
    assert (tree / "artifacts" / "model.md").read_text() == REPLY
    sent = upstream.got[0]["body"]
    assert sent["stream"] is True and sent["messages"][0]["content"] == (tree / "artifacts" / "prompt.txt").read_text()
    stamp = (tree / "artifacts" / "model_allowed.at").read_text()
    assert float(stamp) > 0

    r = run_gate(tree, "ask")
    assert r.returncode == 0 and "artifacts/model-2.md" in r.stdout
    assert (tree / "artifacts" / "model.md").read_text() == REPLY == (tree / "artifacts" / "model-2.md").read_text()
    assert (tree / "artifacts" / "model_allowed.at").read_text() == stamp  # the first ask opened the window
    assert [(x["step"], x.get("reply")) for x in receipts_jsonl(tree)] == [
        ("red", None), ("ask", "artifacts/model.md"), ("ask", "artifacts/model-2.md")]
    assert ModelExchange.objects.filter(streamed=True).count() == 2

    apply_fix(tree)
    r = run_gate(tree, "green")
    assert r.returncode == 0 and "green captured" in r.stdout, r.stdout + r.stderr
    assert list(GateReceipt.objects.order_by("pk").values_list("step", "accepted")) == [
        ("red", True), ("model", True), ("green", True)]


@pytest.mark.parametrize("mode, words", [("cut", "did not arrive whole"), ("http500", "HTTP 500")])
def test_a_broken_reply_is_said_and_nothing_is_half_written(tree_with, upstream, mode, words):
    tree = tree_with("provided")
    assert run_gate(tree, "red").returncode == 0
    do_honest_work(tree)
    upstream.mode = mode
    r = run_gate(tree, "ask")
    assert r.returncode != 0 and words in r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert artifacts(tree) == {"red.log", "prompt.txt", "receipts.jsonl"}


@pytest.mark.parametrize("policy, words", [("own", "you use your own model"), ("none", "this take-home uses no model")])
def test_ask_without_a_provided_model_says_so_and_writes_nothing(tree_with, upstream, policy, words):
    tree = tree_with(policy)
    assert run_gate(tree, "red").returncode == 0
    (tree / "artifacts" / "prompt.txt").write_text("hi\n")
    r = run_gate(tree, "ask")
    assert r.returncode != 0 and words in r.stderr, r.stdout + r.stderr
    assert artifacts(tree) == {"red.log", "prompt.txt", "receipts.jsonl"} and upstream.got == []


def test_without_a_model_green_follows_red_and_there_is_no_model_step(tree_with):
    tree = tree_with("none")
    r = run_gate(tree, "green")
    assert r.returncode != 0 and "Green before red is a skip" in r.stderr
    assert run_gate(tree, "red").returncode == 0
    r = run_gate(tree, "model")
    assert r.returncode != 0 and "no model step" in r.stderr
    do_honest_work(tree)
    apply_fix(tree)
    r = run_gate(tree, "green")
    assert r.returncode == 0 and "green captured" in r.stdout, r.stdout + r.stderr
    # the refused ones (green before red, a model step) went to the server as refused receipts
    assert [(x["step"], x.get("accepted") is not False) for x in receipts_jsonl(tree)] == [
        ("green", False), ("red", True), ("model", False), ("green", True)]
    assert all(x["witnessed"] for x in receipts_jsonl(tree))
    assert list(GateReceipt.objects.values_list("step", "accepted")) == [("green", False), ("red", True),
                                                                         ("model", False), ("green", True)]
    for name in ("prompt.txt", "model.md"):
        (tree / "artifacts" / name).unlink()
    r = run_gate(tree, "submit")  # stdin is not a terminal: it names what is missing and uploads nothing
    assert "refuse.md" in r.stderr and "model" not in r.stderr and "prompt.txt" not in r.stderr


def test_ask_with_the_server_out_of_reach_says_so_and_writes_nothing(tree_with):
    tree = tree_with("provided")
    point_gate_at(tree, "http://127.0.0.1:9")  # nothing listens on port 9
    (tree / "artifacts").mkdir()
    (tree / "artifacts" / "prompt.txt").write_text("hi\n")
    r = run_gate(tree, "ask")
    assert r.returncode != 0 and "The server could not be reached" in r.stderr and "Traceback" not in r.stderr
    assert artifacts(tree) == {"prompt.txt"}


def test_the_usage_lists_ask(tree_with):
    tree = tree_with("provided")
    r = run_gate(tree, "--help")
    assert r.returncode == 0 and "python gate.py ask" in r.stdout
    assert 'MODEL_POLICY = "provided"' in (tree / "gate.py").read_text()


def test_ask_goes_on_with_the_conversation_and_new_starts_again(tree_with, upstream):
    tree = tree_with("provided")
    assert run_gate(tree, "red").returncode == 0
    do_honest_work(tree)
    prompt = (tree / "artifacts" / "prompt.txt").read_text()
    assert run_gate(tree, "ask").returncode == 0
    r = run_gate(tree, "ask", "And with two refunds?")
    assert r.returncode == 0 and "also got 1 earlier exchange" in r.stdout, r.stdout + r.stderr
    assert upstream.got[1]["body"]["messages"] == [{"role": "user", "content": prompt},
                                                   {"role": "assistant", "content": REPLY},
                                                   {"role": "user", "content": "And with two refunds?"}]
    assert (tree / "artifacts" / "prompt-2.txt").read_text() == "And with two refunds?"
    assert (tree / "artifacts" / "prompt.txt").read_text() == prompt
    r = run_gate(tree, "ask", "--new")
    assert r.returncode == 0 and "artifacts/model-3.md" in r.stdout, r.stdout + r.stderr
    assert upstream.got[2]["body"]["messages"] == [{"role": "user", "content": prompt}]
    assert list(ModelExchange.objects.values_list("conversation", flat=True)) == [1, 1, 2]
