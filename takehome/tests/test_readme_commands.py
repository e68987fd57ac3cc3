"""Every command README.md and the docs/ pages show runs as printed, or this file says which tests run it, or
why it cannot here.

`readme_commands` reads every command a page shows (`documented_commands`: README.md and each docs/*.md,
the pages mkdocs builds): each line of a shell block (a fenced
block with no language, or sh, shell, bash, console; a block marked text, ini or yaml is output
or a file's content), each form in the Commands table's first column, and each code span of the
text that starts with a command (after any NAME=value: make, python, manage.py, .venv/bin/...,
docker and the other PROGRAMS, or an executable of the checkout such as scripts/run-supervised).
`manage.py` stands for `.venv/bin/python manage.py`, as the docs say. The Commands table is the one
under a heading "Commands" (docs/commands.md). Each command must be in one of four tables:

  RUN        run here as printed, in a copy of the checkout that make itself set up (below);
  FILL       a form of the Commands table, filled in and run: its placeholders (SLUG, FILE.zip,
             ID...) from PLACEHOLDERS, every optional part kept, each `a | b` form on its own;
  COVERED    too long or heavy to run here (make run, make bench, the benchmarks at full size):
             the tests that run it, which must exist, so a rename fails here;
  ELSEWHERE  cannot run on this machine (Docker, a model server), or is not for the reader to
             type (what the code runs, named to explain it): the reason.

A command of the text or a block that repeats the start of a Commands-table form (`make run`,
`manage.py invite`) is that form, accounted for there. A command in no table fails
test_every_readme_command_is_accounted_for with what to do, and so does a table entry no page
shows any more.

The copy: a copy of the checkout whose .env was written by make itself (`make dotenv`), set up
by make's own `db` target, run from an environment with no takehome variable at all: what a
newcomer has after `make run`'s first set-up.
"""

from __future__ import annotations

import fcntl
import importlib
import inspect
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import free_port, require, run_folder
from grading.engine.runner import sandbox_home

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SHELL_BLOCKS = {"", "sh", "shell", "bash", "console"}
# The first word of a command in the text (after any NAME=value), besides .venv/bin/... and the checkout's executables.
PROGRAMS = {"make", "python", "python3", "manage.py", "pip", "docker", "curl", "cp", "sudo", "apt-get", "npm", "git",
            "ollama", "llama-server", "bash", "sh", "env", "nice", "tmux", "gate"}
ASSIGNMENT = re.compile(r"[A-Z_][A-Z0-9_]*=\S*")
PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*(?:\.[a-z]+)?(?:\.\.\.)?")
VENV_PYTHON = ".venv/bin/python "
# A fresh shell's variables: nothing of takehome, no database or broker named.
KEEP = {"PATH", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "TMPDIR", "TERM"}
SLOW = pytest.mark.slow  # on every test here that starts subprocesses (Django, make, npm) in the copy


# --- what the pages show ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Shown:
    command: str
    line: int
    where: str  # "block", "table" (the Commands table) or "text"
    page: str = "README.md"  # relative to the checkout


def shell_line(line: str) -> str:
    """A shell block's line as a command: "" for a blank line or a comment; a trailing comment dropped."""
    line = line.strip()
    if not line or line.startswith("#"):
        return ""
    return re.sub(r"\s+#\s.*$", "", line)


def is_command(span: str) -> bool:
    """A code span of the text that reads as a command: a known program or an executable of the checkout, with arguments."""
    words = span.split()
    while words and ASSIGNMENT.fullmatch(words[0]):
        words = words[1:]
    if not words:
        return False
    first = ROOT / words[0]
    if "/" in words[0] and not words[0].startswith("/") and first.is_file() and os.access(first, os.X_OK):
        return True
    return len(words) > 1 and (words[0] in PROGRAMS or words[0].startswith(".venv/bin/"))


def doc_pages() -> list[Path]:
    """README.md and every page of the documentation site (mkdocs.yml's docs_dir)."""
    return [README, *sorted(DOCS.glob("*.md"))]


def page_name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def readme_commands(text: str, page: str = "README.md") -> list[Shown]:
    """Every command a page shows, in order: shell blocks' lines, the Commands table, the text's code spans."""
    shown, prose, fence, section = [], [], None, ""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            prose.append("")
        elif fence is not None:
            prose.append("")
            if fence in SHELL_BLOCKS and (command := shell_line(line)):
                shown.append(Shown(command, number, "block", page))
        else:
            if line.startswith("#"):
                section = line.lstrip("#").strip()
            if section == "Commands" and line.startswith("| `"):
                first, rest = re.split(r"(?<!\\)\|", line[1:], maxsplit=1)
                shown += [Shown(span.replace("\\|", "|"), number, "table", page)
                          for span in re.findall(r"`([^`]+)`", first)]
                line = rest
            prose.append(line)
    text = "\n".join(prose)
    for span in re.finditer(r"`([^`]+)`", text):
        command = " ".join(span.group(1).split())
        if is_command(command):
            shown.append(Shown(command, text.count("\n", 0, span.start()) + 1, "text", page))
    return sorted(shown, key=lambda s: s.line)


