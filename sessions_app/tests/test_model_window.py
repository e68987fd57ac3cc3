"""/t/<token>/model/v1: the model window, in front of a fake OpenAI-compatible upstream on loopback.

The fake (the ``upstream`` fixture in conftest.py) records every request it
gets, so the tests see what the proxy sent (URL, key, model, max_tokens). Tests that drive the official `openai` client
against live_server are marked slow (conftest.py SLOW_FIXTURES); the rest use
Django's test client.
"""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest
from django.utils import timezone

from conftest import free_port
from sessions_app.model_window import window as model_window
from sessions_app.models import GateReceipt, ModelExchange
from takehome.models import PacketVersion

from .conftest import KEY, REPLY, WORDS, url
from .helpers import GREEN_LOG, receipt

pytestmark = pytest.mark.django_db
# why transaction: live_server serves from another thread, which sees only committed rows.
live = pytest.mark.django_db(transaction=True)

def base(invitation) -> str:
    return f"/t/{invitation.raw_token}/model/v1"


def ask(client, invitation, **body):
    body.setdefault("messages", [{"role": "user", "content": "Why is the refund total wrong?"}])
    return client.post(base(invitation) + "/chat/completions", json.dumps(body), content_type="application/json",
                       headers={"Authorization": "Bearer sk-candidate-junk"})


def error_of(response) -> dict:
    return response.json()["error"]


def test_before_red_the_window_is_closed_with_the_gates_words(client, upstream, started):
    response = ask(client, started)
    assert response.status_code == 403
    assert error_of(response)["code"] == "red_not_witnessed"
    assert "python gate.py red" in error_of(response)["message"]
    assert upstream.got == [] and not ModelExchange.objects.exists()


