"""The host side of the `gate` command, and the sweep of hosted workspaces (`manage.py serve_workspaces`).

Each open workspace gets a unix socket, <folder>/gate/gate.sock (mode 0666 in
a root-owned 0755 folder), bound read-only into its sandbox at
/run/takehome/gate.sock. Which invitation a request is for comes from the
socket it arrived on, never from what it says: a shell can reach only its
own socket. A request is one JSON line of at most 4 KiB, ``{"command":
"red"}`` (red, model, green, submit, status, ask; submit may add ``"anyway":
true``, ask ``"new": true`` and its ``"prompt"``); the answer is one JSON line, ``{"ok": bool, "message": "..."}``, in
words a candidate can act on, after which an ask's reply came first as it
arrived, in lines of ``{"chunk": "..."}`` (sessions_app.model_window.terminal). A submit of a workspace lacking artifacts the
reviewers look for stores nothing and answers ``"incomplete": true`` with
their paths in ``"missing"``, unless it says ``"anyway"``. The
actions run in a thread, so one long capture never holds up another
workspace's socket.

The sweep (every ``sweep_every_s``) stops shells idle past
TAKEHOME_WORKSPACE_IDLE_MINUTES (their files saved and unmounted; the next
visit starts them again; files a capture mounted since go back to disk too)
and freezes workspaces past the deadline plus grace, or whose link was revoked
(read-only, shell stopped, files saved and unmounted, terminals closed with 4410).
Then it submits each workspace frozen at the deadline whose files changed since
its last submission, as the candidate's Submit would (actions.do_submit_at_deadline),
once per deadline: a workspace is settled when submitted, found unchanged, or refused (too
big), and tried again at the next sweep when it could not be read. Before all this,
a frozen workspace whose deadline a recruiter extended since (on whichever server)
is reopened, writable with its files as they were frozen (workspaces.reopen); its
new deadline freezes and submits it again.

The host also answers on <TAKEHOME_WORKSPACES_DIR>/serve_workspaces.sock, for
readiness (shared/health.py): on each connection it writes one JSON line,
``{"ok": true, "host": "...", "workspaces": N}`` (the workspaces it serves), and
closes. An answer proves its event loop runs, which the gate commands need.

why here and not in a Celery task: a workspace's files live on its own host
(TAKEHOME_WORKSPACE_HOST), mounted or saved there; a worker elsewhere cannot read
them. The grading that follows goes to the workers as any upload's does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from sessions_app import actions
from sessions_app.models import Workspace
from shared.health import FAIL, OFF, OK, UNKNOWN, Check
from shared.words import counted
from takehome.models import Invitation, PacketVersion

from . import workspaces

log = logging.getLogger(__name__)

MAX_LINE = 4096
READ_TIMEOUT_S = 30
COMMANDS = ("red", "model", "green", "submit", "status", "ask")
SOCKET_NAME = "gate.sock"
STATUS_SOCKET_NAME = "serve_workspaces.sock"
UNIX_PATH_MAX = 107  # bytes of a unix socket's path (sun_path holds 108 with its NUL)


def socket_path(invitation_id: int) -> Path:
    return Path(settings.WORKSPACES_DIR) / f"inv-{invitation_id}" / "gate" / SOCKET_NAME


def status_socket_path() -> Path:
    return Path(settings.WORKSPACES_DIR) / STATUS_SOCKET_NAME


def listening_socket(path: Path, mode: int) -> socket.socket:
    """A Unix socket listening at ``path`` with ``mode``; ``path`` appears only once both hold.

    why: a client that connects between bind and listen is refused, and one of another uid between listen and
    chmod is denied; the socket is made under a name no longer than its own and renamed into place, so at no
    moment is it at ``path`` and not ready. A socket left there by an earlier run is replaced.
    """
    staging = path.with_suffix(".new")
    with contextlib.suppress(FileNotFoundError):
        staging.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(staging))
        sock.listen(100)
        os.chmod(staging, mode)
        os.replace(staging, path)
    except BaseException:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            staging.unlink()
        raise
    return sock


@dataclass(frozen=True)
class GateRequest:
    command: str
    anyway: bool = False  # submit: store the workspace even though artifacts are missing
    new: bool = False  # ask: start a new conversation
    prompt: str | None = None  # ask: the prompt; None: artifacts/prompt.txt


def parse_request(line: bytes) -> tuple[GateRequest | None, str | None]:
    """(request, None) for a good request line, (None, why) for a bad one."""
    try:
        request = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, 'The request is not one line of JSON: send {"command": "status"}.'
    command = request.get("command") if isinstance(request, dict) else None
    if command not in COMMANDS:
        return None, f"Unknown command: use one of {', '.join(COMMANDS)}."
    anyway = request.get("anyway", False)
    if not isinstance(anyway, bool) or (anyway and command != "submit"):
        return None, 'Only submit takes "anyway", and it is true or false.'
    new, prompt = request.get("new", False), request.get("prompt")
    if not isinstance(new, bool) or (new and command != "ask"):
        return None, 'Only ask takes "new", and it is true or false.'
    if prompt is not None and (command != "ask" or not isinstance(prompt, str) or not prompt.strip()):
        return None, 'Only ask takes "prompt", and it is some text.'
    return GateRequest(command, anyway, new, prompt), None


def answer(invitation_id: int, command: str, anyway: bool = False) -> dict:
    """Do ``command`` for the invitation behind the socket; the outcome in words. Runs in a thread."""
    close_old_connections()
    try:
        invitation = (Invitation.objects.select_related("packet_version__packet")
                      .filter(pk=invitation_id, revoked_at__isnull=True).first())
        if invitation is None:
            return {"ok": False, "message": "This session's link is no longer valid."}
        if command == "status":
            return {"ok": True, "message": actions.hosted_status_words(invitation)}
        if command == "submit":
            result = actions.do_submit_workspace(invitation, anyway=anyway)
            return {"ok": True, "message": actions.submitted_words(result)}
        receipt = actions.do_capture(invitation, command)
        return {"ok": receipt.accepted, "step": receipt.step, "receipt": receipt.pk,
                "message": actions.capture_words(receipt, invitation.packet_version.test_command)}
    except actions.WorkspaceIncomplete as exc:
        return {"ok": False, "incomplete": True, "missing": [m.path for m in exc.missing], "message": exc.message}
    except actions.SessionRefused as exc:
        return {"ok": False, "message": exc.message}
    except Exception:
        log.exception("gate %s for invitation %s failed", command, invitation_id)
        return {"ok": False, "message": "The server failed to do this (our fault, it is logged). Try again in a "
                                        "minute, or use the buttons beside the terminal."}
    finally:
        close_old_connections()


def _close_terminals(invitation_id: int, reason: str) -> None:
    """Close the invitation's terminals with 4410 when the terminal part (sessions_app.hosted.consumers) offers it."""
    try:
        from .consumers import close_terminals
    except ImportError:
        return
    try:
        close_terminals(invitation_id, 4410, reason)
    except Exception:
        log.exception("could not close the terminals of invitation %s", invitation_id)