def documented_commands() -> list[Shown]:
    """Every command README.md and the docs pages show, page by page."""
    return [shown for path in doc_pages() for shown in readme_commands(path.read_text(), page_name(path))]


def bench_options(text: str) -> dict[str, set[str]]:
    """The options a page gives each benchmark: in a paragraph that names bench/X.py, or in an
    "Options:" paragraph after it in the same section."""
    found: dict[str, set[str]] = {}
    bench = None
    for paragraph in re.split(r"\n\s*\n", text):
        if paragraph.startswith("#"):
            bench = None
        named = re.findall(r"`[^`]*\b(bench/\w+\.py)\b[^`]*`", paragraph)
        if named:
            bench = named[-1]
        elif not paragraph.startswith("Options:"):
            continue
        if bench:
            found.setdefault(bench, set()).update(
                word for span in re.findall(r"`([^`]+)`", paragraph) for word in span.split() if word.startswith("--"))
    return found


def as_typed(command: str) -> str:
    """`manage.py ...` is `.venv/bin/python manage.py ...`, run from the checkout."""
    return VENV_PYTHON + command if command.startswith("manage.py ") else command


def filled_forms(synopsis: str, values: dict[str, str]) -> list[str]:
    """A Commands-table form as the commands that run it: one per `a | b` alternative, every optional
    part kept, the first of `x|y`, each placeholder replaced by its value."""
    alternatives = synopsis.replace("[", "").replace("]", "").split(" | ")
    words = alternatives[0].split()
    head = words[:next((i for i, w in enumerate(words) if w.startswith("-") or PLACEHOLDER.fullmatch(w)), len(words))]
    forms = []
    for n, alternative in enumerate(alternatives):
        filled = [shlex.quote(values[w]) if PLACEHOLDER.fullmatch(w) else w.split("|")[0]
                  for w in (alternative.split() if n == 0 else head + alternative.split())]
        forms.append(as_typed(" ".join(filled)))
    return forms


def names_a_table_form(command: str, table: list[str]) -> bool:
    """`manage.py invite` and `make run` name the Commands table's `manage.py invite --packet SLUG ...`, `make run [PORT=N]`."""
    words = command.removeprefix(VENV_PYTHON).split()
    return any(form.replace("[", "").replace("]", "").split()[:len(words)] == words for form in table)


# --- what the test does with each ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    says: str = ""  # a regular expression its standard output must match (re.M)
    stdin: str = ""
    values: dict = field(default_factory=dict)  # FILL: placeholders of this form's own


# Run as printed, in this order, before FILL. The pages' shell blocks first.
RUN = {
    '.venv/bin/python manage.py invite --packet refund-sum --name "Ada Lovelace" --email ada@example.com':
        Run(r"^http://127\.0\.0\.1:8000/t/\w+/\Z"),  # the link is the last line, for the port in .env
    ".venv/bin/python manage.py createuser --role reviewer reviewer2@example.com":
        Run(r"^http://127\.0\.0\.1:8000/accounts/set-password/\S+\Z"),  # the link last
    "manage.py createuser --role team-admin --role recruiter you@example.com":
        Run(r"^http://127\.0\.0\.1:8000/accounts/set-password/\S+\Z"),  # a site's first admin (security.md)
    ".venv/bin/python manage.py grade_zip submission.zip --packet refund-sum --indent 2": Run('"reference_vs_submitted"'),
    "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'": Run(r"^[A-Za-z0-9_-]{43}$"),  # a metrics token
    "cp .env takehome.env": Run(),  # the backup's third line; the other two need the compose deployment
    # nothing runs in the copy: make status says so
    "make status": Run(r"^make run is not running here: no supervisord answers on .*/var/supervisor/supervisor\.sock"),
    "make lint": Run(),
    "make docs": Run(r"mkdocs build --strict"),  # make echoes the build's command line; a warning fails it
    ".venv/bin/ruff check --fix": Run(),  # the copy is clean: nothing to fix, exit 0
    ".venv/bin/ruff format grading/engine": Run(r"files? left unchanged"),  # formatted already: nothing changes
    ".venv/bin/mypy": Run(r"^Success: no issues found"),
    "export DEBUG=true TAKEHOME_VAR_DIR=$PWD/var": Run(),
    "manage.py seed_demo": Run(r"^  recruiter  \S+$"),
    "manage.py build_runner": Run(r"^Runner ready: "),
    "manage.py build_runners": Run(r"^ready  business-days v1: "),
    "manage.py prune_runners": Run(r"unused environments? removed"),
    "manage.py stop_workspaces": Run(r"^No hosted workspace was running on this server\.$"),
    "manage.py rebuild_agreement": Run(r"^Rebuilt the agreement tally"),
    "manage.py check": Run(),  # what it finds depends on the machine; its messages go to standard error
}
PLACEHOLDERS = {
    "SLUG": "refund-sum", "N": "1", "FILE.zip": "refund-sum.zip", "PATH": "submission.zip", "NAME": "Grace Hopper",
    "EMAIL": "grace@example.com", "S": "5", "ID...": "{submission}", "SLUG...": "refund-sum",
}
# The Commands table's forms with placeholders or options, filled from PLACEHOLDERS and run after RUN, in this order.
FILL = {
    "manage.py load_sample_packet [--all] [--no-check]": Run(r"^Already up to date: sample packet business-days"),
    "manage.py check_packet SLUG [--version N] [--logs]": Run(r"passes every check; it is published"),
    "manage.py export_packet SLUG -o FILE.zip [--version N] [--history]": Run(r"^Wrote refund-sum v1 to refund-sum.zip"),
    # the zip export_packet just wrote: the packet's latest version holds it already, so nothing is imported
    "manage.py import_packet FILE.zip [--no-check]": Run(r"^Nothing imported: refund-sum v1 holds this zip already"),
    "manage.py createuser --role recruiter|reviewer|team-admin EMAIL [--password-stdin]":
        Run(r"recruiter2@example\.com", stdin="a long password for the test\n", values={"EMAIL": "recruiter2@example.com"}),
    "manage.py invite --packet SLUG --name NAME --email EMAIL [--no-email]": Run(r"^http://127\.0\.0\.1:8000/t/\w+/\Z"),
    "manage.py grade_zip PATH --packet SLUG [--packet-version N] [--indent N] [--seed N]": Run('"reference_vs_submitted"'),
    "manage.py regrade ID... | --packet SLUG [--packet-version N] | --errored [--dry-run]": Run(r"for grading again|nothing sent"),
    ".venv/bin/python -m grading.engine.runner PATH": Run(r"^runner ready: ", values={"PATH": "{runner}"}),
    "manage.py serve_workspaces [--sweep-every S] [--once]": Run(),
    "manage.py rebuild_funnel [SLUG...]": Run(r"^refund-sum: \d+ invited, counted again\.$"),
    "manage.py rebuild_similarity [SLUG...]": Run(r"^Fingerprinted \d+ graded submissions? and matched each "),
}
MAKE_RUN = ("takehome/tests/test_make_run.py::"
            "test_one_make_run_gives_the_model_restarts_whatever_dies_and_sigterm_stops_it_cleanly",
            "takehome/tests/test_make_run.py::"
            "test_a_worker_killed_mid_grading_is_graded_once_and_ctrl_c_mid_grading_lets_it_finish")
