"""Every `.venv/bin/python manage.py ...` line in the README's code blocks runs as printed.

In a copy of the checkout whose .env was written by make itself (`make dotenv`),
set up by make's own `db` target, from an environment with no takehome
variable at all: what a newcomer has after `make run`'s first set-up.
`make run` and `make test` themselves are covered by test_make_run and CI.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import require

ROOT = Path(__file__).resolve().parents[2]
COMMAND = re.compile(r"^\.venv/bin/python manage\.py \S.*$")
# A fresh shell's variables: nothing of takehome, no database or broker named.
KEEP = {"PATH", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "TMPDIR", "TERM"}


def readme_commands(text: str) -> list[str]:
    """The manage.py lines inside the README's fenced code blocks, in order."""
    commands, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced and COMMAND.match(line.strip()):
            commands.append(line.strip())
    return commands


def fresh_shell() -> dict:
    return {k: v for k, v in os.environ.items() if k in KEEP}


def test_the_parser_finds_only_fenced_manage_py_lines():
    text = ("```\n.venv/bin/python manage.py invite --packet x\nmake run\n```\n"
            "| `manage.py seed_demo` |\n.venv/bin/python manage.py outside\n")
    assert readme_commands(text) == [".venv/bin/python manage.py invite --packet x"]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A copy of the checkout with make's .env and make's set-up, sharing the built virtualenvs."""
    from django.conf import settings

    require(shutil.which("bwrap") is not None, "bubblewrap is not installed (apt-get install bubblewrap)")
    runner = Path(settings.GRADING_RUNNER_DIR)
    require((runner / "bin" / "python").exists(), f"{runner} is missing: run `make runner`")
    copy = tmp_path_factory.mktemp("checkout")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if name == ".venv" or name.startswith(".venv/") or not source.is_file():
            continue
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copy / name)
    (copy / ".venv").symlink_to((ROOT / ".venv").resolve())
    env = fresh_shell()
    make = subprocess.run(["make", "--no-print-directory", "dotenv"], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=60)
    assert make.returncode == 0, make.stderr
    assert "DEBUG=true" in (copy / ".env").read_text()
    # why: building another runner virtualenv takes a minute; the one the tests use is the same.
    with (copy / ".env").open("a") as out:
        out.write(f"TAKEHOME_RUNNER_DIR={runner}\nTAKEHOME_SCRATCH_DIR={settings.GRADING_SCRATCH_DIR}\n")
    # The venv is the checkout's, already installed: make must not try to build it in the copy.
    setup = subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed", "db"], cwd=copy, env=env,
                           capture_output=True, text=True, timeout=300)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    return copy


def test_every_readme_command_runs_as_printed(checkout):
    from grading.tests import corpus

    commands = readme_commands((checkout / "README.md").read_text())
    assert any(" invite " in c for c in commands) and any(" grade_zip " in c for c in commands), commands
    corpus.zip_with_times(checkout / "submission.zip", corpus.honest_files())  # what grade_zip's line names
    for command in commands:
        result = subprocess.run(command, shell=True, cwd=checkout, env=fresh_shell(),
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        assert "Traceback" not in result.stderr, f"{command}\n{result.stderr[-3000:]}"
        if " grade_zip " in command:
            assert '"reference_vs_submitted"' in result.stdout  # the evidence, reruns and all


def test_invite_prints_a_link_for_the_port_in_env(checkout):
    result = subprocess.run(".venv/bin/python manage.py invite --packet refund-sum --name Grace "
                            "--email grace@example.com --no-email", shell=True, cwd=checkout,
                            env=fresh_shell(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("http://127.0.0.1:8000/t/")


@pytest.fixture
def busy_port():
    """A port something answers on, so make run stops at its port check, before starting anything."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def make_run(checkout, *args, **env) -> str:
    result = subprocess.run(["make", "--no-print-directory", "-o", "setup", "run", *args], cwd=checkout,
                            env={**fresh_shell(), **env}, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0  # stopped by the busy port
    assert "Something already answers" in result.stderr, result.stdout + result.stderr
    return result.stdout + result.stderr


@pytest.mark.parametrize("how", ["PORT", "TAKEHOME_PORT"])
def test_make_run_on_another_port_takes_the_links_with_it(checkout, busy_port, how):
    if how == "PORT":
        output = make_run(checkout, f"PORT={busy_port}")
    else:
        output = make_run(checkout, TAKEHOME_PORT=str(busy_port))
    assert f"Log in at http://127.0.0.1:{busy_port}/ with:" in output
    assert "!!!" not in output
    # The .env (written for 8000) is left alone, and the run says which links use which.
    assert "SITE_URL=http://127.0.0.1:8000" in (checkout / ".env").read_text()
    assert ".env says http://127.0.0.1:8000" in output


def test_make_run_says_loudly_when_site_url_and_port_disagree(checkout, busy_port):
    output = make_run(checkout, TAKEHOME_PORT=str(busy_port), SITE_URL="http://127.0.0.1:8000")
    assert f"but the web server will listen on port {busy_port}" in output