def sweep(now=None) -> list[str]:
    """Reopen frozen workspaces given more time, stop idle shells and freeze workspaces whose time is up, then
    submit the frozen ones at their deadline; one line per workspace touched."""
    now = now or timezone.now()
    idle_before = now - timedelta(minutes=settings.WORKSPACE_IDLE_MINUTES)
    done = reopen_extended(now)
    rows = Workspace.objects.filter(closed=False, host=settings.WORKSPACE_HOST)
    for row in rows.select_related("invitation__packet_version__packet"):
        invitation = row.invitation
        over = invitation.phase_at(now) == Invitation.CLOSED
        try:
            if over or invitation.revoked_at is not None:
                saved = workspaces.freeze(invitation, row, now)
                reason = "Time is up: the workspace is read-only now." if over else "This link is no longer valid."
                _close_terminals(invitation.pk, reason)
                done.append(f"froze the workspace of invitation {invitation.pk}"
                            + ("" if saved else " (its files could not be saved: see the error above)"))
            elif row.shell_stopped_at is None and row.last_seen_at < idle_before:
                workspaces.stop_idle_shell(invitation, row, now)
                done.append(f"stopped the idle shell of invitation {invitation.pk}")
            elif row.last_seen_at < idle_before and os.path.ismount(workspaces.folder_for(invitation) / "home"):
                # a capture or submit mounted the files of a stopped shell again (workspaces.open_files)
                workspaces.save_files(invitation, row)
                done.append(f"saved the files of invitation {invitation.pk} again")
        except Exception:
            # why go on: one workspace that cannot be stopped must not keep the others running
            log.exception("the sweep could not handle the workspace of invitation %s", invitation.pk)
    done += submit_at_deadline(now)
    publish_recordings()
    return done


