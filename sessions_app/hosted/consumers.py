"""The hosted terminal's WebSocket, /t/<token>/terminal: a pty in the candidate's workspace, in the page.

Frames, a contract scripts rely on (xterm.js's attach convention): a text frame
is raw terminal input (from the browser) or output (to it); a text frame that
is a JSON object is a control message: ``{"resize": [cols, rows]}`` from the
browser, ``{"close": {"code": ..., "reason": ...}}`` from the server just before
it closes, and ``{"stuck": reason}`` from the server when the workspace's processes
are pinned at their cap (a fork bomb: the page offers the restart, the terminal stays
attached), ``{"stuck": null}`` once they are not (output that happens to be a JSON
object is sent in two frames).
Frames over MAX_FRAME_BYTES and control messages that do not parse are dropped.

Close codes: 4401 the link is not valid, 4403 not allowed (not started, or the
packet is not worked in a hosted session), 4410 time is up, 4503 the shell runs
but no terminal can attach to it (its processes or memory are at the cap: a
fork bomb, or a connect to a workspace already pinned at its process cap, which
is not attached to a flooded screen); the reason says which in words, and for
4503 the page offers to restart the shell (sessions_app.hosted.workspaces.restart_shell).
While a terminal is attached, the server counts the workspace's processes every
CAP_SAMPLE_S (grading.engine.sandbox.shell.CapWatch says when they are pinned). The socket
joins a group per invitation, so the server can close every terminal of an
invitation (``close_terminals``).

Output is sent in chunks of at most CHUNK_BYTES and at most OUTPUT_BYTES_PER_S
per socket: past that the pty is not read until the next second, so a program
that floods its output waits (as on a slow terminal) instead of the server
queueing it without bound. Input, output and resizes are recorded
(grading.engine.asciicast) in the workspace's session.cast.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import os
from types import SimpleNamespace
from urllib.parse import parse_qs

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from grading.engine.asciicast import Recorder
from takehome.models import PacketVersion

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 * 1024
CHUNK_BYTES = 16 * 1024
OUTPUT_BYTES_PER_S = 1024 * 1024
COLS_RANGE = range(2, 501)
ROWS_RANGE = range(1, 201)
RECHECK_S = 30.0
ATTACH_WAIT_S = 5.0  # input waits at most this long for the shell's first output after connecting
CAP_SAMPLE_S = 0.5  # how often an attached terminal counts its workspace's processes against the cap

BAD_TOKEN, NOT_ALLOWED, TIME_UP, STUCK = 4401, 4403, 4410, 4503
REASON_BAD_TOKEN = "This link is not valid."  # unknown; a revoked link is not found either
REASON_TOO_MANY = "Too many links that do not work were tried from your address; wait a minute."
REASON_REVOKED = "This invitation was withdrawn."
REASON_NOT_STARTED = "The session has not started: press Start on the session's page first."
REASON_NOT_HOSTED = "This packet is not worked in a hosted session: download it from the session's page."
REASON_TIME_UP = "Time is up: the workspace is closed."
REASON_ENDED = "The shell ended. Reconnect to start a new one."
# why this short: a close frame's reason holds at most 123 bytes
REASON_STUCK = "Your shell runs, but no terminal can attach: its processes or memory are at the cap. Restart it: files stay."
REASON_PINNED = "Your shell's programs hold every process the workspace may have (a fork bomb?). Restart it: files stay."
REASON_UNAVAILABLE = "The workspace could not be opened: {}"
SERVER_ERROR = 1011


def group_name(invitation_id: int) -> str:
    return f"terminal-invitation-{invitation_id}"


async def close_terminals_async(invitation_id: int, code: int, reason: str) -> None:
    await get_channel_layer().group_send(group_name(invitation_id),
                                         {"type": "terminal.close", "code": code, "reason": reason})


def close_terminals(invitation_id: int, code: int, reason: str) -> None:
    """Close every open terminal of the invitation, with ``code`` and ``reason`` (e.g. 4403, REASON_REVOKED)."""
    async_to_sync(close_terminals_async)(invitation_id, code, reason)


def close_revoked_terminals(sender, invitation_id: int, **kwargs) -> None:
    """takehome.signals.invitation_revoked: close the invitation's terminals, with the reason."""
    try:
        close_terminals(invitation_id, NOT_ALLOWED, REASON_REVOKED)
    except Exception:  # the channel layer's Redis is down: each socket sees it within its RECHECK_S
        log.warning("could not close the terminals of revoked invitation %s", invitation_id, exc_info=True)


