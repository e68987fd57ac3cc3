"""The grading sandbox as the settings describe it, for every room that runs code in it: the workers'
reruns, the hosted session's captures, the packet self-check, the heartbeat's caps."""

from __future__ import annotations

from django.conf import settings

from grading.engine.pythons import PythonUnavailable
from grading.engine.requirements import RequirementsRefused
from grading.engine.runner import RunnerUnavailable
from grading.engine.sandbox import Sandbox, SandboxLimits, SandboxUnavailable
from grading.engine.spec import PacketSpec

from .environments import sandbox_for


def sandbox_from_settings() -> Sandbox:
    return Sandbox(
        runner_dir=settings.GRADING_RUNNER_DIR,
        scratch_dir=settings.GRADING_SCRATCH_DIR,
        uid_base=settings.GRADING_UID_BASE,
        slots=settings.GRADING_SANDBOX_SLOTS,
        limits=SandboxLimits(
            wall_s=settings.GRADING_RUN_WALL_S,
            memory_bytes=settings.GRADING_SANDBOX_MEMORY_MB << 20,
            nproc=settings.GRADING_SANDBOX_PROCESSES,
            tmpfs_inodes=settings.GRADING_SANDBOX_TMPFS_INODES,
            fallback_processes=settings.GRADING_SANDBOX_FALLBACK_PROCESSES,
        ),
        caps=settings.GRADING_SANDBOX_CAPS,
        tmpfs=settings.GRADING_SANDBOX_TMPFS,
        warm=settings.GRADING_WARM_SANDBOXES,
        warm_idle_s=settings.GRADING_WARM_IDLE_S,
    )


def sandbox_for_spec(spec: PacketSpec) -> Sandbox:
    """The sandbox with ``spec``'s runner virtualenv, built first if missing.

    An environment that cannot be built is our failure here, not the
    candidate's (the version's self-check built it once): SandboxUnavailable,
    so the task retries and, in the end, the submission says why.
    """
    try:
        return sandbox_for(sandbox_from_settings(), spec)
    except (RequirementsRefused, PythonUnavailable, RunnerUnavailable) as exc:
        raise SandboxUnavailable(f"the packet's environment could not be built: {exc}") from exc


def sandbox_caps() -> str:
    """Which run-wide caps this process's sandbox enforces, in one sentence (for the heartbeat)."""
    try:
        return sandbox_from_settings().describe_caps()
    except SandboxUnavailable as exc:
        return f"unavailable: {exc}"
