"""Sending grading messages with short timeouts: never held by a stalled broker, still consumed by a real worker."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import _wait_for
from shared import publish
from shared.models import WorkerHeartbeat
from shared.tasks import record_heartbeat

pytestmark = pytest.mark.worker


def test_a_message_sent_with_short_timeouts_is_consumed_by_a_real_worker(celery_worker_proc):
    assert publish.send(record_heartbeat, ("sent-with-short-timeouts",))
    try:
        _wait_for(lambda: WorkerHeartbeat.objects.filter(hostname="sent-with-short-timeouts").exists(), 60,
                  "the worker to run the task")
    except AssertionError:
        raise AssertionError("worker log:\n" + celery_worker_proc.output()[-4000:])


def timed_send() -> tuple[bool, float]:
    began = time.monotonic()
    return publish.send(record_heartbeat, ("never",)), time.monotonic() - began


@pytest.mark.parametrize("fault", ["paused", "stopped"])
def test_a_broker_that_stalls_or_is_down_gives_up_within_seconds(stoppable_broker, settings, fault):
    settings.BROKER_SEND_TIMEOUT_S = 1.0
    (stoppable_broker.pause if fault == "paused" else stoppable_broker.stop)()
    # why a thread: a send that hangs must fail this test, not hang it.
    with ThreadPoolExecutor(1) as pool:
        sending = pool.submit(timed_send)
        try:
            sent, took = sending.result(timeout=15)
        finally:
            stoppable_broker.resume()
    assert sent is False
    assert took < 5, f"the send waited {took:.1f} s"
