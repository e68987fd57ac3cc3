"""Hands each pytest-xdist worker an equal share of the suite's time, longest first.

pytest-xdist's `worksteal` scheduler gives each worker an equal *number* of
tests, in contiguous runs of the collection, and a worker that runs dry takes
the back half of the longest queue. Left in file order, one worker could get
most of the slow files (make run, the README, the benchmarks) and finish
minutes after the others. So, on every worker alike, the collection is
reordered before it is sent:

- the unit is a test file: its tests stay together and in their order (a
  file's own fixtures, and the session's ones it shares, are set up once);
- each worker keeps pytest-django's order, as Django's runner has it: the
  tests in a transaction first, then those that commit (they empty every
  table after them, the rows the migrations wrote included), then those with
  no database; so the short tests with no database are at the back, where a
  dry worker steals from;
- each file's time is what it took on the last run (kept in pytest's cache
  under var/, merged run after run), else a guess from its markers;
- the files are dealt longest first to the worker share with the least time
  so far (the worker shares being the runs of the sizes worksteal will cut),
  and each share runs its longest files first, so what a dry worker steals
  from the back is short.

Every worker reads the same cached times before any is written (the
controller writes them once the run ends), so they all order the collection
the same way, as xdist requires. The order changes where a test runs, never
whether it runs.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

CACHE_KEY = "takehome/durations"
GUESS_S = {"slow": 8.0, "other": 0.05}  # a test with no time on record


class Balance:
    def __init__(self, config: pytest.Config):
        self.config = config
        self.seen: dict[str, float] = defaultdict(float)

    def known(self) -> dict[str, float]:
        cache = getattr(self.config, "cache", None)
        return dict(cache.get(CACHE_KEY, {})) if cache is not None else {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        workers = getattr(config, "workerinput", {}).get("workercount", 0)
        if workers < 2 or len(items) < workers:
            return
        items[:] = balanced(items, workers, self.known())

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not hasattr(self.config, "workerinput"):  # the controller, or a run without xdist
            self.seen[report.nodeid] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(self.config, "cache", None)
        if cache is None or hasattr(self.config, "workerinput") or not self.seen:
            return
        cache.set(CACHE_KEY, {**self.known(), **{nodeid: round(s, 3) for nodeid, s in self.seen.items()}})


def shares(count: int, workers: int) -> list[int]:
    """How many tests worksteal first sends each idle worker: the rest split evenly, one worker at a time."""
    sizes = []
    for i in range(workers):
        sizes.append(count // (workers - i))
        count -= sizes[-1]
    return sizes


def balanced(items: list[pytest.Item], workers: int, known: dict[str, float]) -> list[pytest.Item]:
    files: dict[tuple[int, str], list[pytest.Item]] = defaultdict(list)
    for item in items:
        files[(database_order(item), item.nodeid.split("::", 1)[0])].append(item)

    def time_of(item: pytest.Item) -> float:
        if item.nodeid in known:
            return known[item.nodeid]
        return GUESS_S["slow" if item.get_closest_marker("slow") else "other"]

    cost = {name: sum(time_of(item) for item in tests) for name, tests in files.items()}
    sizes = shares(len(items), workers)
    loads, lists = [0.0] * workers, [[] for _ in range(workers)]
    room = list(sizes)
    # Longest first, each to the share with the least time that still has room; a tie goes by name,
    # so every worker deals the same way. A file larger than every share's room is split.
    for name in sorted(files, key=lambda n: (-cost[n], n[1], n[0])):
        tests = files[name]
        while tests:
            fits = [i for i in range(workers) if room[i] > 0]
            share = min(fits, key=lambda i: (loads[i], i))
            taken, tests = tests[: room[share]], tests[room[share] :]
            lists[share].append(taken)
            room[share] -= len(taken)
            loads[share] += sum(time_of(item) for item in taken)
    ordered = []
    for share in lists:
        for tests in sorted(share, key=lambda t: (database_order(t[0]), -sum(time_of(item) for item in t))):
            ordered.extend(tests)
    return ordered


def database_order(item: pytest.Item) -> int:
    """pytest-django's order (its get_order_number): 0 in a transaction, 1 committing, 2 no database."""
    from django.test import TestCase, TransactionTestCase

    cls = getattr(item, "cls", None)
    if cls is not None and issubclass(cls, TransactionTestCase):
        return 0 if issubclass(cls, TestCase) else 1
    fixtures = set(getattr(item, "fixturenames", ()))
    marker = item.get_closest_marker("django_db")
    committing = bool(marker and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")))
    if committing or fixtures & {"transactional_db", "live_server"}:
        return 1
    return 0 if marker or "db" in fixtures else 2
