"""The hosted terminal's WebSocket (sessions_app/hosted/consumers.py) through channels' WebsocketCommunicator.

The shell behind it is the real workspace (hosted_shell.py: tmux in bubblewrap under a uid
of its own); the socket, its checks, the frames and the recording are real.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from conftest import require
from grading.engine import asciicast
from sessions_app.hosted import consumers
from sessions_app.hosted.workspaces import cast_path
from takehome.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://localhost")


@pytest.fixture(autouse=True)
def _memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def started(invitation):
    from sessions_app.actions import do_start_session

    do_start_session(invitation)
    return invitation


def run(scenario):
    # why a thread of its own: after a browser test, playwright's event loop runs in this one.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(async_to_sync(scenario)).result()


class Socket(WebsocketCommunicator):
    """channels' communicator, whose connect waits 30 s by default rather than one second.

    why: the consumer starts the candidate's shell (bubblewrap, tmux, the workspace's cgroup) before it
    accepts, which on a loaded machine takes longer than a second; a refusal still answers at once.
    """

    async def connect(self, timeout: float = 30):
        return await super().connect(timeout)


def socket(invitation_or_token, query="", origin=ORIGIN) -> Socket:
    token = getattr(invitation_or_token, "raw_token", invitation_or_token)
    headers = [origin] if origin else []
    return Socket(application, f"/t/{token}/terminal{query}", headers=headers)


async def closed_with(comm) -> dict:
    connected, _ = await comm.connect()
    assert connected  # accepted, then closed with a code the page can show
    said = await comm.receive_output(timeout=5)
    assert said["type"] == "websocket.send", said
    message = await comm.receive_output(timeout=5)
    assert message["type"] == "websocket.close", message
    # the reason also in a control frame just before (daphne drops the close frame's reason)
    assert json.loads(said["text"]) == {"close": {"code": message["code"], "reason": message["reason"]}}
    return message


def screen_text(output: str) -> str:
    """Terminal output as text: tmux moves the cursor right instead of writing spaces, and draws in colours."""
    output = re.sub(r"\x1b\[(\d*)C", lambda m: " " * int(m.group(1) or 1), output)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-B]|\x1b[=>]|\r", "", output)


async def output_until(comm, needle: str, timeout: float = 10) -> str:
    """The output (as text) until ``needle`` shows."""
    seen = ""
    end = time.monotonic() + timeout
    while needle not in screen_text(seen):
        left = end - time.monotonic()
        try:
            assert left > 0
            message = await comm.receive_output(timeout=left)
        except (AssertionError, TimeoutError):
            raise AssertionError(f"{needle!r} never came; got {screen_text(seen)[-800:]!r}") from None
        assert message["type"] == "websocket.send", message
        seen += message.get("text", "")
    return screen_text(seen)


def test_an_unknown_token_closes_with_4401_and_says_why(db, shells):
    async def scenario():
        message = await closed_with(socket("not-a-real-token"))
        assert message["code"] == 4401
        assert "not valid" in message["reason"]

    run(scenario)
    assert shells.clients == []


def test_a_session_not_started_closes_with_4403(invitation, shells):
    async def scenario():
        message = await closed_with(socket(invitation))
        assert message["code"] == 4403
        assert "Start" in message["reason"]

    run(scenario)
    assert shells.clients == []


def test_after_the_close_of_uploads_closes_with_4410(started, shells):
    started.deadline = timezone.now() - timezone.timedelta(hours=1)
    started.save(update_fields=["deadline"])

    async def scenario():
        message = await closed_with(socket(started))
        assert message["code"] == 4410
        assert "Time is up" in message["reason"]

    run(scenario)


def test_a_packet_without_the_hosted_mode_closes_with_4403(started, shells, monkeypatch):
    monkeypatch.setattr(consumers, "hosted_allowed", lambda version: False)

    async def scenario():
        message = await closed_with(socket(started))
        assert message["code"] == 4403
        assert "not worked in a hosted session" in message["reason"]

    run(scenario)


def test_another_sites_page_cannot_open_the_terminal(started, shells):
    async def scenario():
        connected, _ = await socket(started, origin=(b"origin", b"https://evil.example")).connect()
        assert not connected

    run(scenario)
    assert shells.clients == []


def test_output_that_is_a_json_object_is_never_one_frame(started, shells):
    async def scenario():
        comm = socket(started)
        await comm.connect()
        await comm.send_to(text_data="sleep 0.5; printf '{\"close\": 1}'; sleep 5\n")
        assert json.loads((await comm.receive_output(timeout=30))["text"]) == {"ready": True}  # the server's own
        frames = []
        while "1}" not in "".join(frames):
            frames.append((await comm.receive_output(timeout=5))["text"])
        for frame in frames:
            try:
                assert not isinstance(json.loads(frame), dict), frames
            except ValueError:
                pass
        await comm.disconnect()

    run(scenario)
    assert consumers.output_frames('{"close": 1}') == ["{", '"close": 1}']


def test_the_socket_is_accepted_before_the_shell_opens_and_says_when_it_is_ready(started, shells, monkeypatch):
    """A shell slow to open (a loaded server) must not hold the handshake past the server's connect timeout."""
    opening = __import__("threading").Event()
    slow_open = consumers.open_client

    def held_open(*args):
        assert opening.wait(30), "the test never let the shell open"
        return slow_open(*args)

    monkeypatch.setattr(consumers, "open_client", held_open)

    async def scenario():
        comm = socket(started)
        connected, _ = await comm.connect(timeout=5)  # accepted while the shell is still being opened
        assert connected
        assert await comm.receive_nothing(timeout=0.3)  # nothing said before the shell is there
        opening.set()
        assert json.loads((await comm.receive_output(timeout=30))["text"]) == {"ready": True}
        await comm.send_to(text_data="echo ok-$((6*7))\n")
        await output_until(comm, "ok-42")
        await comm.disconnect()

    run(scenario)