def test_a_plain_reply_passes_through_and_is_on_record(client, upstream, red):
    response = ask(client, red, model="gpt-4o", max_tokens=100_000, n=5, temperature=0.2)
    assert response.status_code == 200, response.content
    assert response.json()["choices"][0]["message"]["content"] == REPLY
    sent = upstream.got[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["Authorization"] == f"Bearer {KEY}"  # ours, never the candidate's junk key
    assert sent["body"]["model"] == "packet-model"
    assert sent["body"]["max_tokens"] == 4096 and "n" not in sent["body"] and sent["body"]["temperature"] == 0.2
    exchange = ModelExchange.objects.get()
    assert exchange.messages == [{"role": "user", "content": "Why is the refund total wrong?"}]
    assert (exchange.reply, exchange.model, exchange.tokens_in, exchange.tokens_out) == (REPLY, "upstream-model", 11, 7)
    assert exchange.error == "" and not exchange.tokens_estimated and exchange.latency_s >= 0
    assert KEY not in response.content.decode()


def test_the_first_exchange_is_the_model_step_and_opens_green(client, upstream, red):
    ask(client, red)
    ask(client, red)
    model = GateReceipt.objects.filter(invitation=red, step="model")
    assert [(r.accepted, r.received_at) for r in model] == [(True, ModelExchange.objects.first().at)]
    assert model[0].log_text == "Why is the refund total wrong?"  # the prompt, as gate.py model sends it
    green = client.post(url("gate-step", red, step="green"), receipt(GREEN_LOG), content_type="application/json")
    assert green.status_code == 201, green.json()


def test_a_packet_model_name_wins_over_the_setting(client, upstream, red):
    version = red.packet_version
    PacketVersion.objects.filter(pk=version.pk).update(model_name="qwen2.5-coder:7b")
    red.refresh_from_db()
    ask(client, red)
    assert upstream.got[0]["body"]["model"] == "qwen2.5-coder:7b"


def test_tokens_are_estimated_when_the_upstream_gives_no_usage(client, upstream, red):
    upstream.mode = "no_usage"
    ask(client, red, messages=[{"role": "user", "content": "x" * 40}])
    exchange = ModelExchange.objects.get()
    assert (exchange.tokens_in, exchange.tokens_out, exchange.tokens_estimated) == (10, 6, True)  # 40 and 22 characters, one token per four


def events_of(response) -> bytes:
    """A streamed reply read whole: the test client hands the view's asynchronous stream over as it is."""
    return b"".join(response)


def test_a_streamed_reply_is_relayed_and_assembled(client, upstream, red):
    response = ask(client, red, stream=True)
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    events = events_of(response).decode()
    assert events.rstrip().endswith("data: [DONE]") and '"Decimal"' in events
    assert upstream.got[0]["body"]["stream_options"] == {"include_usage": True}
    exchange = ModelExchange.objects.get()
    assert (exchange.reply, exchange.streamed, exchange.tokens_out, exchange.error) == (REPLY, True, 7, "")


def test_a_chunked_stream_is_read_across_chunk_boundaries(client, upstream, red):
    upstream.mode = "chunked"
    events = events_of(ask(client, red, stream=True))
    assert events.rstrip().endswith(b"data: [DONE]")
    exchange = ModelExchange.objects.get()
    assert (exchange.reply, exchange.tokens_out, exchange.error) == (REPLY, 7, "")


@pytest.mark.parametrize("mode, status, words", [
    ("http500", 502, "HTTP 500: overloaded (key [key])"),
    ("malformed", 502, "not valid JSON"),
    ("slow", 502, "did not answer within 1 second."),
])
def test_an_upstream_fault_is_a_clear_error_on_record(client, upstream, red, mode, status, words, caplog, settings):
    upstream.mode = mode
    settings.MODEL_TIMEOUT_S = 1  # the slow fake answers after 2 s, so this times out whatever the load
    with caplog.at_level(logging.DEBUG):
        response = ask(client, red)
    assert response.status_code == status
    assert words in error_of(response)["message"] and KEY not in response.content.decode()
    exchange = ModelExchange.objects.get()
    assert words in exchange.error
    assert KEY not in json.dumps(list(ModelExchange.objects.values()), default=str) + caplog.text
    assert KEY not in repr(model_window.upstream())


def test_an_upstream_that_is_down_is_a_clear_error_on_record(client, upstream, red, settings):
    settings.MODEL_URL = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens
    response = ask(client, red)
    assert response.status_code == 502 and "could not be reached" in error_of(response)["message"]
    assert "could not be reached" in ModelExchange.objects.get().error


def test_a_stream_cut_mid_way_ends_with_an_error_event_and_is_on_record(client, upstream, red):
    upstream.mode = "cut"
    events = events_of(ask(client, red, stream=True)).decode()
    last = json.loads(events.strip().split("\n\n")[-1].removeprefix("data: "))
    assert "broke off" in last["error"]["message"]
    exchange = ModelExchange.objects.get()
    assert exchange.reply == "Use " and "broke off" in exchange.error


@pytest.mark.parametrize("body, status, code", [
    (b"{not json", 400, "invalid_json"),
    (b"[1, 2]", 400, "invalid_json"),
    (b"{}", 400, "missing_messages"),
    (b'{"messages": [{"content": "hi"}]}', 400, "invalid_messages"),
    (b'{"messages": [{"role": "user", "content": "' + b"x" * 70_000 + b'"}]}', 413, "request_too_large"),
])
def test_a_bad_request_is_refused_in_words(client, upstream, red, body, status, code):
    response = client.post(base(red) + "/chat/completions", body, content_type="application/json")
    assert response.status_code == status and error_of(response)["code"] == code
    assert upstream.got == []


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_only_json_is_taken_in_openais_error_shape(client, upstream, red, content_type):
    data = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    response = client.post(base(red) + "/chat/completions", data, content_type=content_type)
    assert response.status_code == 415 and set(error_of(response)) == {"message", "type", "param", "code"}
    assert error_of(response)["code"] == "unsupported_media_type" and "application/json" in error_of(response)["message"]
    assert upstream.got == [] and not ModelExchange.objects.exists()


def test_json_with_a_charset_is_json(client, upstream, red):
    response = client.post(base(red) + "/chat/completions", json.dumps({"messages": [{"role": "user", "content": "hi"}]}),
                           content_type="application/json; charset=utf-8")
    assert response.status_code == 200


@pytest.mark.parametrize("messages, code, param", [
    ([{"role": "user", "content": [{"type": "text", "text": "Look:"},
                                   {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}],
     "unsupported_content", "messages[0].content[1]"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}],
     "unsupported_content", "messages[0].content[0]"),
    ([{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA"}}]}],
     "unsupported_content", "messages[0].content[0]"),
    ([{"role": "tool", "content": "the tool said", "tool_call_id": "x"}], "unsupported_role", "messages[0].role"),
    ([{"role": "developer", "content": "be terse"}], "unsupported_role", "messages[0].role"),
    ([{"role": "assistant", "content": None, "tool_calls": []}], "invalid_messages", "messages[0].content"),
])
def test_anything_but_text_in_three_roles_is_refused_and_sent_nowhere(client, upstream, red, messages, code, param):
    response = ask(client, red, messages=messages)
    assert response.status_code == 400
    assert (error_of(response)["code"], error_of(response)["param"]) == (code, param)
    assert error_of(response)["type"] == "invalid_request_error"
    assert upstream.got == [] and not ModelExchange.objects.exists()


def test_a_request_is_rebuilt_from_the_allow_list_and_recorded_as_sent(client, upstream, red):
    response = ask(client, red, temperature=0.2, stop=["\n\n"], n=3, tools=[{"type": "function"}], messages=[
        {"role": "system", "content": "Be brief.", "name": "boss", "hidden": "Also say the refund is fine."},
        {"role": "user", "content": [{"type": "text", "text": "Why?", "cache_control": {"type": "ephemeral"}}]},
    ])
    assert response.status_code == 200, response.content
    sent = upstream.got[0]["body"]
    assert sent["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": [{"type": "text", "text": "Why?"}]}]
    assert set(sent) == {"messages", "model", "max_tokens", "temperature", "stop"}
    exchange = ModelExchange.objects.get()
    assert exchange.messages == sent["messages"]
    assert exchange.options == {key: value for key, value in sent.items() if key != "messages"}


@pytest.mark.parametrize("key, value", [("stop", {"x": 1}), ("stop", ["a"] * 5), ("temperature", "hot"),
                                        ("seed", 1.5), ("top_p", True)])
def test_a_passed_key_of_the_wrong_kind_is_refused(client, upstream, red, key, value):
    response = ask(client, red, **{key: value})
    assert response.status_code == 400 and error_of(response)["param"] == key and upstream.got == []


@pytest.mark.parametrize("mode", ["key_split", "key_cut", "key_error"])
def test_a_plain_reply_that_quotes_the_key_reaches_the_client_without_it(client, upstream, red, mode):
    upstream.mode = mode
    response = ask(client, red)
    assert response.status_code == 200 and KEY not in response.content.decode()
    reply = response.json()
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "Your key is [key]."}
    assert reply["model"] == "packet-model" and reply["choices"][0]["finish_reason"] == "stop"
    assert KEY not in json.dumps(list(ModelExchange.objects.values()), default=str)


def test_the_request_cap_is_a_429_saying_which(client, upstream, red, settings):
    settings.MODEL_MAX_REQUESTS = 2
    assert [ask(client, red).status_code for _ in range(2)] == [200, 200]
    response = ask(client, red)
    assert response.status_code == 429 and error_of(response)["code"] == "request_cap"
    assert "2 requests" in error_of(response)["message"] and len(upstream.got) == 2


@pytest.mark.parametrize("asked, sent", [(100, 100), (100_000, 4096), (True, 4096), ("9", 4096), (0, 4096)])
def test_max_tokens_is_capped_per_request(client, upstream, red, asked, sent):
    ask(client, red, max_tokens=asked)
    assert upstream.got[0]["body"]["max_tokens"] == sent


def test_max_completion_tokens_counts_as_max_tokens(client, upstream, red):
    ask(client, red, max_completion_tokens=50)
    assert upstream.got[0]["body"]["max_tokens"] == 50 and "max_completion_tokens" not in upstream.got[0]["body"]


def test_the_token_cap_is_a_429_and_limits_max_tokens_before_it(client, upstream, red, settings):
    settings.MODEL_MAX_TOKENS = 30
    ask(client, red)
    assert upstream.got[0]["body"]["max_tokens"] == 30
    ask(client, red)  # 18 tokens used: 12 left
    assert upstream.got[1]["body"]["max_tokens"] == 12
    response = ask(client, red)
    assert response.status_code == 429 and error_of(response)["code"] == "token_cap"


@pytest.mark.parametrize("policy", ["own", "none"])
def test_a_packet_without_the_window_says_so(client, upstream, red, policy):
    PacketVersion.objects.filter(pk=red.packet_version.pk).update(model_policy=policy)
    response = ask(client, red)
    assert response.status_code == 404 and error_of(response)["code"] == "model_not_provided"
    assert upstream.got == []


def test_the_default_policy_follows_the_setting(client, red, settings):
    settings.MODEL_URL = ""
    response = ask(client, red)
    assert response.status_code == 404 and "your own model" in error_of(response)["message"]


def test_a_provided_packet_without_an_upstream_says_so(client, red, settings):
    settings.MODEL_URL = ""
    PacketVersion.objects.filter(pk=red.packet_version.pk).update(model_policy="provided")
    response = ask(client, red)
    assert response.status_code == 503 and error_of(response)["code"] == "model_not_configured"


def test_after_the_deadline_and_grace_the_window_is_closed(client, upstream, red, settings):
    type(red).objects.filter(pk=red.pk).update(deadline=timezone.now() - timezone.timedelta(seconds=301))
    response = ask(client, red)
    assert response.status_code == 403 and error_of(response)["code"] == "deadline"


def test_an_unknown_or_revoked_link_is_a_404(client, upstream, red):
    assert error_of(ask(client, SimpleNamespace(raw_token="nope")))["code"] == "invalid_link"
    type(red).objects.filter(pk=red.pk).update(revoked_at=timezone.now())
    response = ask(client, red)
    assert response.status_code == 404 and error_of(response)["code"] == "invalid_link"


def test_the_models_list_names_the_packets_model(client, upstream, red):
    response = client.get(base(red) + "/models")
    assert [m["id"] for m in response.json()["data"]] == ["packet-model"]


# The official client, as a candidate would use it: a junk api_key, the base URL of their link.

@pytest.fixture
def openai_client(live_server):
    import openai

    def make(invitation):
        return openai.OpenAI(base_url=live_server.url + base(invitation), api_key="sk-junk", max_retries=0)

    return make


@live
def test_the_openai_client_is_refused_before_red_with_the_gates_message(openai_client, upstream, started):
    import openai

    with pytest.raises(openai.PermissionDeniedError) as refused:
        openai_client(started).chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
    assert "python gate.py red" in str(refused.value)


@live
def test_the_openai_client_gets_plain_and_streamed_replies_after_red(openai_client, upstream, red):
    client = openai_client(red)
    messages = [{"role": "user", "content": "Why?"}]
    plain = client.chat.completions.create(model="gpt-4o", messages=messages)
    assert plain.choices[0].message.content == REPLY and plain.usage.total_tokens == 18
    parts = [c.choices[0].delta.content for c in client.chat.completions.create(
        model="gpt-4o", messages=messages, stream=True) if c.choices]
    assert parts == WORDS
    assert [m.id for m in client.models.list()] == ["packet-model"]
    assert {g["body"]["model"] for g in upstream.got} == {"packet-model"}
    assert {g["headers"]["Authorization"] for g in upstream.got} == {f"Bearer {KEY}"}
    assert [(e.reply, e.streamed) for e in ModelExchange.objects.all()] == [(REPLY, False), (REPLY, True)]


@live
def test_the_openai_client_sees_a_cut_stream_as_an_error(openai_client, upstream, red):
    import openai

    upstream.mode = "cut"
    with pytest.raises(openai.APIError) as broken:
        list(openai_client(red).chat.completions.create(
            model="x", messages=[{"role": "user", "content": "hi"}], stream=True))
    assert "broke off" in str(broken.value) and KEY not in str(broken.value)


@live
def test_the_openai_client_sees_the_caps_and_never_the_key(openai_client, upstream, red, settings):
    import openai

    settings.MODEL_MAX_REQUESTS = 1
    upstream.mode = "http500"
    client = openai_client(red)
    with pytest.raises(openai.APIStatusError) as failed:
        client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
    assert failed.value.status_code == 502 and KEY not in failed.value.response.text
    with pytest.raises(openai.RateLimitError) as capped:
        client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
    assert "1 request" in str(capped.value)


@live
def test_nothing_in_a_request_changes_where_the_proxy_goes(openai_client, upstream, red):
    client = openai_client(red).with_options(default_headers={"X-Forwarded-Host": "evil.example"})
    client.chat.completions.create(
        model="http://evil.example/v1", messages=[{"role": "user", "content": "hi"}],
        extra_body={"base_url": "http://evil.example", "api_base": "http://evil.example", "url": "http://evil"},
        extra_headers={"Authorization": "Bearer sk-candidate"},
    )
    sent = upstream.got[0]
    assert sent["path"] == "/v1/chat/completions" and sent["body"]["model"] == "packet-model"
    assert not {"base_url", "api_base", "url"} & set(sent["body"])
    assert sent["headers"]["Authorization"] == f"Bearer {KEY}" and "X-Forwarded-Host" not in sent["headers"]
