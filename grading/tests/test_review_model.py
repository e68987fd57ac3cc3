"""The stamp section shows the model window's record: the exchanges on the timeline and listed, and the comparison."""

from datetime import UTC, datetime

import pytest

from grading.engine.checks.model import Exchange, ModelRecord, model_section
from grading.tests.reviewing import ideal_evidence, make_submission

pytestmark = pytest.mark.django_db


def evidence_with(*exchanges: Exchange) -> dict:
    e = ideal_evidence()
    e["model"] = model_section(ModelRecord("provided", True, exchanges), e["texts"]["prompt.txt"],
                               e["texts"]["model.md"])
    return e


def ask(minute: int, prompt: str, reply: str, latency_s: float = 2.0, error: str = "") -> Exchange:
    return Exchange(at=datetime(2026, 11, 30, 14, minute, tzinfo=UTC), messages=[{"role": "user", "content": prompt}],
                    reply=reply, model="qwen2.5-coder", tokens_in=31, tokens_out=17, latency_s=latency_s, error=error)


def stamp_section(client, submission) -> str:
    html = client.get(f"/review/{submission.pk}/").content.decode()
    return html.split('data-section="stamp"')[1].split('data-section="refusal"')[0]


def test_each_exchange_is_drawn_listed_and_the_first_is_open(rob, sample_packet):
    prompt = ideal_evidence()["texts"]["prompt.txt"]
    submission = make_submission(sample_packet, evidence=evidence_with(
        ask(9, prompt, "First answer."), ask(12, "And the tax?", "Second answer.", latency_s=95.0,
                                             error="the model server stopped mid-reply")))
    stamp = stamp_section(rob, submission)
    assert 'data-event="model exchange 1 (2.0 s)"' in stamp
    assert 'data-event="model exchange 2 (95.0 s)"' in stamp and 'class="reply"' in stamp
    assert '<details class="exchange" data-exchange="1" open>' in stamp
    assert '<details class="exchange" data-exchange="2">' in stamp
    assert "First answer." in stamp and "And the tax?" in stamp and "qwen2.5-coder" in stamp
    assert "31 tokens in, 17 out" in stamp
    assert "95.0 s (a slow reply)" in stamp  # the slow reply's latency, without opening it
    assert "Upstream error: the model server stopped mid-reply" in stamp
    assert 'data-compared="prompt.txt" data-result="matches"' in stamp


def test_a_reply_that_differs_shows_its_diff(rob, sample_packet):
    submission = make_submission(sample_packet, evidence=evidence_with(ask(9, "Something else.", "A reply.")))
    stamp = stamp_section(rob, submission)
    assert 'data-compared="prompt.txt" data-result="differs"' in stamp
    assert 'data-compared="model.md" data-result="differs"' in stamp
    assert "exchange 1 (server)" in stamp and "Something else." in stamp
    assert stamp.count('class="diff highlight"') == 2


def test_no_exchange_the_command_line_and_older_evidence(rob, sample_packet):
    stamp = stamp_section(rob, make_submission(sample_packet, evidence=evidence_with()))
    assert "No exchange through the window before this upload." in stamp
    assert stamp.count('data-result="absent"') == 2
    command_line = stamp_section(rob, make_submission(sample_packet))  # grade_zip's: no server record
    assert "not known here (graded on the command line)" in command_line
    graded_before = ideal_evidence()
    del graded_before["model"]
    older = stamp_section(rob, make_submission(sample_packet, evidence=graded_before))
    assert "Graded before the model window was part of the evidence." in older


def test_under_the_none_policy_the_stamp_section_shows_red_then_green_and_no_missing_stamp(rob, sample_packet):
    e = ideal_evidence()
    model_files = ("prompt.txt", "model.md", "model_allowed.at")
    for name in model_files:
        e["texts"].pop(name)
        e["artifacts"][name] = None
    zip_time = {"source": "zip extended timestamp (UTC)", "precision": "1 s", "local_time": None}
    e["timeline"]["events"] = [{"name": "red.log", "at": "2026-11-30T14:01:00+00:00", **zip_time},
                               {"name": "green.log", "at": "2026-11-30T14:07:00+00:00", **zip_time}]
    e["model"] = model_section(ModelRecord("none", False), None, None)
    stamp = stamp_section(rob, make_submission(sample_packet, evidence=e))
    assert "There is no model step for this packet: the order to check is red → green" in stamp
    assert 'data-event="red.log"' in stamp and 'data-event="green.log"' in stamp
    assert "No stamp in the zip." not in stamp and "No prompt.txt." not in stamp and "model_allowed.at</code>" not in stamp
    # A reply the candidate put in the zip anyway is shown, named for what it is.
    e["texts"]["model.md"] = "Use abs()."
    stamp = stamp_section(rob, make_submission(sample_packet, name="Grace Hopper", evidence=e))
    assert "A model's reply (<code>model.md</code>), where the packet forbids a model" in stamp and "Use abs()." in stamp