def test_a_page_that_leaves_while_its_shell_opens_leaves_no_client_behind(started, shells, monkeypatch):
    opening, closed = __import__("threading").Event(), []
    slow_open = consumers.open_client

    def held_open(*args):
        assert opening.wait(30)
        client = slow_open(*args)
        real_close = client.close
        client.close = lambda: (closed.append(True), real_close())
        return client

    monkeypatch.setattr(consumers, "open_client", held_open)

    async def scenario():
        comm = socket(started)
        assert (await comm.connect(timeout=5))[0]
        await comm.disconnect()
        opening.set()
        for _ in range(300):  # the opening finishes in its thread, after the socket closed
            if closed:
                break
            await asyncio.sleep(0.1)

    run(scenario)
    assert closed == [True]


def test_typing_echoes_and_a_resize_reaches_the_pty(started, shells):
    async def scenario():
        comm = socket(started, "?cols=100&rows=30")
        connected, _ = await comm.connect()
        assert connected
        await comm.send_to(text_data="stty size\n")
        await output_until(comm, "30 100")
        await comm.send_to(text_data=json.dumps({"resize": [120, 40]}))
        # why the shell waits, not the test: the pty tells the tmux client, which tells its server, which
        # resizes, in a time no fixed wait can promise under load; the quotes keep the echo from matching
        await comm.send_to(text_data='until [ "$(stty size)" = "40 120" ]; do sleep 0.05; done; echo RE""SIZED\n')
        await output_until(comm, "RESIZED")
        await comm.disconnect()

    run(scenario)


def test_typing_at_once_waits_for_tmux_to_draw_so_no_stray_echo_tops_the_screen(started, shells):
    async def scenario():
        comm = socket(started)
        assert (await comm.connect())[0]
        await comm.send_to(text_data="echo early-$((2+3))\n")  # before any output: tmux is not attached yet
        first = await comm.receive_output(timeout=10)
        assert "echo early" not in first["text"], first  # the pty's own echo, before tmux set raw mode
        await output_until(comm, "early-5")
        await comm.disconnect()

    run(scenario)


def test_malformed_control_and_oversized_frames_are_dropped(started, shells):
    async def scenario():
        comm = socket(started)
        await comm.connect()
        for frame in ({"resize": [0, 24]}, {"resize": [10 ** 6, 10]}, {"resize": "80x24"}, {"resize": [80.5, 24]},
                      {"other": 1}):
            await comm.send_to(text_data=json.dumps(frame))
        await comm.send_to(text_data="echo " + "x" * (consumers.MAX_FRAME_BYTES + 1) + "\n")
        await comm.send_to(text_data="stty size; echo done-$((1+1))\n")
        seen = await output_until(comm, "done-2")
        assert "24 80" in seen  # no resize took
        assert "xxxx" not in seen  # the oversized frame never reached the shell
        assert "other" not in seen
        await comm.disconnect()

    run(scenario)


def test_revoking_closes_every_terminal_of_the_invitation_with_the_reason(started, shells):
    async def scenario():
        first, second = socket(started), socket(started)
        await first.connect()
        await second.connect()
        await consumers.close_terminals_async(started.pk, consumers.NOT_ALLOWED, consumers.REASON_REVOKED)
        for comm in (first, second):
            while (message := await comm.receive_output(timeout=5))["type"] != "websocket.close":
                pass
            assert message == {"type": "websocket.close", "code": 4403, "reason": consumers.REASON_REVOKED}

    run(scenario)
    time.sleep(0.2)
    assert len(shells.clients) == 2
    assert all(client.proc.poll() is not None for client in shells.clients)  # each tmux client ended


def test_revoking_the_invitation_closes_its_terminal_with_the_reason(started, shells):
    from takehome.actions import do_revoke_invitation

    async def scenario():
        comm = socket(started)
        assert (await comm.connect())[0]
        await database_sync_to_async(do_revoke_invitation)(started)
        while (message := await comm.receive_output(timeout=5))["type"] != "websocket.close":
            pass
        assert message["code"] == 4403 and "withdrawn" in message["reason"]

    run(scenario)


