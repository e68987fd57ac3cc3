"""The second sample packet, business-days, from end to end with a real worker: a package project with a
src/ layout, tests/ with conftest fixtures and a third-party library from its requirements.txt.

The packet is loaded as `load_sample_packet --all` loads it and self-checked by the worker (which builds
its environment first); a candidate downloads it, sets up its environment, works through gate.py and
submits; the worker grades it in that environment.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import Worker, _wait_for
from grading.engine.runner import MARKER, runner_python
from grading.models import Evidence
from grading.tests.corpus import BUSINESS_DAYS
from sessions_app.models import Submission
from shared import environments
from shared.environments import ready_runner
from takehome.actions import do_load_sample_packet
from takehome.models import PacketVersion
from takehome.tests.factories import InvitationFactory, mark_checked

from .conftest import url
from .helpers import download_tree, run_gate
from .test_end_to_end import wait_graded

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_env(worker_env):
    return {**worker_env, "TAKEHOME_MIN_RED_TO_GREEN_S": "0"}  # a script goes red to green in seconds


def test_business_days_is_self_checked_solved_through_the_gate_and_graded_in_its_environment(
        ready, live_server, settings, client, celery_worker_proc, tmp_path):
    settings.SITE_URL = live_server.url
    packet, _ = do_load_sample_packet(folder=BUSINESS_DAYS.spec_dir())  # the self-check goes to the worker
    version = packet.latest_version()
    try:
        _wait_for(lambda: PacketVersion.objects.get(pk=version.pk).state == PacketVersion.PUBLISHED, 240,
                  "the worker's self-check of business-days", interval=0.5)
    except AssertionError:
        raise AssertionError(f"{version.last_check().results}\nworker log:\n{celery_worker_proc.output()[-6000:]}")
    assert version.last_check().results[0]["check_id"] == "environment"

    candidate = InvitationFactory(packet_version=version)
    assert client.post(url("start", candidate), {"confirm": "yes"}).status_code == 302
    tree = download_tree(live_server.url, candidate.raw_token, tmp_path)
    assert (tree / "requirements.txt").read_text() == version.requirements
    assert (tree / "src" / "payterms" / "terms.py").is_file() and (tree / "tests" / "conftest.py").is_file()
    # The candidate's own environment: what `pip install pytest -r requirements.txt` gives, the same pins the
    # server built (its virtualenv, used here outside the sandbox as a candidate's laptop would).
    python = runner_python(ready_runner(version.to_spec()))

    def gate(step: str) -> None:
        result = run_gate(tree, step, python=python)
        assert result.returncode == 0, f"gate.py {step}: {result.stdout}{result.stderr}"

    gate("red")
    (tree / BUSINESS_DAYS.test_path).write_bytes(BUSINESS_DAYS.honest_test)
    (tree / "artifacts" / "prompt.txt").write_bytes(BUSINESS_DAYS.prompt)
    gate("model")
    (tree / "artifacts" / "model.md").write_bytes(BUSINESS_DAYS.model)
    (tree / "src" / "payterms" / "terms.py").write_bytes(BUSINESS_DAYS.spec().solution["src/payterms/terms.py"])
    gate("green")
    (tree / "artifacts" / "refuse.md").write_bytes(BUSINESS_DAYS.refuse)
    gate("submit")

    submission = wait_graded(Submission.objects.get(invitation=candidate).pk, celery_worker_proc)
    assert submission.status == Submission.Status.GRADED
    evidence = Evidence.objects.get(submission=submission).data
    runs = evidence["runs"]
    assert all(runs[name]["as_expected"] for name in runs), {n: (r["outcome"], r["notes"]) for n, r in runs.items()}
    assert runs["tests_vs_decoys"]["caught"] == runs["tests_vs_decoys"]["total"] == 3
    assert runs["reference_vs_submitted"]["passed"] == 9
    assert evidence["red_log"]["genuine"] and evidence["timeline"]["ok"], evidence["timeline"]
    assert "requirements.txt" not in evidence["archive"]["kept"]  # the packet's environment, not the upload's
    assert sorted(f["path"] for f in evidence["diff"]["files"]) == ["src/payterms/terms.py", "tests/test_terms.py"]


def test_a_worker_builds_the_environments_in_use_when_it_starts(worker_env, tmp_path):
    packet, _ = do_load_sample_packet(send_check=False, folder=BUSINESS_DAYS.spec_dir())
    mark_checked(packet.latest_version())
    runners = Path(tempfile.mkdtemp(prefix="th-runners-", dir="/var/tmp"))
    os.chmod(runners, 0o755)
    worker = Worker({**worker_env, "TAKEHOME_RUNNERS_DIR": str(runners)}, tmp_path / "worker.log")
    worker.start()
    try:
        key = environments.runner_key(packet.latest_version().to_spec())
        _wait_for(lambda: (runners / key / "bin" / "python").exists() and (runners / key / MARKER).exists(), 300,
                  "the worker to build business-days' environment at its start", interval=0.5)
    except AssertionError:
        raise AssertionError("worker log:\n" + worker.output()[-6000:])
    finally:
        worker.stop()
        shutil.rmtree(runners, ignore_errors=True)
