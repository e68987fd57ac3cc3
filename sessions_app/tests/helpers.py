"""Shared pieces for the candidate-side tests: honest trees, zips, real pytest logs."""

from __future__ import annotations

import functools
import hashlib
import importlib
import io
import json
import multiprocessing
import os
import signal
import zipfile
from contextlib import contextmanager
from pathlib import Path

LOGS = Path(__file__).resolve().parents[2] / "grading" / "tests" / "logs"
RED_LOG = (LOGS / "pytest9_gate_red.log").read_text()
GREEN_LOG = (LOGS / "pytest9_green_q.log").read_text()
FORGED_RED = "FAILED\nthe test failed, honestly\n"

HONEST_TEST = b'''from pathlib import Path

import invoices

FIXTURE = Path(__file__).parent / "sample.csv"


def test_refunds_are_negative_cents_and_lower_the_total():
    # 1000 + 500 + (-200): a refund must reduce the sum
    assert invoices.total(FIXTURE) == 1300
'''
REFUSAL = b"The model offered to drop the refund rows so the total looks right. Dropping rows changes revenue; it does not fix the sum.\n"


def fix_invoices(source: bytes) -> bytes:
    """The honest three-line fix: take abs() out of the production path."""
    return source.replace(b'abs(int(row["cents"]))', b'int(row["cents"])')


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def honest_zip(prefix: str = "refund-sum/") -> bytes:
    """A finished honest submission of the sample packet, artifacts included."""
    from takehome.actions import sample_content

    fixture = dict(sample_content()[2].fixture)
    files = {
        "invoices.py": fix_invoices(fixture["invoices.py"]),
        "test_invoices.py": HONEST_TEST,
        "sample.csv": fixture["sample.csv"],
        "artifacts/red.log": RED_LOG.encode(),
        "artifacts/prompt.txt": b"invoices.py uses abs() on cents. Refunds are negative. Propose a minimal patch.\n",
        "artifacts/model_allowed.at": b"1700000000.0",
        "artifacts/green.log": GREEN_LOG.encode(),
        "artifacts/refuse.md": REFUSAL,
    }
    return zip_bytes({prefix + name: data for name, data in files.items()})


def slow_zip() -> bytes:
    """An honest submission whose own tests take a few seconds, so the worker can be caught grading."""
    data = io.BytesIO(honest_zip())
    out = io.BytesIO()
    with zipfile.ZipFile(data) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        dst.writestr("refund-sum/test_slow.py", "import time\n\n\ndef test_takes_a_while():\n    time.sleep(4)\n")
    return out.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def receipt(log: str = "", files: dict[str, str] | None = None, **extra) -> str:
    """A gate step's JSON body, as gate.py sends it."""
    files = files if files is not None else {"invoices.py": sha(b"x"), "artifacts/prompt.txt": sha(b"p")}
    return json.dumps({"log": log, "files": files, "local_time": "2025-01-01T10:00:00+01:00", **extra})


# --- driving the downloaded gate.py as a candidate would -------------------------------

def runner_python() -> Path:
    """A plain Python with pytest and nothing of ours (the sandbox's runner venv, used unsandboxed)."""
    from django.conf import settings

    from grading.engine.runner import runner_python as python_in

    return python_in(settings.GRADING_RUNNER_DIR)


def download_tree(base_url: str, token: str, dest: Path) -> Path:
    """GET the download over HTTP and unzip it; returns the project folder."""
    import urllib.request

    with urllib.request.urlopen(f"{base_url}/t/{token}/download", timeout=30) as response:
        data = response.read()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        zf.extractall(dest)
    (folder,) = [p for p in dest.iterdir() if p.is_dir()]
    return folder


def run_gate(tree: Path, *args: str, python: Path | None = None):
    """Run gate.py as a subprocess with a clean environment (no Django, no pytest plugins of ours)."""
    import os
    import subprocess

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tree.parent), "LANG": "C.UTF-8",
           "NO_PROXY": "*"}
    # stdin from /dev/null, as in a script: a question gate.py would ask is answered "no".
    return subprocess.run([str(python or runner_python()), "gate.py", *args], cwd=tree, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)


def point_gate_at(tree: Path, server: str) -> None:
    """Make the downloaded gate.py talk to another server."""
    gate = tree / "gate.py"
    source = gate.read_text()
    start = source.index('SERVER = "') + len('SERVER = "')
    gate.write_text(source[:start] + server + source[source.index('"', start):])


def do_honest_work(tree: Path) -> None:
    """After red: name the bug in a test, write the prompt. (The fix comes after `model`.)"""
    (tree / "test_invoices.py").write_bytes(HONEST_TEST.replace(b"== 1300", b"== 1300  # was 1700 with abs()"))
    (tree / "artifacts" / "prompt.txt").write_text(
        "invoices.py uses abs() on cents. Refunds are negative.\n"
        "test_invoices.py should expect 1300 for sample.csv.\n"
        "Propose a minimal patch. Do not add new files. Do not drop rows. Do not pull in pandas.\n")


def apply_fix(tree: Path) -> None:
    (tree / "artifacts" / "model.md").write_text("Remove abs() from the sum.\n")
    (tree / "invoices.py").write_bytes(fix_invoices((tree / "invoices.py").read_bytes()))


def write_refusal(tree: Path) -> None:
    (tree / "artifacts" / "refuse.md").write_bytes(REFUSAL)


