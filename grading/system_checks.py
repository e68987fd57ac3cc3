"""``manage.py check`` names what this machine lacks to grade: the sandbox's tools, runner venv, folders and caps.

Warnings, not errors: a web-only host (or ``build_runner`` itself, before the
runner exists) must still run its commands; the worker refuses to grade
without the sandbox on its own (grading.sandbox.SandboxUnavailable).
"""

from __future__ import annotations

from django.core.checks import Tags, Warning, register

SANDBOX_TAG = "sandbox"
CHECK_IDS = {"tool": "takehome.W101", "runner": "takehome.W102", "scratch": "takehome.W103",
             "reach": "takehome.W104", "caps": "takehome.W105"}


@register(SANDBOX_TAG, Tags.compatibility)
def sandbox_ready(app_configs=None, **kwargs) -> list[Warning]:
    from .pipeline import sandbox_from_settings

    return [
        Warning(problem, hint="Uploads are stored but not graded until this is fixed.", id=CHECK_IDS[kind])
        for kind, problem in sandbox_from_settings().problems()
    ]