# The two calls into the workspace (parts C1 and A).
def open_client(invitation, cols: int, rows: int):
    """Open the invitation's workspace and shell, and attach a fresh client of it on a pty."""
    from grading.engine.sandbox.shell import spawn_client
    from sessions_app.models import Workspace

    from .workspaces import ensure_open, reopen

    row = Workspace.objects.filter(invitation_id=invitation.pk).first()
    if row is not None:
        row = reopen(invitation, row)  # its deadline extended since it froze: writable again, under a free uid
    # why: a frozen workspace has given its uid back, which another open workspace may hold now;
    # a shell started here would run beside that candidate's, under the same uid and caps.
    if row is not None and (row.frozen_at is not None or row.closed):
        raise WorkspaceClosed("time is up: your workspace is closed and read-only")
    return spawn_client(ensure_open(invitation), cols, rows)


def history_for(invitation) -> str:
    """The shell's history above its screen (grading.engine.sandbox.shell.pane_history); "" when there is none."""
    from grading.engine.sandbox.shell import pane_history

    from .workspaces import workspace_for

    try:
        return pane_history(workspace_for(invitation))
    except Exception:  # a scrollback is a help, never a reason to refuse the terminal
        log.exception("could not read the pane history of invitation %s", invitation.pk)
        return ""


def history_frames(history: str, rows: int) -> list[str]:
    """The history as output that lands in the browser terminal's scrollback, before tmux draws the screen.

    why the blank lines after it: tmux's redraw clears the screen, and a clear does not keep
    what it erases; scrolled past the screen first, the history stays reachable by the wheel.
    """
    if not history:
        return []
    text = history.replace("\n", "\x1b[0m\r\n") + "\x1b[0m" + "\r\n" * rows
    return [part for start in range(0, len(text), CHUNK_BYTES)
            for part in output_frames(text[start:start + CHUNK_BYTES])]


def shell_stuck(invitation_id: int, exit_code: int | None) -> bool:
    """Whether a client that ended with ``exit_code`` could not attach to a shell that still runs.

    why the exit code: a client that detached, or whose shell exited, ends with 0; one that could
    not even start (bwrap cannot fork under the workspace's process cap) or lost its way ends with
    another, and then a shell still running means the terminal is locked out of it.
    """
    from grading.engine.sandbox.shell import shell_running
    from takehome.models import Invitation

    from .workspaces import workspace_for

    if exit_code in (0, None):
        return False
    invitation = Invitation.objects.select_related("packet_version").filter(pk=invitation_id).first()
    if invitation is None or refusal_for(invitation):
        return False
    try:
        return shell_running(workspace_for(invitation))
    except Exception:
        log.exception("could not tell whether the shell of invitation %s runs", invitation_id)
        return False


def live_workspace(invitation):
    """The invitation's workspace when it is open on this host (its uid its own), else None: nothing to count."""
    from sessions_app.models import Workspace

    from .workspaces import workspace_for

    # why not a frozen or closed one: it has given its uid back, and that uid's cgroup may be another's now
    row = Workspace.objects.filter(invitation_id=invitation.pk, frozen_at=None, closed=False,
                                   host=settings.WORKSPACE_HOST).first()
    try:
        return workspace_for(invitation, row) if row is not None else None
    except Exception:  # counting is a help, never a reason to refuse the terminal
        log.exception("could not find the workspace of invitation %s", invitation.pk)
        return None


async def count_processes(ws):
    """grading.engine.sandbox.shell.process_count, off the event loop (under rlimits it reads all of /proc)."""
    from grading.engine.sandbox.shell import process_count

    return await asyncio.get_running_loop().run_in_executor(None, process_count, ws)


async def pinned_now(ws) -> bool:
    """Whether the workspace is pinned at its process cap: counts until one is below it, PINNED_S at most.

    why not one count: a build may touch the cap for a moment (grading.engine.sandbox.shell.CapWatch).
    """
    from grading.engine.sandbox.shell import CapWatch

    loop = asyncio.get_running_loop()
    watch, start = CapWatch(), loop.time()
    while True:
        count = await count_processes(ws)
        if watch.add(count, loop.time()):
            return True
        if count is None or not count.at_cap or loop.time() - start > watch.hold_s + CAP_SAMPLE_S:
            return False
        await asyncio.sleep(CAP_SAMPLE_S)


