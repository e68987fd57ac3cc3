"""``manage.py check`` names what this machine lacks to grade: the sandbox's tools, runner venv, folders and caps,
and which Pythons packets may choose (TAKEHOME_PYTHONS).

Warnings, not errors: a web-only host (or ``build_runner`` itself, before the
runner exists) must still run its commands; the worker refuses to grade
without the sandbox on its own (grading.engine.sandbox.SandboxUnavailable).
"""

from __future__ import annotations

import sys

from django.core.checks import Info, Tags, Warning, register

SANDBOX_TAG = "sandbox"
CHECK_IDS = {"tool": "takehome.W101", "runner": "takehome.W102", "scratch": "takehome.W103",
             "reach": "takehome.W104", "caps": "takehome.W105", "python": "takehome.W106"}


@register(SANDBOX_TAG, Tags.compatibility)
def sandbox_ready(app_configs=None, **kwargs) -> list[Warning]:
    from shared.sandboxes import sandbox_from_settings

    return [
        Warning(problem, hint="Uploads are stored but not graded until this is fixed.", id=CHECK_IDS[kind])
        for kind, problem in sandbox_from_settings().problems()
    ]


@register(SANDBOX_TAG, Tags.compatibility)
def pythons_available(app_configs=None, **kwargs) -> list:
    """Which of TAKEHOME_PYTHONS a packet may choose (one Info line, under ``manage.py check``), and why any
    other cannot be used."""
    from shared.environments import interpreters, usable_versions

    found = [Warning(f"{i.path}: {i.problem}", id=CHECK_IDS["python"],
                     hint="Packets cannot choose this interpreter; fix it or take it out of TAKEHOME_PYTHONS.")
             for i in interpreters() if i.problem]
    versions = usable_versions()
    if not versions:
        return [*found, Warning("None of TAKEHOME_PYTHONS can run packets' tests.", id=CHECK_IDS["python"],
                                hint="Install python3 and python3-venv, or list a usable interpreter.")]
    if sys.argv[1:2] != ["check"]:
        # why: Django prints every message of every command's checks (migrate, runserver...);
        # the list is news only to someone who asked for it.
        return found
    usable = ", ".join(f"{i.version} ({i.path})" for i in interpreters() if not i.problem)
    return [*found, Info(f"Pythons packets may choose: {usable}; the default is {versions[0]}.",
                         id="takehome.I107")]