ON_ANOTHER_PORT = "takehome/tests/test_readme_commands.py::test_make_run_on_another_port_takes_the_links_with_it"
GATE_WALK = ("sessions_app/tests/test_readme_txt_commands.py::test_every_command_of_the_downloads_readme_runs_as_printed",)
HOSTED_GATE = ("sessions_app/tests/test_workspace_gate.py::"
               "test_the_whole_gate_typed_into_the_shell_ends_in_a_hosted_submission_with_the_servers_logs",
               "sessions_app/tests/browser/test_hosted_session.py::"
               "test_a_candidate_works_a_hosted_session_and_the_reviewer_replays_it")
# Too long or heavy to run here, or run where they are meant to be (a candidate's download): the tests that run them.
COVERED = {
    "make run": MAKE_RUN,
    "make run [PORT=N]": MAKE_RUN + (ON_ANOTHER_PORT,),
    "make run PORT=8123": (ON_ANOTHER_PORT,),
    "TAKEHOME_PORT=8123 make run": (ON_ANOTHER_PORT,),
    "TAKEHOME_PORT=8001 make run": ("takehome/tests/test_make_run.py::test_a_port_in_use_stops_make_run_with_the_reason",
                                    ON_ANOTHER_PORT),
    "TAKEHOME_MODEL_URL=http://127.0.0.1:11434/v1 TAKEHOME_MODEL_NAME=qwen2.5-coder:7b make run":
        ("takehome/tests/test_make_run.py::"
         "test_one_make_run_gives_the_model_restarts_whatever_dies_and_sigterm_stops_it_cleanly",),
    "scripts/run-supervised": MAKE_RUN,
    "manage.py runserver": ("takehome/tests/test_readme_commands.py::test_runserver_serves_the_asgi_app_and_its_websockets",),
    "make vendor": ("takehome/tests/test_readme_commands.py::test_make_vendor_copies_exactly_what_is_committed",),
    "make docs-serve": ("takehome/tests/test_readme_commands.py::test_make_docs_serve_serves_the_site_on_loopback",),
    "manage.py grade_zip --seed N":
        ("grading/tests/test_hidden_inputs.py::test_grade_zip_draws_the_inputs_of_a_seed_kept_in_earlier_evidence",),
    "make bench": ("grading/tests/test_bench_scripts.py::test_grading_bench_runs_and_ends_with_the_ratio",
                   "grading/tests/test_bench_scripts.py::test_the_packets_bench_compares_business_days_with_refund_sum",
                   "grading/tests/test_bench_pages.py::test_pages_bench_runs_and_prints_every_page",
                   "grading/tests/test_bench_load.py::test_load_bench_grades_every_upload_and_loses_none",
                   "grading/tests/test_bench_sessions.py::test_sessions_bench_types_in_two_terminals_and_cleans_up",
                   "grading/tests/test_bench_model_stream.py::test_the_model_stream_bench_runs_and_ends_with_the_first_chunks_p95",
                   "grading/tests/test_bench_similarity.py::test_similarity_bench_prints_each_size_with_its_ratio"),
    ".venv/bin/python bench/grading.py":
        ("grading/tests/test_bench_scripts.py::test_grading_bench_runs_and_ends_with_the_ratio",),
    ".venv/bin/python bench/grading.py --packets":
        ("grading/tests/test_bench_scripts.py::test_the_packets_bench_compares_business_days_with_refund_sum",),
    ".venv/bin/python bench/pages.py --submissions N": ("grading/tests/test_bench_pages.py::test_pages_bench_runs_and_prints_every_page",),
    ".venv/bin/python bench/load.py": ("grading/tests/test_bench_load.py::test_load_bench_grades_every_upload_and_loses_none",),
    ".venv/bin/python bench/similarity.py":
        ("grading/tests/test_bench_similarity.py::test_similarity_bench_prints_each_size_with_its_ratio",),
    ".venv/bin/python bench/model_stream.py":
        ("grading/tests/test_bench_model_stream.py::test_the_model_stream_bench_runs_and_ends_with_the_first_chunks_p95",),
    "bench/model_stream.py":
        ("grading/tests/test_bench_model_stream.py::test_the_model_stream_bench_runs_and_ends_with_the_first_chunks_p95",),
    ".venv/bin/python bench/sessions.py":
        ("grading/tests/test_bench_sessions.py::test_sessions_bench_types_in_two_terminals_and_cleans_up",
         "grading/tests/test_bench_sessions.py::test_ctrl_c_ends_the_shells_the_mounts_and_the_servers"),
    "manage.py backup FILE": (
        "sessions_app/tests/test_backup_restore.py::"
        "test_a_running_server_backed_up_and_restored_into_an_empty_one_serves_every_page_as_before",
        "takehome/tests/test_backup.py::test_a_backup_refuses_a_place_it_cannot_write_to"),
    "manage.py restore FILE [--force]": (
        "sessions_app/tests/test_backup_restore.py::"
        "test_a_running_server_backed_up_and_restored_into_an_empty_one_serves_every_page_as_before",
        "takehome/tests/test_backup.py::"
        "test_a_restore_over_data_refuses_without_force_and_with_it_replaces_it_and_notes_another_key"),
    ".venv/bin/python manage.py backup takehome-backup.tar.gz": (
        "sessions_app/tests/test_backup_restore.py::"
        "test_a_running_server_backed_up_and_restored_into_an_empty_one_serves_every_page_as_before",),
    ".venv/bin/python manage.py restore takehome-backup.tar.gz": (
        "sessions_app/tests/test_backup_restore.py::"
        "test_a_running_server_backed_up_and_restored_into_an_empty_one_serves_every_page_as_before",),
    "manage.py health [CHECK...] [--json]": (
        "takehome/tests/test_health.py::test_the_command_exits_1_when_not_ready_and_0_once_a_worker_reports_in",
        "takehome/tests/test_health.py::test_the_command_prints_each_check_and_fails_when_not_ready"),
    "manage.py health workers": (
        "takehome/tests/test_health.py::test_the_command_prints_each_check_and_fails_when_not_ready",
        "takehome/tests/test_health_processes.py::test_readyz_follows_the_worker_and_the_broker_and_the_healthchecks_say_so"),
    "python -m shared.probe": (
        "takehome/tests/test_health_processes.py::"
        "test_the_web_healthcheck_reaches_daphne_through_its_proxy_protocol_endpoint",),
    "python -m venv .venv": GATE_WALK,
    "python -m pip install pytest -r requirements.txt": GATE_WALK,
    "python -m pytest -q": GATE_WALK,
    "python gate.py red": GATE_WALK,
    "python gate.py model": GATE_WALK,
    "python gate.py ask": GATE_WALK,
    "python gate.py green": GATE_WALK,
    "python gate.py submit": GATE_WALK,
    "python gate.py status": GATE_WALK,
    "python gate.py help": ("sessions_app/tests/test_limits_stated.py::test_the_readme_and_the_gates_help_state_them",),
    "gate red": HOSTED_GATE,
    "gate model": HOSTED_GATE,
    "gate green": HOSTED_GATE,
    "gate submit": HOSTED_GATE,
    "gate submit --anyway": ("sessions_app/tests/test_workspace_submit.py::"
                             "test_gate_submit_names_what_is_missing_and_submits_only_with_anyway",),
    "gate status": HOSTED_GATE,
    'python gate.py ask "next question"': (
        "sessions_app/tests/test_gate_ask.py::test_ask_goes_on_with_the_conversation_and_new_starts_again",),
    "gate ask": ("sessions_app/tests/test_model_workspace.py::"
                 "test_gate_ask_in_the_terminal_streams_continues_and_writes_the_files",),
    'gate ask "next question"': ("sessions_app/tests/test_model_workspace.py::"
                                 "test_gate_ask_in_the_terminal_streams_continues_and_writes_the_files",),
    "gate ask --new": ("sessions_app/tests/test_model_workspace.py::"
                       "test_gate_ask_in_the_terminal_streams_continues_and_writes_the_files",),
}
NO_DOCKER = "needs a Docker engine and the compose deployment, which this machine does not run"
NOT_TYPED = "named to say what the code runs, not a command for the reader"
# Not run here: why.
ELSEWHERE = {
    "make test": "the whole suite, which this test is part of; .ci/run runs it (its set-up: make dotenv and make db "
                 "run in the copy below, and make lint runs as printed)",
    "make test [TEST_PROCESSES=N] [PYTEST_ARGS=...]": "make test, with its two variables: the suite runs in "
                                                      "TEST_PROCESSES processes, and .ci/run's second pass passes "
                                                      "PYTEST_ARGS",
    "make screenshots": "the browser tests that take the docs' pictures, a part of make test's, with their "
                        "pictures written to docs/screenshots/",
    'make test PYTEST_ARGS="-m services"': ".ci/run's second pass, on PostgreSQL and the machine's Redis",
    ".ci/run": "CI itself: make test twice, the second time on PostgreSQL and the machine's Redis, the tests that "
               "use them",
    '.venv/bin/pytest -m "not slow"': "four fifths of the suite, which this test is part of; make test runs all of it",
    ".venv/bin/pytest grading/tests/test_sandbox.py": "an example of running one file's tests while working; make test "
                                                       "runs that file",
    "sudo apt-get install": "part of the line make prints when it is not root; a test installs no system packages",
    "apt-get install python3.12 python3.12-venv": "installs system packages, and only on a Debian release that has 3.12",
    "ollama pull qwen2.5-coder:7b": "downloads a model's weights with Ollama, which this machine does not have; the model "
                                    "window's tests use a fake upstream (sessions_app/tests/conftest.py)",
    "docker compose up -d --build": NO_DOCKER,
    'docker run --rm -e MC_HOST_site quay.io/minio/mc admin policy attach site readwrite --user takehome': NO_DOCKER,
    "docker run --rm -e MC_HOST_site quay.io/minio/mc admin user add site takehome '<another long secret>'": NO_DOCKER,
    'docker run --rm -e MC_HOST_site quay.io/minio/mc mb site/takehome': NO_DOCKER,
    "export MC_HOST_site='http://admin:<the secret above>@10.0.0.5:9000'": NO_DOCKER,
    'quay.io/minio/minio server /data': NO_DOCKER,
    "-e MINIO_ROOT_USER=admin -e MINIO_ROOT_PASSWORD='<a long random secret>' \\": NO_DOCKER,
    'docker run -d --name minio --restart unless-stopped -p 9000:9000 -v /srv/minio:/data \\': NO_DOCKER,
    "docker compose exec web python manage.py createsuperuser": NO_DOCKER,
    "docker compose cp caddy:/data/caddy/pki/authorities/local/root.crt caddy-root.crt": NO_DOCKER,
    "curl --cacert caddy-root.crt https://localhost/": NO_DOCKER,
    'curl -sS https://takehome.example.com/api/v1/invitations -H "Authorization: Bearer $TAKEHOME_TOKEN" '
    '-H "Content-Type: application/json" -d @invite.json': "an example against a deployed site, with a "
        "recruiter's token; api/tests/test_api_live.py makes the same call to a running server and a real worker",
    "docker compose up -d postgres redis web worker beat": NO_DOCKER,
    "docker compose ps": NO_DOCKER,
    "docker compose up -d --scale worker=3": NO_DOCKER,
    "docker compose up -d --scale worker=2 worker": NO_DOCKER,
    "docker compose up -d workspaces": NO_DOCKER,
    "pip install --target DIR -r requirements.txt": "how the image's requirements were measured (docs/install.md): "
                                                    "it downloads every runtime requirement, about 230 MB",
    "pip install": NOT_TYPED + " (what the Dockerfile runs)",
    "docker compose": NO_DOCKER,
    "docker image ls": NO_DOCKER + " (the image's size is the sum of its parts, measured without it: docs/install.md)",
    "docker compose exec -T workspaces python manage.py backup - > takehome-backup.tar.gz": NO_DOCKER,
    "docker compose up -d postgres redis": NO_DOCKER,
    "docker compose stop web workspaces worker beat": NO_DOCKER,
    "docker compose run --rm -T --no-deps workspaces python manage.py restore - < takehome-backup.tar.gz": NO_DOCKER,
    "docker compose up -d": NO_DOCKER,
    "python -m pytest -q -p anyio": "an example of a packet's test command, which the sandbox runs",
    "python -m pytest": NOT_TYPED + " (the test command that goes to a warm sandbox)",
    "python -P": NOT_TYPED + " (how the sandbox starts its starter)",
    "python -P -c <boot>": NOT_TYPED + " (how the sandbox runs `python -m pytest`)",
    "git archive": NOT_TYPED + " (one way a candidate's zip may have been made)",
    "tmux capture-pane": NOT_TYPED + " (how a reconnecting tab gets the pane's history)",
    "npm pack": NOT_TYPED + " (what make vendor runs)",
}
TABLES = {"RUN": RUN, "FILL": FILL, "COVERED": COVERED, "ELSEWHERE": ELSEWHERE}


