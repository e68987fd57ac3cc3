"""grading.engine.sandbox.shell.CapWatch: when a workspace's processes are pinned at their cap (a fork bomb), and
when an honest build that meets the cap is not.

The traces are counts as measured on the real workspace (128 processes, counted every 0.25 s):
(pids.current, forks the cap refused so far).
"""

from __future__ import annotations

import pytest

from grading.engine.sandbox.shell import PINNED_S, CapWatch, ProcessCount

STEP = 0.25


def pinned_at(trace, limit=128, watch=None):
    """The time of each count at which the watch says pinned, from (current, refused) counts STEP apart."""
    watch = watch or CapWatch()
    return [round(i * STEP, 2) for i, count in enumerate(trace)
            if watch.add(count and ProcessCount(count[0], limit, count[1]), i * STEP)]


QUIET = [(6, 0)]
PYTHON_BOMB = QUIET + [(128, 874 * n) for n in range(1, 16)]  # refused at once, without end
# bash's own bomb retries a refused fork after 1, 2, 4 ... s, all together: refusals come in bursts
BASH_BOMB = QUIET + [(128, 94)] * 4 + [(128, 212)] * 8 + [(128, 335)] * 16
MAKE_J = QUIET + [(128, 1)] + [(5, 1)] * 20  # make -j over 300 targets: touched the cap once, failed
MANY_WORKERS = QUIET + [(116, 0)] * 4 + [(5, 0)] * 12  # 110 processes at once, well under the cap


@pytest.mark.parametrize("trace", [PYTHON_BOMB, BASH_BOMB], ids=["python", "bash"])
def test_a_bomb_is_pinned_once_it_has_held_the_cap_for_the_moment(trace):
    first = 1 + round(PINNED_S / STEP)  # PINNED_S after the first count at the cap, and from then on
    assert pinned_at(trace) == [round(i * STEP, 2) for i in range(first, len(trace))]


@pytest.mark.parametrize("trace", [MAKE_J, MANY_WORKERS, QUIET * 20, [None] * 20], ids=["make-j", "workers",
                                                                                        "quiet", "no-count"])
def test_an_honest_build_near_the_cap_is_not_pinned(trace):
    assert pinned_at(trace) == []


def test_at_the_cap_with_nothing_refused_is_not_pinned_until_a_fork_is():
    """A program that holds exactly the cap harms nobody until something wants one more."""
    trace = QUIET + [(128, 0)] * 12 + [(128, 3)] * 4
    assert pinned_at(trace)[0] == 13 * STEP  # the first count after the refusal: it held the cap long enough


def test_refusals_from_before_the_count_went_below_the_cap_do_not_count():
    trace = [(128, 40)] * 2 + [(20, 40)] + [(128, 40)] * 12
    assert pinned_at(trace) == []


def test_a_watch_that_starts_at_a_pinned_cap_counts_the_refusals_it_finds():
    """The page may come back after the bomb filled the cap: what the cap refused since it was made counts."""
    assert pinned_at([(128, 500)] * 12)[0] == PINNED_S


def test_a_dip_below_the_cap_starts_the_moment_again():
    trace = QUIET + [(128, 10)] * 6 + [(100, 10)] + [(128, 20)] * 9
    assert pinned_at(trace)[0] == (8 + PINNED_S / STEP) * STEP


def test_the_bomb_stopped_is_free_again_after_the_same_moment_below_the_cap():
    watch = CapWatch()
    assert pinned_at(PYTHON_BOMB, watch=watch)
    later = len(PYTHON_BOMB) * STEP
    for i, current in enumerate([128, 6, 128, 6, 6, 6, 6, 6, 6, 6, 6, 6]):
        watch.add(ProcessCount(current, 128, 20000 + i), later + i * STEP)
        if i < 3 + PINNED_S / STEP:
            assert watch.pinned, i  # a dip is not the end of a bomb
    assert not watch.pinned


def test_without_a_count_of_refusals_the_cap_held_is_enough():
    """Under rlimits (no cgroup) nothing counts refused forks: the uid's processes at RLIMIT_NPROC for the moment."""
    watch = CapWatch()
    seen = [watch.add(ProcessCount(10, 10, None), i * STEP) for i in range(12)]
    assert seen.index(True) == PINNED_S / STEP


def test_one_below_the_cap_is_at_it():
    """A process of the bomb that just ended and was not yet replaced."""
    assert ProcessCount(127, 128, 0).at_cap and not ProcessCount(126, 128, 0).at_cap
