"""STAND-IN, tests only: a plain /bin/bash on a pty in place of the sandboxed workspace.

Parts A (grading.workspace.spawn_client) and C1 (sessions_app.workspaces.ensure_open,
cast_path) land in parallel with the terminal. Until the lead merges them, the terminal's
tests swap ``sessions_app.consumers.open_client`` and ``recording_path`` for these. At
merge, the ``standin`` fixture in sessions_app/tests/conftest.py goes, and the tests run
against the real sandbox.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import termios
from types import SimpleNamespace

import pytest


class BashClient:
    """Client's interface (fd, proc, resize, close) over bash on a fresh pty. Not sandboxed."""

    def __init__(self, folder, cols: int, rows: int):
        self.fd, secondary = pty.openpty()
        self.resize(cols, rows)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "TERM": "xterm-256color", "PS1": "$ "}
        self.proc = subprocess.Popen(["/bin/bash", "--norc", "--noprofile", "-i"], stdin=secondary, stdout=secondary,
                                     stderr=secondary, cwd=folder, env=env, start_new_session=True)
        os.close(secondary)
        os.set_blocking(self.fd, False)

    def resize(self, cols: int, rows: int) -> None:
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        os.close(self.fd)


@pytest.fixture
def standin(monkeypatch, tmp_path):
    """The terminal's consumer on the stand-in: bash in tmp_path, the recording at tmp_path/session.cast."""
    from sessions_app import consumers

    clients = []

    def open_client(invitation, cols, rows):
        clients.append(BashClient(tmp_path, cols, rows))
        return clients[-1]

    monkeypatch.setattr(consumers, "open_client", open_client)
    monkeypatch.setattr(consumers, "recording_path", lambda invitation: tmp_path / "session.cast")
    yield SimpleNamespace(cast=tmp_path / "session.cast", clients=clients)
    for client in clients:
        if client.proc.poll() is None:
            client.close()
