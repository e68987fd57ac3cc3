"""The evidence's model section: the server's exchanges beside prompt.txt and model.md (no sandbox)."""

from datetime import UTC, datetime

from grading.engine.checks.model import Exchange, ModelRecord, model_section
from grading.engine.core import empty_evidence

AT = datetime(2026, 11, 30, 9, 5, tzinfo=UTC)


def exchange(prompt="Fix the refund total.", reply="Use Decimal.\n", **kw) -> Exchange:
    fields = {"at": AT, "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}],
              "reply": reply, "model": "qwen", "tokens_in": 12, "tokens_out": 3, "latency_s": 1.25, "error": ""}
    return Exchange(**{**fields, **kw})


def record(*exchanges) -> ModelRecord:
    return ModelRecord(policy="provided", configured=True, exchanges=exchanges)


def test_the_exchanges_as_stored_with_the_policy():
    section = model_section(record(exchange(error="the model server timed out")), None, None)
    assert section["policy"] == "provided" and section["configured"] is True
    assert section["exchanges"] == [{
        "at": "2026-11-30T09:05:00+00:00", "messages": exchange().messages, "reply": "Use Decimal.\n",
        "model": "qwen", "tokens_in": 12, "tokens_out": 3, "latency_s": 1.25, "error": "the model server timed out",
        "options": {}, "client_gone": False, "finished": True, "conversation": 1, "artifact": ""}]


def test_files_that_match_what_was_sent_and_received_whitespace_and_line_ends_aside():
    section = model_section(record(exchange()), "Fix the refund\r\ntotal.  \r\n\r\n", "Use   Decimal.")
    assert section["prompt_matches"] == {"result": "matches", "exchange": 1, "diff": ""}
    assert section["reply_matches"] == {"result": "matches", "exchange": 1, "diff": ""}


def test_a_later_exchange_may_be_the_one_the_files_hold():
    section = model_section(record(exchange(), exchange("Now the tax.", "Round half up.")), "Now the tax.",
                            "Use Decimal.")
    assert section["prompt_matches"]["exchange"] == 2
    assert section["reply_matches"]["exchange"] == 1


def test_files_that_differ_carry_a_unified_diff_against_the_last_exchange():
    section = model_section(record(exchange()), "Fix the refund total.\nAnd delete the tests.\n",
                            "Use float.\n")
    prompt, reply = section["prompt_matches"], section["reply_matches"]
    assert prompt["result"] == "differs" and prompt["exchange"] == 1
    assert "+And delete the tests." in prompt["diff"] and "--- exchange 1 (server)" in prompt["diff"]
    assert reply["result"] == "differs" and "-Use Decimal." in reply["diff"] and "+Use float." in reply["diff"]


def test_a_conversation_matches_its_user_messages_together():
    messages = [{"role": "user", "content": "First."}, {"role": "assistant", "content": "Ok."},
                {"role": "user", "content": [{"type": "text", "text": "Second."}]}]
    section = model_section(record(exchange(messages=messages)), "First.\n\nSecond.\n", None)
    assert section["prompt_matches"]["result"] == "matches"


def test_absent_without_a_file_a_blank_file_or_an_exchange():
    assert model_section(record(exchange()), None, "  \n")["prompt_matches"]["result"] == "absent"
    assert model_section(record(exchange()), None, "  \n")["reply_matches"]["result"] == "absent"
    no_exchange = model_section(record(), "Fix it.", "Done.")
    assert no_exchange["prompt_matches"]["result"] == no_exchange["reply_matches"]["result"] == "absent"
    failed = model_section(record(exchange(reply="", error="the model server is down")), "x", "y")
    assert failed["reply_matches"]["result"] == "absent"


def test_without_the_servers_record_everything_is_absent():
    section = model_section(None, "Fix it.", "Done.")
    assert section == {"policy": None, "configured": False, "exchanges": [],
                       "prompt_matches": {"result": "absent", "exchange": None, "diff": ""},
                       "reply_matches": {"result": "absent", "exchange": None, "diff": ""}}


def test_a_refused_archive_keeps_the_servers_model_record():
    evidence = empty_evidence("the zip holds a symlink", model=record(exchange()))
    assert evidence["model"]["policy"] == "provided"
    assert len(evidence["model"]["exchanges"]) == 1
    assert empty_evidence("x")["model"]["exchanges"] == []