def unaccounted(shown: list[Shown]) -> list[str]:
    """What the tables miss, or list that no page shows any more."""
    table = [s.command for s in shown if s.where == "table"]
    problems = []
    for item in shown:
        if any(item.command in entries for entries in TABLES.values()):
            continue
        if item.where != "table" and names_a_table_form(item.command, table):
            continue
        problems.append(
            f"{item.page} line {item.line} shows `{item.command}`, which {Path(__file__).relative_to(ROOT)} does not "
            "account for. Add it to one of its tables: RUN if it runs as printed in a few seconds, FILL for a form of "
            "the Commands table with placeholders, COVERED with the tests that run it if it runs long, ELSEWHERE with "
            "the reason if it cannot run here. If it is output or a file's content, mark its block ```text or ```ini.")
    commands = {s.command for s in shown}
    for name, entries in TABLES.items():
        problems += [f"{name} lists `{command}`, which no page shows any more (README.md, docs/*.md): remove it, "
                     "or fix the page."
                     for command in entries if command not in commands]
    problems += [f"FILL lists `{form}`, which is not a form of the Commands table: run it as printed (RUN)."
                 for form in FILL if form not in table]
    problems += [f"RUN lists `{command}`, which has placeholders or optional parts: fill them in (FILL)."
                 for command in RUN if "[" in command or any(PLACEHOLDER.fullmatch(w) for w in command.split())]
    return problems