_published_closed = False  # whether this process copied the recordings of closed workspaces yet


def publish_recordings() -> int:
    """Copy the recordings of this host's workspaces that grew since their last copy into the shared storage,
    where the review page reads them on any host (workspaces.publish_recording); how many were copied.

    Those of open workspaces at every sweep; those of closed ones too at the first sweep of a process, for
    what a host stopped or upgraded meanwhile did not copy (a closed workspace's recording no longer grows).
    """
    global _published_closed
    invitations = Invitation.objects.filter(workspace__host=settings.WORKSPACE_HOST)
    if _published_closed:
        invitations = invitations.filter(workspace__closed=False)
    copied = sum(workspaces.publish_recording(invitation) for invitation in invitations.only("pk"))
    _published_closed = True
    return copied


def reopen_extended(now) -> list[str]:
    """Reopen the frozen workspaces of this host whose deadline a recruiter extended since (workspaces.reopen).

    why here too, not only when the candidate opens it: the recruiter's extension may be made on
    another server, which can change only the invitation; the frozen mark is on this host's disk.
    """
    done = []
    rows = Workspace.objects.filter(
        host=settings.WORKSPACE_HOST, frozen_at__isnull=False, invitation__revoked_at__isnull=True,
        # uploads open again: the deadline plus grace is still to come
        invitation__deadline__gte=now - timedelta(seconds=settings.UPLOAD_GRACE_S))
    for row in rows.select_related("invitation__packet_version__packet"):
        invitation = row.invitation
        try:
            reopened = workspaces.reopen(invitation, row, now, wait=False)
        except workspaces.WorkspaceBusy:
            continue  # a capture or submit of it runs: the next sweep, or the candidate's next visit
        except Exception:
            log.exception("the sweep could not reopen the workspace of invitation %s", invitation.pk)
            continue
        if reopened.frozen_at is None:
            done.append(f"reopened the workspace of invitation {invitation.pk}: its deadline was extended")
    return done


def submit_at_deadline(now) -> list[str]:
    """Submit the frozen workspaces of this host whose uploads closed and whose files changed since their last
    submission; settle each one once. One line per workspace submitted or refused."""
    done = []
    rows = Workspace.objects.filter(host=settings.WORKSPACE_HOST, frozen_at__isnull=False,
                                    deadline_settled_at__isnull=True, invitation__revoked_at__isnull=True)
    for row in rows.select_related("invitation__packet_version__packet"):
        invitation = row.invitation
        if invitation.phase_at(now) != Invitation.CLOSED:
            continue  # frozen, then given more time: reopen_extended reopens it
        try:
            result = actions.do_submit_at_deadline(invitation, now)
        except actions.SessionRefused as exc:
            if exc.code not in ("too_big", "too_large"):
                # busy (a submit of it runs) or unavailable (unreadable just now): the next sweep tries again
                log.warning("the deadline's submit of invitation %s waits: %s", invitation.pk, exc.message)
                continue
            # kept as a refused upload (actions.AT_DEADLINE_REFUSED) for the recruiter and the reviewers
            done.append(f"could not submit the workspace of invitation {invitation.pk} at the deadline "
                        f"({exc.code}): kept as a refused upload")
            result = None
        except Exception:
            log.exception("the deadline's submit of invitation %s failed; trying again at the next sweep",
                          invitation.pk)
            continue
        workspaces.settle_deadline(invitation, row, now)
        if result is not None:
            done.append(f"submitted the workspace of invitation {invitation.pk} at the deadline "
                        f"(submission {result.submission.pk})")
    return done


