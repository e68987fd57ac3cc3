"""The terminal's tests on the real workspace: tmux in bubblewrap, under uids of their own.

The ``shells`` fixture points the workspace settings at a folder of its own under the
grading scratch folder (every folder above it traversable by the sandbox uid) and at uids
no other test uses (its own pool in the test slot, shared/pytest_slots.py),
records the clients the consumer opens in this process, and at the end stops every shell,
unmounts every workspace, removes its cgroups and its folder.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import require
from shared import pytest_slots

UID_BASE = pytest_slots.uids("hosted_shell")
SLOTS = 10


def _workspaces_under(folder: Path):
    """grading.engine.sandbox.shell.Workspace of every row whose folder is under ``folder``."""
    from sessions_app.hosted.workspaces import folder_for, workspace_for
    from sessions_app.models import Workspace as Row

    for row in Row.objects.select_related("invitation__packet_version"):
        if folder_for(row.invitation).parent == folder:
            yield workspace_for(row.invitation, row)


def stop_all(folder: Path) -> None:
    """Every shell of the test's workspaces ended, its files unmounted, its cgroups and folder gone."""
    from grading.engine.sandbox import shell
    from grading.engine.sandbox.processes import _uid_processes

    for ws in _workspaces_under(folder):
        shell.stop_shell(ws)
        shell.release(ws)
        assert _uid_processes(ws.uid) == [], f"a process of uid {ws.uid} outlived stop_shell"
        assert shell._cgroups(ws, create=False) == [], "a workspace's cgroup was not removed"
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def shells(settings, transactional_db, monkeypatch):
    """The consumer's real open_client; ``clients`` are the ones opened in this process."""
    from grading.engine.runner import ensure_runner
    from grading.engine.sandbox.cgroups import detect
    from grading.engine.sandbox.processes import _uid_processes
    from sessions_app.hosted import consumers

    require(os.geteuid() == 0, "the workspace mounts a tmpfs: run the tests as root")
    for tool, package in (("bwrap", "bubblewrap"), ("tmux", "tmux"), ("setpriv", "util-linux")):
        require(shutil.which(tool) is not None, f"{tool} is missing (apt-get install {package})")
    require(detect("auto", "bwrap").mode in ("cgroup1", "cgroup2"), "no writable cgroup here")
    ensure_runner(Path(settings.GRADING_RUNNER_DIR))
    folder = Path(settings.GRADING_SCRATCH_DIR) / f"terminal-tests-{os.getpid()}-{time.monotonic_ns()}"
    folder.mkdir(parents=True, mode=0o755)
    settings.WORKSPACES_DIR = folder
    settings.WORKSPACE_UID_BASE, settings.WORKSPACE_SLOTS = UID_BASE, SLOTS
    for uid in range(UID_BASE, UID_BASE + SLOTS):  # left over by a test run that was killed
        for pid in _uid_processes(uid):
            os.kill(pid, 9)
    clients = []
    real_open = consumers.open_client

    def open_client(invitation, cols, rows):
        clients.append(real_open(invitation, cols, rows))
        return clients[-1]

    monkeypatch.setattr(consumers, "open_client", open_client)
    yield SimpleNamespace(folder=folder, clients=clients)
    stop_all(folder)


def use_uids(settings, base: int, slots: int) -> None:
    """Move the ``shells`` fixture's workspaces to uids base..base+slots-1 (a test file's own range)."""
    from grading.engine.sandbox.processes import _uid_processes

    settings.WORKSPACE_UID_BASE, settings.WORKSPACE_SLOTS = base, slots
    for uid in range(base, base + slots):  # left over by a test run that was killed
        for pid in _uid_processes(uid):
            os.kill(pid, 9)