def missing_tests(names: list[str]) -> list[str]:
    """The `path::test_name`s that name no test function."""
    missing = []
    for name in names:
        path, _, function = name.partition("::")
        try:
            module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        except ImportError as error:
            missing.append(f"{name}: {error}")
            continue
        if not (function.startswith("test_") and inspect.isfunction(getattr(module, function, None))):
            missing.append(f"{name}: {path} has no test function {function}")
    return missing


def test_the_parser_reads_shell_blocks_the_commands_table_and_commands_in_the_text():
    text = ("```\n.venv/bin/python manage.py invite --packet x  # a comment\n\n# a comment line\nmake run\n```\n"
            "```text\nLog in at http://127.0.0.1:8000/ with:\n```\n"
            "Run `make\nstatus`, or `TAKEHOME_PORT=8001 make run`; the `manage.py` file, `gate.py red`, `--warm 0`.\n"
            "## Commands\n\n| command | what it does |\n|---|---|\n"
            "| `manage.py regrade ID... \\| --errored` | grade again; see `manage.py check` |\n")
    assert readme_commands(text) == [
        Shown(".venv/bin/python manage.py invite --packet x", 2, "block"), Shown("make run", 5, "block"),
        Shown("make status", 10, "text"), Shown("TAKEHOME_PORT=8001 make run", 11, "text"),
        Shown("manage.py regrade ID... | --errored", 16, "table"), Shown("manage.py check", 16, "text")]


