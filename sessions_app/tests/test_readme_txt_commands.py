"""Every command a download's README.txt shows runs as printed, in its order, in the downloaded folder.

`download_commands` reads them from the README.txt of a real download: each step's command (an
indented line starting with `python ` or `. `, up to the two spaces before its explanation), a
Windows alternative in brackets, and `python gate.py ...` in the sentences below the steps. Any
other `python` left in the text fails, so a new command is never missed. A walk per kind of
download then runs them as a candidate types them, with `python` on the PATH and nothing of
ours: the sample packet under its own model (`python gate.py model`), and business-days, which
needs packages (the virtual environment's steps) under the model the server provides
(`python gate.py ask`, answered by the fake upstream). The walk runs exactly the commands
README.txt shows, in its order; the candidate's own work (a test, the prompt, the fix, the
refusal) is written between them.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import require
from grading.tests.corpus import BUSINESS_DAYS
from sessions_app.actions import do_start_session
from sessions_app.models import Submission
from takehome.actions import do_load_sample_packet
from takehome.models import PacketVersion
from takehome.tests.factories import InvitationFactory, mark_checked

from .helpers import apply_fix, do_honest_work, download_tree, runner_python, write_refusal

pytestmark = pytest.mark.django_db(transaction=True)


def download_commands(text: str) -> list[str]:
    """The commands a README.txt shows, in order."""
    commands = []
    for line in text.splitlines():
        if line.startswith(" "):  # a step, or the environment's set-up
            step = re.sub(r"^\s*(\d+\.\s+)?", "", line)
            if step.startswith(("python ", ". ")):
                commands.append(re.split(r"\s{2,}", step)[0])
            commands += re.findall(r"\(Windows: ([^)]+)\)", line)
        else:
            commands += re.findall(r"\bpython gate\.py \w+", line)
    return commands


def test_the_parser_reads_steps_their_windows_form_and_commands_in_sentences():
    text = ("Hello.\n\n  python -m venv .venv\n  . .venv/bin/activate          (Windows: .venv\\Scripts\\activate)\n"
            "  1. python -m pytest -q          see the bug happen\n  7. write artifacts/refuse.md    one unsafe patch\n"
            "python gate.py status shows what the server has witnessed. The gate needs Python 3.8.\n")
    assert download_commands(text) == ["python -m venv .venv", ". .venv/bin/activate", ".venv\\Scripts\\activate",
                                       "python -m pytest -q", "python gate.py status"]


def left_over(text: str, commands: list[str]) -> list[str]:
    """Lines that still name `python` once every command read is taken out: a command the parser missed."""
    for command in commands:
        text = text.replace(command, "", 1)
    return [line for line in text.splitlines() if re.search(r"\bpython\b", line)]


@dataclass(frozen=True)
class Step:
    command: str
    says: str  # in its output (standard output and error)
    fails: bool = False  # the step is meant to refuse, or to show the failing test
    then: Callable[[Path], None] | None = None  # the candidate's own work after it
    elsewhere: str = ""  # why it does not run here


def business_days_work(tree: Path) -> None:
    (tree / BUSINESS_DAYS.test_path).write_bytes(BUSINESS_DAYS.honest_test)
    (tree / "artifacts" / "prompt.txt").write_bytes(BUSINESS_DAYS.prompt)


def business_days_fix(tree: Path) -> None:
    terms = "src/payterms/terms.py"
    (tree / terms).write_bytes(BUSINESS_DAYS.spec().solution[terms])
    (tree / "artifacts" / "refuse.md").write_bytes(BUSINESS_DAYS.refuse)


def fix_and_refuse(tree: Path) -> None:
    apply_fix(tree)
    write_refusal(tree)


def gate_steps(tests_fail: str, work: Callable[[Path], None], model: Step) -> list[Step]:
    """README.txt's steps from the first test run on: red, the model's step, green, submit, status, red again."""
    return [
        Step("python -m pytest -q", tests_fail, fails=True),
        Step("python gate.py red", "red captured", then=work),
        model,
        Step("python gate.py green", "green captured"),
        Step("python gate.py submit", "received at"),
        Step("python gate.py status", "Time left"),
        Step("python gate.py red", "The model window is already open, so red was captured before it", fails=True),
    ]


# The sample packet, no packages, the candidate's own model.
OWN_MODEL = gate_steps("1 failed", do_honest_work, Step("python gate.py model", "model window open", then=fix_and_refuse))
# business-days: its packages in a virtual environment, the model the server provides.
PACKAGES_AND_PROVIDED_MODEL = [
    Step("python -m venv .venv", ""),
    Step(". .venv/bin/activate", ""),
    Step(".venv\\Scripts\\activate", "", elsewhere="Windows' form of the step before: these steps run in bash"),
    Step("python -m pip install pytest -r requirements.txt", "Successfully installed"),
    *gate_steps("failed", business_days_work,
                Step("python gate.py ask", "The reply is saved in artifacts/model.md", then=business_days_fix)),
]


def candidate_shell(tree: Path, python: Path) -> dict:
    """A candidate's terminal: `python` is a Python 3 with what README.txt says it needs, and nothing of ours.
    Their pip's own settings (an index, a proxy) are kept, as on their machine."""
    bin_dir = tree.parent / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {python} "$@"\n')
    (bin_dir / "python").chmod(0o755)
    kept = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k.lower().endswith("_proxy")}
    return {**kept, "PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tree.parent), "LANG": "C.UTF-8",
            "NO_PROXY": "127.0.0.1,localhost"}