def test_the_reviewer_sees_everything_sent_and_what_reached_the_candidate(rob, sample_packet):
    # An exchange recorded before requests were rebuilt kept an image part and an extra key: shown, not hidden.
    older = Exchange(at=datetime(2026, 11, 30, 14, 9, tzinfo=UTC), model="qwen2.5-coder", tokens_in=3, tokens_out=2,
                     latency_s=1.0, reply="Fine.", messages=[{"role": "user", "name": "Say the fix is fine.", "content": [
                         {"type": "text", "text": "Look:"},
                         {"type": "image_url", "image_url": {"url": "https://example.com/hidden.png"}}]}])
    left = Exchange(at=datetime(2026, 11, 30, 14, 12, tzinfo=UTC), model="qwen2.5-coder", tokens_in=3, tokens_out=2,
                    latency_s=130.0, reply="Use ", messages=[{"role": "user", "content": "And the tax?"}],
                    options={"model": "qwen2.5-coder", "max_tokens": 4096, "temperature": 0.2, "stream": True},
                    client_gone=True)
    open_ = Exchange(at=datetime(2026, 11, 30, 14, 15, tzinfo=UTC), model="qwen2.5-coder", tokens_in=3,
                     tokens_out=4096, latency_s=0.0, reply="", messages=[{"role": "user", "content": "Still?"}],
                     finished=False)
    stamp = stamp_section(rob, make_submission(sample_packet, evidence=evidence_with(older, left, open_)))
    assert "data-unfinished" in stamp and "had not ended when the evidence was taken" in stamp
    assert "https://example.com/hidden.png" in stamp and "Say the fix is fine." in stamp and "[also sent]" in stamp
    assert "Sent with: max_tokens 4096 · temperature 0.2" in stamp
    assert "client left mid-reply" in stamp and "data-client-gone" in stamp
    assert "reply, as far as it reached the candidate" in stamp


def test_the_page_names_each_exchanges_conversation_and_turn_and_folds_what_a_turn_sent_again(rob, sample_packet):
    """Two turns of a conversation, then a new one: the rows the server stored, through the pipeline's record."""
    from datetime import timedelta

    from grading.pipeline import model_record_for
    from sessions_app.models import ModelExchange

    submission = make_submission(sample_packet)
    first_at = submission.uploaded_at - timedelta(minutes=30)
    question = {"role": "user", "content": "Why is the refund total wrong?"}
    answer = {"role": "assistant", "content": "abs() drops the sign."}
    for minute, conversation, messages, reply, artifact in (
        (0, 1, [question], "abs() drops the sign.", "artifacts/model.md"),
        (5, 1, [question, answer, {"role": "user", "content": "And with two refunds?"}], "Sum them signed.",
         "artifacts/model-2.md"),
        (9, 2, [{"role": "user", "content": "Start again: what is a refund?"}], "A negative amount.", ""),
    ):
        ModelExchange.objects.create(invitation=submission.invitation, at=first_at + timedelta(minutes=minute),
                                     conversation=conversation, messages=messages, reply=reply, artifact=artifact)
    e = ideal_evidence()
    e["model"] = model_section(model_record_for(submission), e["texts"]["prompt.txt"], e["texts"]["model.md"])
    submission.evidence.data = e
    submission.evidence.save()

    stamp = stamp_section(rob, submission)
    assert "Exchange 1 <span data-turn>(Conversation 1, turn 1)</span>" in stamp
    assert "Exchange 2 <span data-turn>(Conversation 1, turn 2)</span>" in stamp
    assert "Exchange 3 <span data-turn>(Conversation 2, turn 1)</span>" in stamp
    # the second turn sent the first again: folded, under words that say so; its own prompt stays open
    second = stamp.split('data-exchange="2"')[1].split('data-exchange="3"')[0]
    folded = second.split('<details class="earlier-turns" data-earlier="2">')[1].split("</details>")[0]
    assert "Why is the refund total wrong?" in folded and "abs() drops the sign." in folded
    assert "2 earlier messages of conversation 1, sent again with this turn" in folded
    assert "And with two refunds?" in second.split("</details>", 1)[1]
    assert "earlier-turns" not in stamp.split('data-exchange="3"')[1]  # a new conversation sent nothing again
    assert "earlier-turns" not in stamp.split('data-exchange="1"')[1].split('data-exchange="2"')[0]
    # which file the server wrote each reply to, and none for the one it wrote nowhere
    assert "the reply in <code>artifacts/model.md</code>" in stamp
    assert "the reply in <code>artifacts/model-2.md</code>" in second
    assert "data-artifact" not in stamp.split('data-exchange="3"')[1].split("</details>")[0]
