"""Fixtures for the candidate's side: an invitation to the sample packet, started or not."""

from __future__ import annotations

import shutil

import pytest
from django.core.cache import cache
from django.urls import reverse

from conftest import require


@pytest.fixture(autouse=True)
def _fresh_lookup_counts():
    # why: the per-address limit counts in the cache, which outlives a test.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def started(invitation):
    from sessions_app.actions import do_start_session

    do_start_session(invitation)
    return invitation


def url(name: str, invitation, **kwargs) -> str:
    return reverse(f"sessions_app:{name}", kwargs={"token": invitation.raw_token, **kwargs})


@pytest.fixture
def ready(media_root, settings):
    """What grading by a real worker needs besides Redis: bubblewrap and the runner virtualenv."""
    from .helpers import runner_python

    require(shutil.which("bwrap") is not None, "bubblewrap is not installed (apt-get install bubblewrap)")
    require(runner_python().exists(), f"{runner_python()} is missing: run `make runner`")