def walk(tree: Path, python: Path, steps: list[Step]) -> None:
    """Run README.txt's commands as printed, each in bash, with the virtual environment active once activated."""
    readme = (tree / "README.txt").read_text()
    shown = download_commands(readme)
    assert not left_over(readme, shown), left_over(readme, shown)
    assert shown == [step.command for step in steps], (
        "README.txt's commands are not the ones this walk runs, in its order: give the walk a step for each "
        f"(or drop the step):\n{shown}\n{readme}")
    env, active = candidate_shell(tree, python), ""
    for step in steps:
        if step.elsewhere:
            continue
        result = subprocess.run(["bash", "-c", active + step.command], cwd=tree, env=env, stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=300)
        said = f"{step.command}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        assert (result.returncode != 0) == step.fails, said
        assert step.says in result.stdout + result.stderr, said
        assert "Traceback" not in result.stderr, said
        if step.command.startswith(". "):
            active = step.command + " && "
        if step.then:
            step.then(tree)


@pytest.fixture
def download(live_server, settings, tmp_path):
    """The downloaded folder of a started invitation to a packet version under a model policy."""
    settings.SITE_URL = live_server.url

    def make(version: PacketVersion, policy: str) -> Path:
        PacketVersion.objects.filter(pk=version.pk).update(model_policy=policy)
        invitation = InvitationFactory(packet_version=version)
        do_start_session(invitation)
        home = tmp_path / policy  # the candidate's home: the download, and their own bin
        home.mkdir()
        return download_tree(live_server.url, invitation.raw_token, home)

    return make


def test_every_command_of_the_downloads_readme_runs_as_printed(download, sample_packet, upstream):
    require(runner_python().exists(), f"{runner_python()} is missing: run `make runner`")
    tree = download(sample_packet.latest_version(), PacketVersion.ModelPolicy.OWN)
    walk(tree, runner_python(), OWN_MODEL)  # a Python that has pytest, and nothing else
    packet, _ = do_load_sample_packet(send_check=False, folder=BUSINESS_DAYS.spec_dir())
    version = mark_checked(packet.latest_version())
    tree = download(version, PacketVersion.ModelPolicy.PROVIDED)
    assert (tree / "requirements.txt").read_text() == version.requirements
    walk(tree, Path("/usr/bin/python3"), PACKAGES_AND_PROVIDED_MODEL)  # the system's own, bare
    assert upstream.got, "gate.py ask reached no model"
    assert Submission.objects.filter(invitation__packet_version__in=[sample_packet.latest_version(), version],
                                     via="gate").count() == 2
