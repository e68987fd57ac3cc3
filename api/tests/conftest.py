"""Fixtures of the API's tests: tokens through the account's action, a webhook receiver on loopback."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from conftest import free_port, require

from .receiver import Receiver


@pytest.fixture(autouse=True)
def _fresh_rate_counts():
    # why: the per-token limit counts in the cache, which outlives a test.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def make_token():
    """A raw token of ``user`` with ``scope``, made by the account page's action."""
    from api.actions import do_create_token

    return lambda user, scope="write", name="ATS": do_create_token(user, name, scope).raw


@pytest.fixture
def receiver():
    server = Receiver(free_port())
    server.thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def private_hooks(settings):
    """Webhooks may go to loopback, where the tests' receiver listens."""
    settings.WEBHOOK_ALLOW_PRIVATE = True


@pytest.fixture
def grader_ready(media_root):
    """A real worker grades here: bubblewrap and the runner virtualenv must be there (sessions_app's ``ready``)."""
    import shutil

    from sessions_app.tests.helpers import runner_python

    require(shutil.which("bwrap") is not None, "bubblewrap is not installed (apt-get install bubblewrap)")
    require(runner_python().exists(), f"{runner_python()} is missing: run `make runner`")
