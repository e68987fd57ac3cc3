"""The suite's own harness: one database connection per thread, whether or not an event loop is marked running."""

import asyncio

import pytest


@pytest.mark.django_db
def test_the_test_stays_on_its_connection_when_an_event_loop_is_marked_running_or_not(monkeypatch):
    """Playwright's sync API marks its event loop as running in this thread after each call, and the loop
    stops being marked when its driver goes (playwright/_impl/_greenlets.py); conftest.keep_connections_per_thread
    keeps the test's transaction and everything it writes on one connection either way."""
    from django.contrib.auth.models import Group
    from django.db import connections

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # as the browser fixture sets it
    before = connections["default"]
    Group.objects.create(name="written before")  # the test's transaction now holds the write lock
    previous = asyncio._get_running_loop()
    loop = asyncio.new_event_loop()
    try:
        for marked in (loop, None):
            asyncio._set_running_loop(marked)
            assert connections["default"] is before
            Group.objects.create(name=f"written with {marked!r} running")
    finally:
        asyncio._set_running_loop(previous)
        loop.close()
