"""Which virtualenv a packet version's tests run in, from the settings.

The plain-Python parts are grading/engine/runner.py (building), grading/engine/requirements.py
(what a requirements file may say) and grading/engine/pythons.py (which interpreters
this server has); this module reads the settings and picks. A version with no
requirements on the default Python runs in the one shared runner
(``TAKEHOME_RUNNER_DIR``); any other gets its own under ``TAKEHOME_RUNNERS_DIR``,
one per (Python, requirements), shared by every version that asks for the same.
Building ahead and pruning the runners of the versions in use is the
workers' (grading/runners.py).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from django.conf import settings

from grading.engine.pythons import Interpreter, PythonUnavailable, choose, discover
from grading.engine.requirements import check_requirements
from grading.engine.runner import (
    SYSTEM_PYTHON,
    ensure_env,
    env_key,
    env_ready,
    runner_python,
)
from grading.engine.sandbox import Sandbox
from grading.engine.spec import PacketSpec


@functools.cache
def _discovered(paths: tuple[str, ...]) -> tuple[Interpreter, ...]:
    return tuple(discover(paths))


def interpreters() -> tuple[Interpreter, ...]:
    """The interpreters ``TAKEHOME_PYTHONS`` names, each with its version or the problem that keeps it out."""
    return _discovered(tuple(str(p) for p in settings.GRADING_PYTHONS))


def usable_versions() -> list[str]:
    """The Python versions a packet may choose, the default first, each once."""
    seen: list[str] = []
    for interpreter in interpreters():
        if interpreter.problem is None and interpreter.version not in seen:
            seen.append(interpreter.version)
    return seen


def environment_problems(requirements: str, python_version: str) -> list[str]:
    """Why a version's environment cannot be accepted as written, one sentence each; [] when it can.

    Reads only: whether the packages install is found when the environment is
    built (the version's self-check).
    """
    problems = check_requirements(requirements)
    if python_version:
        try:
            choose(interpreters(), python_version)
        except PythonUnavailable as exc:
            problems.append(str(exc))
    return problems


def _uses_shared_runner(spec: PacketSpec) -> bool:
    if spec.requirements.strip():
        return False
    if not spec.python:
        return True
    default = choose(interpreters(), "")
    return spec.python == default.version and Path(default.path).resolve() == SYSTEM_PYTHON.resolve()


def runner_for(spec: PacketSpec) -> Path:
    """The runner virtualenv of ``spec``: the shared runner, or its own, built first if missing.

    Raises RequirementsRefused when its packages cannot be installed,
    PythonUnavailable when its Python is not on this server, RunnerUnavailable
    for a fault of this machine.
    """
    if _uses_shared_runner(spec):
        # why not built here: make and the worker's start build it; a missing one is the
        # sandbox's to report (SandboxUnavailable, with the command that builds it).
        return Path(settings.GRADING_RUNNER_DIR)
    return ensure_env(settings.GRADING_RUNNERS_DIR, choose(interpreters(), spec.python), spec.requirements,
                      index_url=settings.GRADING_PIP_INDEX_URL or None)


def ready_runner(spec: PacketSpec) -> Path | None:
    """The runner of ``spec`` if it is built and complete, without building anything."""
    if _uses_shared_runner(spec):
        path = Path(settings.GRADING_RUNNER_DIR)
        return path if runner_python(path).exists() else None
    try:
        version = choose(interpreters(), spec.python).version
    except PythonUnavailable:
        return None
    return env_ready(settings.GRADING_RUNNERS_DIR, version, spec.requirements)


def runner_key(spec: PacketSpec) -> str | None:
    """The name of ``spec``'s own virtualenv under TAKEHOME_RUNNERS_DIR; None for the shared runner."""
    if _uses_shared_runner(spec):
        return None
    return env_key(choose(interpreters(), spec.python).version, spec.requirements)


def sandbox_for(sandbox: Sandbox, spec: PacketSpec) -> Sandbox:
    """``sandbox`` running ``spec``'s runner (built first if missing)."""
    return dataclasses.replace(sandbox, runner_dir=runner_for(spec))
