"""The packets page: the list, and the worker line (alive or not, and its sandbox's caps)."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from shared.models import WorkerHeartbeat
from shared.tasks import record_heartbeat

pytestmark = pytest.mark.django_db


def worker_line(client) -> str:
    html = client.get(reverse("takehome:packet-list")).content.decode()
    start = html.index('<p class="worker-status')
    return html[start:html.index("</p>", start)]


def test_the_worker_line_says_which_sandbox_caps_are_in_force(recruiter_client):
    WorkerHeartbeat.objects.create(
        hostname="w1", seen_at=timezone.now() - timedelta(seconds=10),
        caps="cgroup v1: 1024 MiB memory and 64 processes per run; tmpfs capped at 16384 inodes by per-run mounts",
    )
    line = worker_line(recruiter_client)
    assert "Grading worker running" in line
    assert "Sandbox caps: cgroup v1: 1024 MiB memory and 64 processes per run" in line
    assert "tmpfs capped at 16384 inodes" in line


def test_the_newest_worker_speaks_for_the_caps(recruiter_client):
    now = timezone.now()
    WorkerHeartbeat.objects.create(hostname="old", seen_at=now - timedelta(minutes=10), caps="cgroup v1: old")
    WorkerHeartbeat.objects.create(
        hostname="new", seen_at=now, caps="per-process rlimits only: at most 8 processes x 128 MiB address space"
    )
    line = worker_line(recruiter_client)
    assert "Sandbox caps: per-process rlimits only" in line and "cgroup v1: old" not in line


def test_no_worker_no_caps_line(recruiter_client):
    line = worker_line(recruiter_client)
    assert "No grading worker has reported in yet" in line and "Sandbox caps" not in line


def test_a_heartbeat_stores_the_caps_this_machine_enforces():
    from shared.sandboxes import sandbox_from_settings

    record_heartbeat("here")
    beat = WorkerHeartbeat.objects.get(hostname="here")
    assert beat.caps == sandbox_from_settings().describe_caps()
    assert beat.caps.startswith(("cgroup v1:", "cgroup v2:", "per-process rlimits only:"))
