"""The model window served as in production, by daphne, in front of the fake upstream (conftest.py):
many requests at once against the caps, a reply streamed as it comes, a client that leaves mid-reply,
and an upstream that says its key back."""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx2
import pytest

from sessions_app.models import ModelExchange

from .conftest import KEY, REPLY

pytestmark = pytest.mark.django_db(transaction=True)
WAIT_S = 60  # the most any event below is waited for; each wait ends as soon as its event happens


@pytest.fixture(autouse=True)
def window(upstream, settings):
    """The window's settings, set before daphne forks (it takes the settings of that moment)."""
    settings.MODEL_MAX_REQUESTS, settings.MODEL_TIMEOUT_S = 10, WAIT_S


def endpoint(base: str, invitation) -> str:
    return f"{base}/t/{invitation.raw_token}/model/v1/chat/completions"


def body(**more) -> dict:
    return {"messages": [{"role": "user", "content": "Why is the refund total wrong?"}], **more}


def wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, f"waited {WAIT_S} s for {what}"
        time.sleep(0.05)


def data_events(lines) -> list[dict | str]:
    """The data lines of a server-sent event stream, each parsed ("[DONE]" as it is), in order."""
    events = []
    for line in lines:
        if line.startswith("data:"):
            data = line[5:].strip()
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


@pytest.fixture(params=["daphne", "threaded WSGI"])
def served(request, upstream, red):
    """The window's base URL under daphne (production) and under a threaded WSGI server (live_server)."""
    name = "daphne_url" if request.param == "daphne" else "live_server"
    server = request.getfixturevalue(name)
    return server if isinstance(server, str) else server.url


def test_the_request_cap_holds_under_concurrent_requests(served, upstream, red):
    # The upstream holds every reply until all requests have been answered or reached it: a request
    # checked before another's reservation counted would reach it too, past the cap.
    upstream.mode = "held_plain"
    answered: list[int] = []

    def one(_):
        response = httpx2.post(endpoint(served, red), json=body(), timeout=2 * WAIT_S)
        answered.append(response.status_code)
        return response

    with ThreadPoolExecutor(15) as pool:
        futures = [pool.submit(one, n) for n in range(30)]
        try:
            wait_for(lambda: len(answered) + len(upstream.got) >= 30 or len(upstream.got) > 10,
                     "every request to be refused or to reach the upstream while it holds its replies")
            assert len(upstream.got) <= 10, f"{len(upstream.got)} requests reached the upstream past the cap of 10"
        finally:
            upstream.release.set()
        responses = [f.result() for f in futures]
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 10 + [429] * 20, statuses
    assert len(upstream.got) == 10 and not upstream.held_too_long
    assert all(r.json()["error"]["code"] == "request_cap" for r in responses if r.status_code == 429)
    assert ModelExchange.objects.filter(invitation=red, finished=True).count() == 10


def test_a_streamed_reply_reaches_the_client_through_daphne_as_the_upstream_sends_it(daphne_url, upstream, red):
    # The upstream holds its second chunk until the client has read the first through daphne.
    upstream.mode = "held"
    with httpx2.stream("POST", endpoint(daphne_url, red), json=body(stream=True), timeout=WAIT_S) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        first = next(e for e in data_events(lines_until_data(lines)))
        assert first["choices"][0]["delta"]["content"] == "Use "
        upstream.release.set()
        rest = data_events(lines)
    assert rest[-1] == "[DONE]" and not upstream.held_too_long
    texts = [e["choices"][0]["delta"]["content"] for e in [first, *rest[:-1]] if e.get("choices")]
    assert "".join(texts) == REPLY
    exchange = ModelExchange.objects.get()
    assert (exchange.reply, exchange.client_gone, exchange.finished, exchange.error) == (REPLY, False, True, "")


def lines_until_data(lines):
    """Lines up to and including the first data line (the rest stay in ``lines``)."""
    for line in lines:
        yield line
        if line.startswith("data:"):
            return


def test_a_client_that_leaves_mid_reply_is_on_record_with_what_it_was_sent(daphne_url, upstream, red):
    upstream.mode = "held"
    with httpx2.stream("POST", endpoint(daphne_url, red), json=body(stream=True), timeout=WAIT_S) as response:
        first = data_events(lines_until_data(response.iter_lines()))
        assert first[0]["choices"][0]["delta"]["content"] == "Use "
    # The client has gone; the upstream still holds the rest of its reply.
    wait_for(lambda: ModelExchange.objects.filter(finished=True).exists(), "the exchange to be recorded")
    upstream.release.set()
    exchange = ModelExchange.objects.get()
    assert (exchange.reply, exchange.client_gone, exchange.error) == ("Use ", True, "")


@pytest.mark.parametrize("mode, shown, error", [
    ("key_split", "Your key is [key], said twice: [key].", ""),
    ("key_cut", "Your key is [key]", "broke off"),
    ("key_error", "Use ", "The model server sent an error: invalid key [key]."),
])
def test_the_key_never_reaches_the_client_in_any_byte_of_a_stream(daphne_url, upstream, red, mode, shown, error):
    upstream.mode = mode
    with httpx2.stream("POST", endpoint(daphne_url, red), json=body(stream=True), timeout=WAIT_S) as response:
        raw = response.read()
    # Neither the key nor its first half (an event's worth) in the bytes the client got.
    assert KEY not in raw.decode() and KEY[:len(KEY) // 2] not in raw.decode()
    events = data_events(raw.decode().splitlines())
    texts = [e["choices"][0]["delta"]["content"] for e in events if isinstance(e, dict) and e.get("choices")]
    assert "".join(texts) == shown
    errors = [e["error"]["message"] for e in events if isinstance(e, dict) and "error" in e]
    assert (error in errors[0]) if error else errors == []
    exchange = ModelExchange.objects.get()
    assert exchange.reply == shown and KEY not in json.dumps(list(ModelExchange.objects.values()), default=str)


def test_a_reply_under_way_holds_up_no_other_request(daphne_url, upstream, red):
    upstream.mode = "held"
    held = threading.Thread(target=lambda: httpx2.post(endpoint(daphne_url, red), json=body(stream=True),
                                                       timeout=WAIT_S), daemon=True)
    held.start()
    wait_for(lambda: upstream.got, "the first request to reach the upstream")
    models = httpx2.get(f"{daphne_url}/t/{red.raw_token}/model/v1/models", timeout=WAIT_S)
    assert models.status_code == 200 and not upstream.release.is_set()
    upstream.release.set()
    held.join(WAIT_S)


def test_a_client_that_leaves_before_a_plain_reply_is_on_record_as_sent_nothing(daphne_url, upstream, red):
    upstream.mode = "held_plain"
    data = json.dumps(body()).encode()
    port = int(daphne_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as connection:
        connection.sendall(f"POST /t/{red.raw_token}/model/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
        wait_for(lambda: upstream.got, "the request to reach the upstream")
    # The client has gone; the upstream still holds its reply.
    wait_for(lambda: ModelExchange.objects.filter(finished=True).exists(), "the exchange to be recorded")
    upstream.release.set()
    exchange = ModelExchange.objects.get()
    assert (exchange.reply, exchange.client_gone, exchange.error) == ("", True, "")