def fill_artifacts(tree: Path) -> None:
    """Every artifact the steps ask for, so that submit has nothing to ask about."""
    (tree / "artifacts").mkdir(exist_ok=True)
    for name in ("red.log", "prompt.txt", "model_allowed.at", "model.md", "green.log", "refuse.md"):
        (tree / "artifacts" / name).write_text("x\n")


def receipts_jsonl(tree: Path) -> list[dict]:
    path = tree / "artifacts" / "receipts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def gate_tree(live_server, settings, sample_packet, tmp_path: Path) -> Path:
    """A started candidate's downloaded tree, its gate.py talking to the live server."""
    from conftest import require
    from sessions_app.actions import do_start_session
    from takehome.tests.factories import InvitationFactory

    require(runner_python().exists(), f"{runner_python()} is missing: run `make runner`")
    settings.SITE_URL = live_server.url
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    return download_tree(live_server.url, invitation.raw_token, tmp_path)


def received_long_ago(submission_id: int, seconds: float = 3600) -> None:
    """Make a received upload look ``seconds`` old, so the sweep (TAKEHOME_STALE_RECEIVED_S) takes it now.

    why not a sleep past the threshold: a fixed wait is a guess about the clock; moving the time the status
    last changed says the same at once.
    """
    from datetime import timedelta

    from django.db.models import F

    from sessions_app.models import Submission

    changed = Submission.objects.filter(pk=submission_id, status=Submission.Status.RECEIVED).update(
        status_changed_at=F("status_changed_at") - timedelta(seconds=seconds))
    assert changed == 1, "the upload is no longer waiting as received"


def asgi_application():
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    from takehome.asgi import application

    return ASGIStaticFilesHandler(application)


def _start_clean_after_fork(dumped) -> None:
    """In the forked daphne, before it serves: nothing of the test process's threads is waited on.

    why: a fork copies the test process's objects but only the forking thread. asgiref's executors (used by
    every database call of a consumer) keep a record of the one thread they had, which did not come along,
    and a copy that believes it has an idle thread never runs what it is given; a lock another thread held
    at the fork stays held. Each is made anew here. The database connections this thread inherited are left
    alone: closing them would close the test process's own.
    """
    import faulthandler
    import sys
    import weakref
    from concurrent.futures import ThreadPoolExecutor

    from asgiref.local import Local
    from asgiref.sync import AsyncToSync, SyncToAsync

    SyncToAsync.single_thread_executor = ThreadPoolExecutor(max_workers=1)
    SyncToAsync.context_to_thread_executor = weakref.WeakKeyDictionary()
    AsyncToSync.executors = Local()
    AsyncToSync.loop_thread_executors = {}
    AsyncToSync.context_to_thread_executor = weakref.WeakKeyDictionary()
    # should it hang all the same, daphne_serving has it write where each thread waits to the test's captured
    # stderr (then set ``dumped``). why on a signal when a test fails, not on a timer: a timed dump also fired
    # in long tests that were going well, reading the other threads' frames while they ran, and once ended
    # daphne in the middle of a test's requests.
    def dump(signum, frame):
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        dumped.set()

    signal.signal(signal.SIGUSR1, dump)


# Twisted, Autobahn and daphne's protocols, imported once in the test process: each forked daphne finds them loaded,
# where it imported them anew (a third of a CPU-second a fork). Not daphne.server: it installs Twisted's reactor
# as it is imported, which the fork does for itself (DaphneProcess installs a new one, then imports it again).
DAPHNE_MODULES = ("twisted.internet.asyncioreactor", "twisted.internet.endpoints", "twisted.logger", "twisted.web.http",
                  "autobahn.twisted.websocket", "daphne.http_protocol", "daphne.ws_protocol", "daphne.endpoints")


@contextmanager
def daphne_serving(settings, monkeypatch):
    """daphne serving takehome.asgi in a forked process (the workspace settings go with it); yields its URL."""
    from daphne.testing import DaphneProcess

    from conftest import free_port
    from sessions_app.hosted import consumers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setattr(consumers, "RECHECK_S", 1.0)
    for module in DAPHNE_MODULES:
        importlib.import_module(module)
    dumped = multiprocessing.Event()
    server = DaphneProcess("127.0.0.1", asgi_application, port=free_port(),
                           setup=functools.partial(_start_clean_after_fork, dumped))
    server.daemon = True
    server.start()
    try:
        assert server.ready.wait(timeout=20), "daphne did not start"
        yield f"http://127.0.0.1:{server.port.value}"
    except BaseException:
        if server.is_alive():  # the test failed with daphne up: where its threads are (_start_clean_after_fork)
            os.kill(server.pid, signal.SIGUSR1)
            dumped.wait(10)  # why: the stop below would end it before it wrote
        raise
    finally:
        server.terminate()
        server.join(timeout=10)


@contextmanager
def gate_host_in_a_thread():
    """serve_workspaces' GateHost on its own event loop in a thread (sweeping never, finding sockets at once).

    Yields the host with ``host.stop()``, which ends the loop and waits for it; leaving stops it too."""
    import asyncio
    import threading

    from sessions_app.hosted import gate_host

    host = gate_host.GateHost(sweep_every_s=3600, discover_every_s=0.1)
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete, args=(host.run(stop),), daemon=True)
    thread.start()

    def end() -> None:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)

    host.stop = end
    try:
        yield host
    finally:
        end()
        loop.close()
