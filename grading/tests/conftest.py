"""Fixtures for the grading core: the real sandbox over the real runner virtualenv."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import require, run_folder
from grading.engine.runner import ensure_runner
from grading.engine.sandbox import Sandbox, SandboxLimits, wait_for_warm
from grading.engine.spec import sample_spec


@pytest.fixture(scope="session")
def runner_dir() -> Path:
    """The runner virtualenv the worker uses (settings), built if missing (`make runner` builds it)."""
    from django.conf import settings

    for tool, package in (("bwrap", "bubblewrap"), ("setpriv", "util-linux"), ("prlimit", "util-linux")):
        require(shutil.which(tool) is not None, f"{tool} is missing (apt-get install {package})")
    return ensure_runner(Path(settings.GRADING_RUNNER_DIR))


@pytest.fixture(scope="session")
def scratch_dir() -> Path:
    from django.conf import settings

    return Path(settings.GRADING_SCRATCH_DIR) / "tests"


@pytest.fixture(scope="session")
def original_runs(tmp_path_factory) -> Path:
    """Where the gradings of a test run keep each packet's original run (GradeOptions.cache_dir), as a worker
    keeps them under its var/: the original tree's run is the same for every submission of a packet, and the
    tests that are about that cache make their own."""
    # why the run's folder under pytest-xdist: its processes share the runs, as a server's workers do
    return run_folder(tmp_path_factory) / "original-runs"


@pytest.fixture(scope="session")
def grading_sandbox(runner_dir, scratch_dir) -> Sandbox:
    """The sandbox as the worker builds it, with a shorter wall clock."""
    from django.conf import settings

    sandbox = Sandbox(
        runner_dir=runner_dir,
        scratch_dir=scratch_dir,
        uid_base=settings.GRADING_UID_BASE,
        slots=settings.GRADING_SANDBOX_SLOTS,
        limits=SandboxLimits(wall_s=30),
        # why from the settings: the suites run as the worker runs, warm sandboxes on
        # unless TAKEHOME_WARM_SANDBOXES=0 (run them both ways).
        warm=settings.GRADING_WARM_SANDBOXES,
    )
    wait_for_warm(sandbox)  # why: the first grading too goes through them, as in a worker that has been up
    return sandbox


@pytest.fixture(scope="session")
def business_days_sandbox(grading_sandbox) -> Sandbox:
    """The tests' sandbox over the business-days packet's own environment (python-dateutil), built as
    the server builds it (shared.environments: under TAKEHOME_RUNNERS_DIR, from the package index)."""
    from shared.environments import sandbox_for

    return sandbox_for(grading_sandbox, sample_spec("business-days"))


@pytest.fixture
def use_test_sandbox(settings, runner_dir, scratch_dir):
    """The worker's settings pointed at the tests' sandbox folders, with a shorter wall clock."""
    settings.GRADING_RUNNER_DIR = runner_dir
    settings.GRADING_SCRATCH_DIR = scratch_dir
    settings.GRADING_RUN_WALL_S = 30


@pytest.fixture
def submission(sample_packet):
    """A graded submission of the sample packet, with ideal evidence."""
    from grading.tests.reviewing import make_submission

    return make_submission(sample_packet)


@pytest.fixture
def rob(client, reviewer):
    """The test client, logged in as the reviewer rob."""
    client.force_login(reviewer)
    return client


@pytest.fixture
def ann(make_reviewer):
    return make_reviewer("ann")


@pytest.fixture
def cy(make_reviewer):
    return make_reviewer("cy")