def test_a_form_of_the_commands_table_is_run_in_each_of_its_ways():
    values = {**PLACEHOLDERS, "ID...": "7", "NAME": "Grace Hopper"}
    assert filled_forms("manage.py regrade ID... | --packet SLUG [--packet-version N] | --errored [--dry-run]",
                        values) == [".venv/bin/python manage.py regrade 7",
                                    ".venv/bin/python manage.py regrade --packet refund-sum --packet-version 1",
                                    ".venv/bin/python manage.py regrade --errored --dry-run"]
    assert filled_forms("manage.py invite --name NAME --role recruiter|reviewer [--no-email]", values) == [
        ".venv/bin/python manage.py invite --name 'Grace Hopper' --role recruiter --no-email"]


def test_a_command_the_tables_miss_fails_with_what_to_do():
    shown = [*documented_commands(), Shown("make deploy", 9998, "block"),
             Shown("make run --now", 9999, "text", "docs/install.md")]
    problems = [p for p in unaccounted(shown) if "line 999" in p]
    assert [p.split(",")[0] for p in problems] == ["README.md line 9998 shows `make deploy`",
                                                   "docs/install.md line 9999 shows `make run --now`"], problems
    assert "Add it to one of its tables: RUN if it runs as printed" in problems[0]


def test_every_readme_command_is_accounted_for():
    shown = documented_commands()
    assert {s.page for s in shown} >= {"README.md", "docs/commands.md", "docs/install.md"}, "a page went unread"
    problems = unaccounted(shown)
    assert not problems, "\n".join(problems)
    names = sorted({name for tests in COVERED.values() for name in tests})
    assert not missing_tests(names), "\n".join(missing_tests(names))
    for synopsis, run in FILL.items():
        unknown = {w for w in synopsis.replace("[", " ").replace("]", " ").split() if PLACEHOLDER.fullmatch(w)}
        unknown -= {*PLACEHOLDERS, *run.values}
        assert not unknown, f"FILL's `{synopsis}` has {sorted(unknown)}: give each a value in PLACEHOLDERS"