class GateHost:
    """Listens on the gate socket of every open workspace; sweeps now and then."""

    def __init__(self, sweep_every_s: float = 30.0, discover_every_s: float = 2.0, executor=None):
        self.sweep_every_s, self.discover_every_s = sweep_every_s, discover_every_s
        # where the commands, the sweep and the look-ups run: the loop's default pool, unless the host shares
        # its loop with the workspaces' pages (host_server.py), whose views must not wait behind a capture
        self.executor = executor
        self.servers: dict[int, asyncio.AbstractServer] = {}
        self.busy: set[int] = set()  # invitations with a command running: one at a time each

    async def in_thread(self, func, *args):
        """``func(*args)`` in a thread of the host's pool (asyncio.to_thread's, without an executor of its own)."""
        if self.executor is None:
            return await asyncio.to_thread(func, *args)
        return await asyncio.get_running_loop().run_in_executor(self.executor, func, *args)

    async def listen(self, invitation_id: int) -> Path:
        path = socket_path(invitation_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o755)  # why: the sandbox uid may enter it, never write in it

        async def handle(reader, writer):
            await self.handle(invitation_id, reader, writer)

        # why 0o666: the sandbox's uid connects; the folder above keeps it from replacing it
        sock = listening_socket(path, 0o666)
        self.servers[invitation_id] = await asyncio.start_unix_server(handle, sock=sock, limit=MAX_LINE)
        return path

    async def forget(self, invitation_id: int) -> None:
        server = self.servers.pop(invitation_id, None)
        if server is not None:
            server.close()
            await server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            socket_path(invitation_id).unlink()

    async def handle(self, invitation_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                line = await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)
            except (ValueError, asyncio.LimitOverrunError):
                reply = {"ok": False, "error": f"The request is longer than {MAX_LINE} bytes: send one short line."}
            except TimeoutError:
                reply = {"ok": False, "error": "No request arrived: send one line of JSON."}
            else:
                request, error = parse_request(line)
                if error:
                    reply = {"ok": False, "error": error}
                elif invitation_id in self.busy:
                    # why: a shell looping over `gate status` must not take every thread from other workspaces
                    reply = {"ok": False, "error": "Another gate command of this workspace is still running: "
                                                   "wait for it to finish, then try again."}
                else:
                    self.busy.add(invitation_id)
                    try:
                        if request.command == "ask":
                            reply = await self.ask(invitation_id, request, writer)
                        else:
                            reply = await self.in_thread(answer, invitation_id, request.command, request.anyway)
                    finally:
                        self.busy.discard(invitation_id)
            writer.write(json.dumps(reply).encode("utf-8") + b"\n")
            await writer.drain()
        except (ConnectionError, OSError):
            pass  # the client went away; nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def ask(self, invitation_id: int, request: GateRequest, writer: asyncio.StreamWriter) -> dict:
        """`gate ask`: the reply's text to the terminal as it comes, each piece one line; the outcome last."""
        from sessions_app.model_window.terminal import ask

        async def say(text: str) -> None:
            writer.write(json.dumps({"chunk": text}).encode("utf-8") + b"\n")
            await writer.drain()

        try:
            return await ask(invitation_id, request.prompt, request.new, say)
        except (ConnectionError, OSError):
            raise
        except Exception:
            log.exception("gate ask for invitation %s failed", invitation_id)
            return {"ok": False, "message": "The server failed to ask the model (our fault, it is logged). Try "
                                            "again in a minute, or use the chat beside the terminal."}

    async def discover(self) -> None:
        """Listen for workspaces opened since, stop listening for those closed."""
        open_ids = set(await self.in_thread(_open_ids))
        for invitation_id in sorted(open_ids - set(self.servers)):
            try:
                await self.listen(invitation_id)
            except OSError as exc:
                log.error("cannot listen for the gate of invitation %s: %s", invitation_id, exc)
        for invitation_id in set(self.servers) - open_ids:
            await self.forget(invitation_id)

    async def serve_status(self) -> asyncio.AbstractServer | None:
        """Answer each connection to the status socket with one line saying this host serves, then close it.
        None when the socket cannot be made: the gate is served all the same, and readiness says why it fails."""
        path = status_socket_path()
        path.parent.mkdir(parents=True, exist_ok=True)

        async def answer_status(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            status = {"ok": True, "host": settings.WORKSPACE_HOST, "workspaces": len(self.servers)}
            try:
                writer.write(json.dumps(status).encode("utf-8") + b"\n")
                await writer.drain()
            except (ConnectionError, OSError):
                pass  # the probe went away
            finally:
                writer.close()
                with contextlib.suppress(ConnectionError, OSError):
                    await writer.wait_closed()

        try:
            # why anyone may connect: it says only that this host serves, and a web server of another user
            # sharing this folder (docker-compose.yml's) asks it for its own readiness
            server = await asyncio.start_unix_server(answer_status, sock=listening_socket(path, 0o666))
        except OSError as exc:
            log.error("cannot answer readiness probes on %s: %s", path, exc)
            return None
        return server

    async def run(self, stop: asyncio.Event | None = None) -> None:
        stop = stop or asyncio.Event()
        next_sweep = 0.0
        loop = asyncio.get_running_loop()
        status = await self.serve_status()
        try:
            while not stop.is_set():
                # why catch all: a failing sweep or database is logged and tried again; the
                # sockets of the workspaces already served keep answering meanwhile.
                if loop.time() >= next_sweep:
                    next_sweep = loop.time() + self.sweep_every_s
                    try:
                        for line in await self.in_thread(_sweep_in_thread):
                            log.info("%s", line)
                    except Exception:
                        log.exception("the sweep of hosted workspaces failed; trying again in %g s",
                                      self.sweep_every_s)
                try:
                    await self.discover()
                except Exception:
                    log.exception("could not list the open workspaces; trying again")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.discover_every_s)
        finally:
            if status is not None:
                status.close()
                await status.wait_closed()
                with contextlib.suppress(FileNotFoundError):
                    status_socket_path().unlink()
            for invitation_id in list(self.servers):
                await self.forget(invitation_id)


