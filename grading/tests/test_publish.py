"""Sending grading messages with short timeouts: never held by a stalled broker, still consumed by a real worker."""

import pytest

from conftest import _wait_for, within_hang_guard
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


@pytest.mark.parametrize("fault", ["paused", "stopped"])
def test_a_broker_that_stalls_or_is_down_gives_up_within_its_timeout(stoppable_broker, settings, fault):
    settings.BROKER_SEND_TIMEOUT_S = 1.0
    (stoppable_broker.pause if fault == "paused" else stoppable_broker.stop)()
    # A send that hangs must fail this test, not hang it. The send gives up with the broker
    # still paused or down, so its end came from its own timeouts, not from the broker answering at last.
    # The guard is not a measurement: on a loaded machine the second the send waits can take longer.
    try:
        sent = within_hang_guard(publish.send, record_heartbeat, ("never",))
    finally:
        stoppable_broker.resume()
    assert sent is False
    assert publish._short_timeouts() == {
        "transport_options": {"socket_timeout": 1.0, "socket_connect_timeout": 1.0, "max_retries": 0},
        "connect_timeout": 1.0}
