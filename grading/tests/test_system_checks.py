"""``manage.py check`` names what the machine lacks to grade, and says how to fix it."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from grading.engine import sandbox
from grading.engine.sandbox import cgroups


def check_output(**env) -> str:
    err = io.StringIO()
    call_command("check", stdout=io.StringIO(), stderr=err)
    return err.getvalue()


def test_a_ready_machine_has_nothing_to_say(settings):
    assert "takehome.W1" not in check_output()


def test_a_missing_runner_venv_is_named_with_the_command_that_builds_it(settings, tmp_path):
    settings.GRADING_RUNNER_DIR = tmp_path / "no-runner"
    out = check_output()
    assert "takehome.W102" in out and str(tmp_path / "no-runner") in out and "manage.py build_runner" in out


@pytest.mark.parametrize("tool, package", [("BWRAP", "bubblewrap"), ("SETPRIV", "util-linux"),
                                           ("PRLIMIT", "util-linux")])
def test_a_missing_tool_is_named_with_its_package(settings, monkeypatch, tool, package):
    monkeypatch.setattr(sandbox, tool, f"/nonexistent/{tool.lower()}")
    out = check_output()
    assert "takehome.W101" in out and f"/nonexistent/{tool.lower()}" in out and f"apt-get install {package}" in out


def test_a_scratch_folder_that_cannot_be_created_is_named(settings, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # why a file: root may write anywhere, but not make a folder inside a file
    settings.GRADING_SCRATCH_DIR = blocker / "scratch"
    out = check_output()
    assert "takehome.W103" in out and "TAKEHOME_SCRATCH_DIR" in out


def test_caps_that_cannot_be_had_are_named(settings, monkeypatch):
    def unavailable(*args):
        raise cgroups.CapsUnavailable("no cgroup v1 hierarchy here")

    monkeypatch.setattr(sandbox, "detect", unavailable)
    out = check_output()
    assert "takehome.W105" in out and "no cgroup v1 hierarchy here" in out


def test_a_folder_the_sandbox_cannot_pass_through_is_named(settings, tmp_path):
    closed = tmp_path / "closed"
    (closed / "runner" / "bin").mkdir(parents=True)
    (closed / "runner" / "bin" / "python").touch()
    closed.chmod(0o700)
    settings.GRADING_RUNNER_DIR = closed / "runner"
    try:
        out = check_output()
    finally:
        closed.chmod(0o755)
    assert "takehome.W104" in out and "chmod o+x" in out


@pytest.mark.parametrize("command", ["migrate", "invite"])
def test_warnings_never_stop_a_command(settings, tmp_path, command):
    """A web-only host has no sandbox: its commands still run (the worker refuses to grade on its own)."""
    from django.core.management import get_commands, load_command_class

    settings.GRADING_RUNNER_DIR = tmp_path / "no-runner"
    cmd = load_command_class(get_commands()[command], command)
    cmd.check()  # raises SystemCheckError on an error; warnings only print


def test_build_runner_does_not_warn_about_the_runner_it_builds():
    """make's first set-up runs it before the runner exists: no warning about what it is about to build."""
    from django.core.management import get_commands, load_command_class

    assert load_command_class(get_commands()["build_runner"], "build_runner").requires_system_checks == []