def _open_ids() -> list[int]:
    close_old_connections()
    try:
        return list(Workspace.objects.filter(closed=False, host=settings.WORKSPACE_HOST)
                    .values_list("invitation_id", flat=True))
    finally:
        close_old_connections()


def _sweep_in_thread() -> list[str]:
    close_old_connections()
    try:
        return sweep()
    finally:
        close_old_connections()


def ask_status(timeout: float) -> dict:
    """What this host's serve_workspaces says on its status socket. OSError when nothing listens there,
    TimeoutError when it does not answer within ``timeout`` (for the connect and for each read),
    ValueError when the answer is not its status."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(str(status_socket_path()))
        reply = b""
        while not reply.endswith(b"\n") and len(reply) <= MAX_LINE:
            chunk = conn.recv(MAX_LINE)
            if not chunk:
                break
            reply += chunk
    status = json.loads(reply)
    if not isinstance(status, dict) or status.get("ok") is not True:
        raise ValueError("not a status line")
    return status


def readiness(database_up: bool) -> Check:
    """Readiness (shared/health.py): this host's serve_workspaces answers, where workspaces are hosted.

    Hosted here means TAKEHOME_HEALTH_WORKSPACES=yes, or (auto) that some packet version offers a hosted
    workspace: any invitation to it may open one on this host, and its `gate` commands and the deadline's
    sweep need serve_workspaces. A server that holds no workspaces (TAKEHOME_HOLDS_WORKSPACES=false) asks only
    when told yes: it then asks the workspace host whose folder it shares (docker-compose.yml's web).
    """
    name, mode = "workspaces", settings.HEALTH_WORKSPACES
    if mode == "no":
        return Check(name, OFF, "not asked on this host (TAKEHOME_HEALTH_WORKSPACES)")
    if mode == "auto" and not settings.HOLDS_WORKSPACES:
        return Check(name, OFF, "this server holds no workspaces (TAKEHOME_HOLDS_WORKSPACES): a workspace host "
                                "answers for its own")
    if mode == "auto":
        if not database_up:
            return Check(name, UNKNOWN, "not asked: the database, which says whether a packet offers a hosted "
                                        "workspace, does not answer")
        hosted = (PacketVersion.WorkMode.HOSTED, PacketVersion.WorkMode.BOTH)
        if not PacketVersion.objects.filter(work_mode__in=hosted).exists():
            return Check(name, OFF, "no packet offers a hosted workspace")
    if len(os.fsencode(status_socket_path())) > UNIX_PATH_MAX:
        return Check(name, FAIL, f"serve_workspaces cannot have its status socket: its path would be over "
                                 f"{UNIX_PATH_MAX} bytes; choose a shorter TAKEHOME_WORKSPACES_DIR")
    timeout = settings.HEALTH_TIMEOUT_S
    try:
        status = ask_status(timeout)
    except TimeoutError:
        return Check(name, FAIL, f"serve_workspaces did not answer within {timeout:g} s")
    except PermissionError:
        return Check(name, FAIL, "serve_workspaces' socket refuses this process: run both as the same user")
    except OSError:
        # why not the error's text: it names the socket's path
        return Check(name, FAIL, "serve_workspaces is not running on this host: nothing answers on its socket")
    except ValueError:
        return Check(name, FAIL, "what answers on serve_workspaces' socket is not serve_workspaces")
    served = status.get("workspaces")
    return Check(name, OK, f"serve_workspaces answers on {status.get('host', 'this host')}, serving "
                           f"{counted(served if isinstance(served, int) else 0, 'open workspace')}")