class WorkspaceClosed(Exception):
    """The invitation's workspace was frozen (deadline or revocation): no shell is started again."""


def recording_path(invitation):
    from .workspaces import cast_path

    return cast_path(invitation)


def share_recording(invitation) -> None:
    """The recording readable by the web server, which reads it for the review page (workspaces.share_recording)."""
    from .workspaces import share_recording as share

    share(invitation)


def hosted_allowed(version) -> bool:
    """Whether the packet version is worked in a hosted session (its work_mode: zip, hosted or both)."""
    return version.work_mode in (PacketVersion.WorkMode.HOSTED, PacketVersion.WorkMode.BOTH)


def output_frames(text: str) -> list[str]:
    """Output as frames that are never a JSON object (which the page would take for a control message)."""
    if text.startswith("{"):
        try:
            if isinstance(json.loads(text), dict):
                return [text[:1], text[1:]]
        except ValueError:
            pass
    return [text]


async def ready(fd: int, add, remove) -> None:
    """Until ``fd`` is ready (``add``/``remove``: the loop's reader or writer calls)."""
    future = asyncio.get_running_loop().create_future()
    add(fd, lambda: future.done() or future.set_result(None))
    try:
        await future
    finally:
        remove(fd)


def _size(query: dict, name: str, allowed: range, default: int) -> int:
    try:
        value = int(query.get(name, [default])[0])
    except ValueError:
        return default
    return value if value in allowed else default


def refusal_for(invitation) -> tuple[int, str] | None:
    """Why the invitation's terminal may not be open now (code, reason), or None."""
    if invitation.revoked_at is not None:
        return NOT_ALLOWED, REASON_REVOKED
    if not hosted_allowed(invitation.packet_version):
        return NOT_ALLOWED, REASON_NOT_HOSTED
    phase = invitation.phase
    if phase == invitation.NOT_STARTED:
        return NOT_ALLOWED, REASON_NOT_STARTED
    if phase == invitation.CLOSED:
        return TIME_UP, REASON_TIME_UP
    return None


def check_link(token: str, address: str):
    """(invitation, None) when the terminal may open, else (None or the invitation, (code, reason))."""
    from sessions_app.links import TooManyLookups, invitation_for

    try:
        invitation = invitation_for(SimpleNamespace(META={"REMOTE_ADDR": address}), token)
    except TooManyLookups:
        return None, (BAD_TOKEN, REASON_TOO_MANY)
    if invitation is None:
        return None, (BAD_TOKEN, REASON_BAD_TOKEN)
    return invitation, refusal_for(invitation)


def recheck(invitation_id: int) -> tuple[tuple[int, str] | None, float]:
    """The invitation read again: (why its terminal must close, or None; seconds until its workspace closes)."""
    from takehome.models import Invitation

    invitation = Invitation.objects.select_related("packet_version").filter(pk=invitation_id).first()
    if invitation is None:
        return (BAD_TOKEN, REASON_BAD_TOKEN), 0.0
    refusal = refusal_for(invitation)
    left = 0.0 if refusal else invitation.seconds_until_closed_at(timezone.now())
    return refusal, left


def _close_when_opened(opening: asyncio.Future) -> None:
    """Close the client of an opening whose consumer was cancelled meanwhile (no page is attached to it)."""
    if opening.cancelled() or opening.exception() is not None:
        return
    asyncio.get_running_loop().run_in_executor(None, opening.result().close)