def test_time_running_out_while_connected_closes_with_4410_without_the_channel_layer(started, shells, monkeypatch):
    monkeypatch.setattr(consumers, "RECHECK_S", 0.2)

    async def scenario():
        comm = socket(started)
        assert (await comm.connect())[0]
        past = timezone.now() - timezone.timedelta(hours=1)
        await database_sync_to_async(type(started).objects.filter(pk=started.pk).update)(deadline=past)
        while (message := await comm.receive_output(timeout=5))["type"] != "websocket.close":
            pass
        assert message == {"type": "websocket.close", "code": 4410, "reason": consumers.REASON_TIME_UP}

    run(scenario)


def test_a_flood_of_output_is_sent_at_a_bounded_rate_and_ctrl_c_still_stops_it(started, shells):
    from sessions_app.actions import do_start_session
    from takehome.tests.factories import InvitationFactory

    # another candidate's terminal (one of the same invitation attaches to the same tmux session, flood and all)
    neighbour = InvitationFactory(packet_version=started.packet_version)
    do_start_session(neighbour)

    async def scenario():
        comm = socket(started)
        await comm.connect()
        await comm.send_to(text_data="yes flood-flood-flood\n")
        received, start = 0, time.monotonic()
        while time.monotonic() - start < 2.0:
            message = await comm.receive_output(timeout=5)
            assert len(message["text"].encode()) <= consumers.CHUNK_BYTES
            received += len(message["text"].encode())
        # two windows of the budget, and the chunk that crossed each
        assert received <= 3 * consumers.OUTPUT_BYTES_PER_S + 2 * consumers.CHUNK_BYTES
        # meanwhile the event loop is free: another terminal of the same server connects and answers while the
        # flood still runs (it runs until Ctrl-C). why no wall-time bound: a loaded machine is slow, not starved;
        # a loop held by the flood would never answer, which the timeout catches.
        other = socket(neighbour)
        assert (await other.connect())[0]
        await other.send_to(text_data="echo other-$((5+5))\n")
        await output_until(other, "other-10", timeout=30)
        await other.disconnect()
        await comm.send_to(text_data="\x03")
        await comm.send_to(text_data="echo stopped-$((1+1))\n")
        await output_until(comm, "stopped-2", timeout=15)
        await comm.disconnect()

    run(scenario)


def test_the_recording_is_asciicast_v2_with_input_output_resize_and_markers(started, shells):
    async def scenario():
        comm = socket(started, "?cols=90&rows=20")
        await comm.connect()
        await comm.send_to(text_data="echo recorded-$((1+1))\n")
        await output_until(comm, "recorded-2")
        await comm.send_to(text_data=json.dumps({"resize": [100, 30]}))
        await comm.disconnect()

    run(scenario)
    asciicast.append_marker(cast_path(started), "red captured")
    lines = cast_path(started).read_text().splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 2 and header["width"] == 90 and header["height"] == 20
    assert abs(header["timestamp"] - time.time()) < 60
    events = [json.loads(line) for line in lines[1:]]
    assert all(isinstance(t, float | int) and t >= 0 and code in "oirm" for t, code, _ in events)
    assert [e[1:] for e in events if e[1] == "i"] == [["i", "echo recorded-$((1+1))\n"]]
    assert any(code == "o" and "recorded-2" in data for _, code, data in events)
    assert ["r", "100x30"] in [e[1:] for e in events]
    assert events[-1][1:] == ["m", "red captured"]
    times = [t for t, _, _ in events]
    assert times == sorted(times)


def test_the_workspace_page_holds_the_terminal_under_the_pages_csp(started, client):
    response = client.get(f"/t/{started.raw_token}/workspace")
    assert response.status_code == 200
    body = response.content.decode()
    assert f'data-url="/t/{started.raw_token}/terminal"' in body
    assert "vendor/xterm/xterm.js" in body and "sessions_app/terminal.js" in body
    directives = dict(d.strip().split(" ", 1) for d in response["Content-Security-Policy"].split(";") if d.strip())
    assert directives["script-src"] == "'self'"  # no nonce or inline script (the directives come in any order)
    nonce = directives["style-src"].split("'nonce-")[1].split("'")[0]
    assert f'name="takehome-style-nonce" content="{nonce}"' in body


def test_the_workspace_page_before_start_sends_the_candidate_to_start(invitation, client):
    response = client.get(f"/t/{invitation.raw_token}/workspace")
    assert response.status_code == 302
    assert response["Location"] == f"/t/{invitation.raw_token}/"


def test_close_terminals_reaches_a_socket_through_the_brokers_redis(started, shells, settings, broker_url):
    """The layer as the settings build it from the broker's URL (a unix socket by default), not the in-memory one."""
    from takehome.settings import _redis_for_channels

    require(broker_url is not None, "redis-server is not installed (apt-get install redis-server)")
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": [_redis_for_channels(broker_url)],
                                                      "prefix": f"test-{time.time_ns()}"}}}

    async def scenario():
        comm = socket(started)
        assert (await comm.connect())[0]
        await asyncio.to_thread(consumers.close_terminals, started.pk, consumers.TIME_UP, consumers.REASON_TIME_UP)
        while (message := await comm.receive_output(timeout=10))["type"] != "websocket.close":
            pass
        assert message["code"] == 4410

    run(scenario)
