"""The suite's own harness: every tests folder collected, one database connection per thread, Celery's
messages sent again to the run's broker after a test that had its own."""

import asyncio
import configparser
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_every_tests_folder_is_collected():
    """A folder of tests outside pytest.ini's testpaths is never run by make test (the API's tests were not)."""
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    collected = ini["pytest"]["testpaths"].split()
    folders = {top.name for top in ROOT.iterdir()
               if top.is_dir() and not top.name.startswith(".") and top.name not in {"var", "site", "static"}
               and next(top.rglob("test_*.py"), None)}
    assert folders <= set(collected), f"add {sorted(folders - set(collected))} to testpaths in pytest.ini"
    assert all((ROOT / name).is_dir() for name in collected), "testpaths names a folder that is not there"


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


def test_messages_go_to_the_runs_broker_again_after_a_test_pointed_them_elsewhere(broker_url):
    """kombu keeps its connection pools per broker for the whole process; a test with a broker of its own
    (stoppable_broker) closes the run's pool on the way in, and the next test to send a task in this process
    must get a new one, not the closed one ("Acquire on closed pool")."""
    from conftest import point_celery_at, require
    from takehome.celery import app

    require(broker_url is not None, "redis-server is not installed (apt-get install redis-server)")
    before = os.environ.get("CELERY_BROKER_URL")
    with app.producer_or_acquire() as producer:
        producer.connection.ensure_connection(max_retries=1)
    try:
        point_celery_at("redis://127.0.0.1:9/0", "redis://127.0.0.1:9/0")
    finally:
        point_celery_at(broker_url, before)
    with app.producer_or_acquire() as producer:
        producer.connection.ensure_connection(max_retries=1)