# --- the copy of the checkout, and the commands run in it ------------------------------------------------------------

def fresh_shell() -> dict:
    return {k: v for k, v in os.environ.items() if k in KEEP}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A copy of the checkout with make's .env and make's set-up, sharing the built virtualenvs.

    why set up once per run and copied: each test process that ran one of these tests set up a copy of its own
    (make db: the migrations, the sample packets checked in the sandbox), the same work up to four times.
    """
    from django.conf import settings

    require(shutil.which("bwrap") is not None, "bubblewrap is not installed (apt-get install bubblewrap)")
    runner = Path(settings.GRADING_RUNNER_DIR)
    require((runner / "bin" / "python").exists(), f"{runner} is missing: run `make runner`")
    venv = Path(sys.prefix)
    require((venv / ".installed-dev").exists(), f"{venv} was not installed by make (no .installed-dev): run `make dev`")
    made = run_folder(tmp_path_factory) / "checkout-set-up"
    with open(made.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (made / ".set-up").exists():
            shutil.rmtree(made, ignore_errors=True)
            set_up_copy(made, runner, venv, settings.GRADING_SCRATCH_DIR)
            (made / ".set-up").touch()
    copy = tmp_path_factory.mktemp("checkout")
    shutil.copytree(made, copy, symlinks=True, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".set-up"))
    # make wrote the copy's own folder into its .env (TAKEHOME_VAR_DIR): what it writes at this one; the
    # sandbox's scratch folder is this test process's, as for everything else the process runs; and the
    # packets' environments are those make db built (set_up_copy), wherever they are.
    env_file = copy / ".env"
    made_env = env_file.read_text()
    runners = re.search(r"(?m)^TAKEHOME_RUNNERS_DIR=.*$", made_env).group()
    text = re.sub(r"(?m)^TAKEHOME_SCRATCH_DIR=.*$", f"TAKEHOME_SCRATCH_DIR={settings.GRADING_SCRATCH_DIR}",
                  made_env.replace(str(made), str(copy)))
    env_file.write_text(re.sub(r"(?m)^TAKEHOME_RUNNERS_DIR=.*$", lambda _: runners, text))
    return copy


def set_up_copy(copy: Path, runner: Path, venv: Path, scratch: str) -> None:
    """Copy the checkout's files to ``copy``, then make's dotenv and db there, as after make run's first set-up."""
    copy.mkdir(parents=True)
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if name == ".venv" or name.startswith(".venv/") or not source.is_file():
            continue
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copy / name)
    # The venv running these tests, installed by make: as in a checkout, make must find it current, not build it.
    (copy / ".venv").symlink_to(venv)
    installed = (venv / ".installed").stat().st_mtime
    for requirements in ("requirements.txt", "requirements-dev.txt", "requirements-docs.txt"):
        os.utime(copy / requirements, (installed - 60, installed - 60))
    env = fresh_shell()
    make = subprocess.run(["make", "--no-print-directory", "dotenv"], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=300)
    assert make.returncode == 0, make.stderr
    assert "DEBUG=true" in (copy / ".env").read_text()
    # why: building another runner virtualenv takes a minute; the one the tests use is the same.
    # The packets' environments stay where make db builds them (its default), named so that each copy of
    # this folder finds them there: a copy has a var folder of its own, whose default is another place,
    # and `manage.py build_runners` there would build business-days's again with pip.
    runners = sandbox_home(copy / "var") / "runners"
    with (copy / ".env").open("a") as out:
        out.write(f"TAKEHOME_RUNNER_DIR={runner}\nTAKEHOME_SCRATCH_DIR={scratch}\nTAKEHOME_RUNNERS_DIR={runners}\n")
    setup = subprocess.run(["make", "--no-print-directory", "db"], cwd=copy, env=env,
                           capture_output=True, text=True, timeout=300)
    assert setup.returncode == 0, setup.stdout + setup.stderr


def run_as_printed(checkout: Path, command: str, run: Run) -> None:
    result = subprocess.run(command, shell=True, cwd=checkout, env=fresh_shell(), input=run.stdin,
                            capture_output=True, text=True, timeout=300)
    said = f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, said
    assert "Traceback" not in result.stderr, said
    assert re.search(run.says, result.stdout.strip(), re.M), f"expected {run.says!r} in the output of {said}"


# One of an invitation's uploads, stored as the page stores it, for `regrade ID...`: its id is printed.
UPLOAD = """
from pathlib import Path
from sessions_app.actions import _incoming, do_accept_upload, do_start_session
from takehome.models import Invitation

invitation = Invitation.objects.order_by("pk").first()
do_start_session(invitation)
print(do_accept_upload(invitation, _incoming(Path("submission.zip").read_bytes(), "submission.zip")).submission.pk)
"""


