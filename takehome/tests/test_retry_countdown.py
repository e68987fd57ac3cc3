"""Our tasks wait before trying again as Celery's own backoff does: doubling, capped, and jittered so that
tasks that failed together (a sandbox or a database down for all of them) do not return together."""

from shared.tasks import RETRY_FIRST_S, RETRY_LONGEST_S, retry_countdown


def test_the_wait_doubles_up_to_the_longest_and_is_spread():
    for retries in range(12):
        ceiling = min(RETRY_LONGEST_S, RETRY_FIRST_S * 2**retries)
        waits = {retry_countdown(retries) for _ in range(200)}
        assert all(0 <= wait <= ceiling for wait in waits), (retries, sorted(waits))
        assert len(waits) > 1  # spread, not one instant for every task
    assert max(retry_countdown(20) for _ in range(200)) > RETRY_LONGEST_S / 2  # the cap, not a shrinking wait
