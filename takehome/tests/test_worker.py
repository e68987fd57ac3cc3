"""A real `celery worker` subprocess runs a real task through Redis."""

import pytest

from conftest import _wait_for
from takehome.models import WorkerHeartbeat
from takehome.tasks import record_heartbeat

pytestmark = pytest.mark.worker


def test_a_task_goes_through_redis_to_a_real_worker_and_writes_the_database(celery_worker_proc):
    record_heartbeat.delay("round-trip-check")
    try:
        beat = _wait_for(
            lambda: WorkerHeartbeat.objects.filter(hostname="round-trip-check").first(), 60, "the worker"
        )
    except AssertionError:
        raise AssertionError("worker log:\n" + celery_worker_proc.output()[-4000:])
    assert beat.seen_at is not None


def test_a_worker_reports_in_as_soon_as_it_starts(celery_worker_proc):
    # No task is sent and no beat runs: the heartbeat comes from the worker's start.
    try:
        beat = _wait_for(lambda: WorkerHeartbeat.objects.first(), 60, "the worker's first heartbeat")
    except AssertionError:
        raise AssertionError("worker log:\n" + celery_worker_proc.output()[-4000:])
    # ...and says which caps its sandbox enforces, in its log and on the heartbeat the packets page shows
    assert beat.caps.startswith(("cgroup v1:", "cgroup v2:", "per-process rlimits only:")), beat.caps
    assert f"sandbox caps in force: {beat.caps}" in celery_worker_proc.output()