class TerminalConsumer(AsyncWebsocketConsumer):
    client = None
    invitation_id = None
    recorder = None
    group = None
    drawn = None  # set once the client printed something: tmux is attached and has drawn the screen
    tasks = ()
    gone = False  # the socket closed (disconnect ran), perhaps while its shell was still being opened

    async def __call__(self, scope, receive, send):
        # why: an error in the channel layer (a Redis timeout) or in a handler ends the consumer
        # without disconnect(); the client (pty and sandboxed tmux client) would stay, keep
        # recording, and count against the workspace's processes until the cap refuses new ones.
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.end_client()

    async def websocket_disconnect(self, message):
        try:
            await super().websocket_disconnect(message)
        finally:
            await self.end_client()

    async def guarded(self, work) -> None:
        """Run ``work`` (pump or watch); if it fails, end the client and close the socket instead of leaving them."""
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the terminal's %s failed; closing its client", work.__name__)
            await self.end_client()
            try:
                await self.close(SERVER_ERROR)
            except Exception:  # the socket may be what failed
                pass

    async def connect(self):
        token = self.scope["url_route"]["kwargs"]["token"]
        address = (self.scope.get("client") or ["unknown"])[0]
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        cols = _size(query, "cols", COLS_RANGE, 80)
        rows = _size(query, "rows", ROWS_RANGE, 24)
        invitation, refusal = await database_sync_to_async(check_link)(token, address)
        if refusal:
            await self.refuse(*refusal)
            return
        ws = await database_sync_to_async(live_workspace)(invitation)
        if ws is not None and await pinned_now(ws):
            # why before attaching: a client that slips in shows a screen flooded with "fork: retry"
            # and takes one more of the processes; the page offers the restart at once instead
            await self.refuse(STUCK, REASON_PINNED)
            return
        self.group = group_name(invitation.pk)
        self.invitation_id = invitation.pk
        await self.channel_layer.group_add(self.group, self.channel_name)
        # why accept before opening the shell: opening it (mounting the files, starting tmux in its sandbox) can
        # take longer than the server waits for a handshake on a loaded machine (daphne's
        # --websocket_connect_timeout, 5 s by default); the socket was then dropped, the page asked again, and
        # each new attempt queued one more opening behind the last, so the terminal never connected. The page
        # says "starting the shell" until the {"ready": true} frame below.
        await self.accept()
        opening = asyncio.ensure_future(database_sync_to_async(open_client)(invitation, cols, rows))
        try:
            # why shielded: the server cancels a consumer whose page left (after its close timeout); the opening
            # goes on in its thread, and the client it makes is closed when it is done (_close_when_opened)
            client = await asyncio.shield(opening)
        except asyncio.CancelledError:
            opening.add_done_callback(_close_when_opened)
            raise
        except Exception as exc:  # the workspace's own exceptions carry the words for the candidate
            await self.close_saying(NOT_ALLOWED, REASON_UNAVAILABLE.format(exc)[:120])
            return
        if self.gone:  # the page left while its shell was being opened: nothing is attached to it
            await database_sync_to_async(client.close)()
            return
        self.client = client
        try:
            path = await database_sync_to_async(recording_path)(invitation)
            history = await database_sync_to_async(history_for)(invitation)
            ws = await database_sync_to_async(live_workspace)(invitation)  # the row exists now
        except Exception as exc:
            await self.end_client()
            await self.close_saying(NOT_ALLOWED, REASON_UNAVAILABLE.format(exc)[:120])
            return
        await self.send(text_data=json.dumps({"ready": True}))
        # why not recorded: the recording holds this output already, from when it was new
        for part in history_frames(history, rows):
            await self.send(text_data=part)
        self.recorder = Recorder(path, cols, rows, settings.RECORDING_MAX_BYTES)
        # why: marks where this connection begins; a redraw after it is no new output (grading/engine/replay.py)
        self.recorder.resize(cols, rows)
        await database_sync_to_async(share_recording)(invitation)  # the review page's player reads it
        self.drawn = asyncio.Event()
        loop = asyncio.get_running_loop()
        self.tasks = [loop.create_task(self.guarded(self.pump())),
                      loop.create_task(self.guarded(self.watch(invitation.pk)))]
        if ws is not None:
            self.tasks.append(loop.create_task(self.guarded(self.watch_cap(ws))))

    async def refuse(self, code: int, reason: str) -> None:
        # why accept first: a close before the handshake reaches the browser as a bare
        # failure; after it, the browser gets the code and the reason.
        await self.accept()
        await self.close_saying(code, reason)

    async def close_saying(self, code: int, reason: str) -> None:
        """Close with ``code`` and ``reason``, the reason also in a control frame just before.

        why the frame: daphne sends the close code but drops the reason, and the page shows it.
        """
        await self.send(text_data=json.dumps({"close": {"code": code, "reason": reason}}))
        await self.close(code, reason)

    async def watch(self, invitation_id: int) -> None:
        """Close the terminal once time is up or the invitation is revoked, even with no channel layer to say so.

        Reads the invitation again every RECHECK_S and at the close of its workspace, so an
        extended deadline keeps the terminal open.
        """
        while True:
            refusal, left = await database_sync_to_async(recheck)(invitation_id)
            if refusal:
                await self.end_client()
                await self.close_saying(*refusal)
                return
            await asyncio.sleep(min(RECHECK_S, max(left, 0.0) + 0.5))

    async def watch_cap(self, ws) -> None:
        """Say to the page when the workspace's processes are pinned at their cap, and when no longer.

        why while attached: a client that attached before the bomb filled the cap (or a reload that
        slipped in) shows a flood of "fork: retry" and nothing else; the page offers the restart.
        """
        from grading.engine.sandbox.shell import CapWatch

        loop = asyncio.get_running_loop()
        watch = CapWatch()
        while True:
            was = watch.pinned
            if watch.add(await count_processes(ws), loop.time()) != was:
                await self.send(text_data=json.dumps({"stuck": REASON_PINNED if watch.pinned else None}))
            await asyncio.sleep(CAP_SAMPLE_S)

    async def pump(self) -> None:
        """The pty's output to the socket, in bounded chunks and at a bounded rate."""
        loop = asyncio.get_running_loop()
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        fd = self.client.fd
        window, sent = loop.time(), 0
        while True:
            await ready(fd, loop.add_reader, loop.remove_reader)
            try:
                data = os.read(fd, CHUNK_BYTES)
            except BlockingIOError:
                continue
            except OSError:  # EIO: the pty's other side closed
                data = b""
            if not data:
                break
            self.drawn.set()
            text = decoder.decode(data)
            if text:
                for part in output_frames(text):
                    await self.send(text_data=part)
                self.recorder.output(text)
            sent += len(data)
            now = loop.time()
            if now - window >= 1.0:
                window, sent = now, 0
            elif sent >= OUTPUT_BYTES_PER_S:
                await asyncio.sleep(window + 1.0 - now)
                window, sent = loop.time(), 0
        client = self.client
        await self.end_client()
        exit_code = client.proc.returncode if client is not None else None
        if await database_sync_to_async(shell_stuck)(self.invitation_id, exit_code):
            await self.close_saying(STUCK, REASON_STUCK)
            return
        await self.close_saying(1000, REASON_ENDED)

    async def receive(self, text_data=None, bytes_data=None):
        if self.client is None:
            return
        data = text_data if text_data is not None else (bytes_data or b"").decode("utf-8", "replace")
        if len(data) > MAX_FRAME_BYTES or len(data.encode("utf-8", "replace")) > MAX_FRAME_BYTES:
            return  # dropped: a paste that large is not typing
        if data.startswith("{"):
            try:
                control = json.loads(data)
            except ValueError:
                control = None
            if isinstance(control, dict):
                self.control(control)
                return
        if not self.drawn.is_set():
            # why wait: until tmux has drawn, the pty is in cooked mode, and its echo of what was typed
            # lands on the screen before tmux's own drawing, as a stray line at the top
            try:
                await asyncio.wait_for(self.drawn.wait(), timeout=ATTACH_WAIT_S)
            except TimeoutError:
                pass
        self.recorder.input(data)
        await self.write(data.encode("utf-8", "replace"))

    def control(self, message: dict) -> None:
        size = message.get("resize")
        if (isinstance(size, list) and len(size) == 2 and all(type(n) is int for n in size)
                and size[0] in COLS_RANGE and size[1] in ROWS_RANGE):
            self.client.resize(size[0], size[1])
            self.recorder.resize(size[0], size[1])
        # anything else: dropped

    async def write(self, data: bytes) -> None:
        """All of ``data`` to the pty; waits while the pty's input buffer is full."""
        fd = self.client.fd
        loop = asyncio.get_running_loop()
        while data:
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                try:
                    await asyncio.wait_for(ready(fd, loop.add_writer, loop.remove_writer), timeout=5)
                except TimeoutError:
                    return  # the program is not reading its input: drop the rest
            except OSError:
                return

    async def terminal_close(self, event):
        await self.end_client()
        await self.close_saying(event["code"], event["reason"])

    async def end_client(self) -> None:
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()
        client, self.client = self.client, None
        if client is not None:
            await database_sync_to_async(client.close)()

    async def disconnect(self, code):
        self.gone = True
        await self.end_client()
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
