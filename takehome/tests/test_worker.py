"""A real `celery worker` subprocess runs a real task through Redis."""

import pytest

from conftest import _wait_for
from shared.models import WorkerHeartbeat
from shared.tasks import record_heartbeat

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


def test_a_real_worker_checks_a_new_packet_and_publishes_it_or_keeps_it_a_draft(celery_worker_proc, client,
                                                                               recruiter):
    from takehome.actions import do_create_packet
    from takehome.models import PacketVersion
    from takehome.tests.test_self_check import content

    # Created as the recruiter's form creates it: the check is sent to the broker once the transaction commits.
    sound = do_create_packet("sound", "Sound", content()).latest_version()
    wrong = do_create_packet("wrong", "Wrong", content(solution={"calc.py": b"def add(a, b):\n    return 0\n"}))
    wrong = wrong.latest_version()
    client.force_login(recruiter)
    fragment = client.get(sound.packet.get_absolute_url() + "?part=check", headers={"HX-Request": "true"})
    assert "every 2s" in fragment.content.decode() or "Published" in fragment.content.decode()

    def settled(version):
        state = PacketVersion.objects.get(pk=version.pk).state
        return state if state != PacketVersion.CHECKING else None

    try:
        assert _wait_for(lambda: settled(sound), 90, "the sound packet's check") == PacketVersion.PUBLISHED
        assert _wait_for(lambda: settled(wrong), 90, "the wrong packet's check") == PacketVersion.DRAFT
    except AssertionError:
        raise AssertionError("worker log:\n" + celery_worker_proc.output()[-4000:])
    failed = PacketVersion.objects.get(pk=wrong.pk).last_check().failed_checks()
    assert [r["check_id"] for r in failed] == ["hidden_green_on_solution"]
    fragment = client.get(sound.packet.get_absolute_url() + "?part=check", headers={"HX-Request": "true"})
    assert "Published" in fragment.content.decode() and "hx-trigger" not in fragment.content.decode()