@SLOW
def test_every_readme_command_runs_as_printed(checkout):
    from django.conf import settings

    from grading.tests import corpus

    corpus.zip_with_times(checkout / "submission.zip", corpus.honest_files())  # what grade_zip's lines name
    done = set()
    for command, run in RUN.items():
        run_as_printed(checkout, as_typed(command), run)
        done.add(as_typed(command))
    upload = subprocess.run([".venv/bin/python", "manage.py", "shell", "-c", UPLOAD], cwd=checkout, env=fresh_shell(),
                            capture_output=True, text=True, timeout=120)
    assert upload.returncode == 0, upload.stdout + upload.stderr
    found = {"submission": upload.stdout.split()[-1], "runner": str(settings.GRADING_RUNNER_DIR)}
    for synopsis, run in FILL.items():
        values = {name: value.format(**found) for name, value in {**PLACEHOLDERS, **run.values}.items()}
        for command in filled_forms(synopsis, values):
            if command not in done:
                run_as_printed(checkout, command, run)
                done.add(command)


@SLOW
def test_the_benchmarks_take_every_option_the_docs_give_them():
    options: dict[str, set[str]] = {}
    for path in doc_pages():
        for bench, named in bench_options(path.read_text()).items():
            options.setdefault(bench, set()).update(named)
    assert set(options) == {"bench/grading.py", "bench/pages.py", "bench/load.py", "bench/sessions.py",
                            "bench/model_stream.py", "bench/similarity.py"}, options
    for bench, named in options.items():
        usage = subprocess.run([sys.executable, bench, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert usage.returncode == 0, usage.stderr
        unknown = {option for option in named if not re.search(rf"(^|[\s\[]){option}\b", usage.stdout, re.M)}
        assert not unknown, f"The docs give {bench} {sorted(unknown)}, which its --help does not know:\n{usage.stdout}"


# --- the commands COVERED names in this file --------------------------------------------------------------------------

def serve_from(checkout: Path, argv: list[str], log: Path) -> subprocess.Popen:
    """A server command as printed, started in the copy from a fresh shell, in a process group of its own."""
    return subprocess.Popen(argv, cwd=checkout, env=fresh_shell(), stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def page_of(server: subprocess.Popen, log: Path, url: str) -> str:
    """The page at ``url`` once the server answers 200 (it may take a while to start; its log if it dies first)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + 120
    while True:
        try:
            with opener.open(url, timeout=10) as response:
                assert response.status == 200
                return response.read().decode()
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)


@SLOW
def test_runserver_serves_the_asgi_app_and_its_websockets(checkout, tmp_path):
    """`manage.py runserver` as printed, on a free port rather than 8000, which another run may hold on this machine."""
    from takehome.tests.test_make_run import websocket_frames

    port = free_port()
    log = tmp_path / "runserver.log"
    server = serve_from(checkout, [".venv/bin/python", "manage.py", "runserver", f"127.0.0.1:{port}"], log)
    try:
        page_of(server, log, f"http://127.0.0.1:{port}/accounts/login/")
        status, frames = websocket_frames(port, "/t/not-a-real-token/terminal", f"http://127.0.0.1:{port}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the autoreloader's child is in its group
        server.wait(30)
    assert status.startswith("HTTP/1.1 101"), status + log.read_text()
    assert frames[-1][0] == 8 and int.from_bytes(frames[-1][1][:2], "big") == 4401  # closed: the link is not valid


@SLOW
def test_make_docs_serve_serves_the_site_on_loopback(checkout, tmp_path):
    """`make docs-serve` as printed, on a free port rather than 8100 (DOCS_PORT), which another run may hold."""
    port = free_port()
    log = tmp_path / "docs-serve.log"
    server = serve_from(checkout, ["make", "--no-print-directory", "docs-serve", f"DOCS_PORT={port}"], log)
    try:
        page = page_of(server, log, f"http://127.0.0.1:{port}/when-not-to-use.html")
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # make, mkdocs and its file watcher
        server.wait(30)
    assert "<h1" in page and "When not to use this" in page, page[:2000]
    assert f"Serving on http://127.0.0.1:{port}/" in log.read_text()


NETWORK_ERRORS = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ECONNRESET")


@SLOW
def test_make_vendor_copies_exactly_what_is_committed(checkout):
    require(shutil.which("npm") is not None, "npm is not installed (apt-get install npm)")
    result = subprocess.run(["make", "vendor"], cwd=checkout, env=fresh_shell(), capture_output=True, text=True,
                            timeout=300)
    require(not any(error in result.stderr for error in NETWORK_ERRORS),
            f"npm's registry cannot be reached: {result.stderr[-500:]}")
    assert result.returncode == 0, result.stdout + result.stderr
    made, committed = checkout / "static" / "vendor", ROOT / "static" / "vendor"
    files = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
    assert sorted(p.relative_to(made) for p in made.rglob("*") if p.is_file()) == files
    assert [f for f in files if (made / f).read_bytes() != (committed / f).read_bytes()] == []


# --- make run on another port: each stops at its port check, before starting anything ----------------------------------

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


@SLOW
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


@SLOW
def test_make_run_says_loudly_when_site_url_and_port_disagree(checkout, busy_port):
    output = make_run(checkout, TAKEHOME_PORT=str(busy_port), SITE_URL="http://127.0.0.1:8000")
    assert f"but the web server will listen on port {busy_port}" in output
