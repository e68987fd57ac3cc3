"""The downloaded gate.py, run as a candidate runs it, against a live server (no worker needed)."""

import http.server
import threading

import pytest

from sessions_app.models import GateReceipt, Submission

from .helpers import (
    apply_fix,
    do_honest_work,
    fill_artifacts,
    gate_tree,
    point_gate_at,
    receipts_jsonl,
    run_gate,
    runner_python,
    write_refusal,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tree(live_server, settings, sample_packet, tmp_path):
    return gate_tree(live_server, settings, sample_packet, tmp_path)


def test_the_gate_refuses_out_of_order_locally_then_is_witnessed_step_by_step(tree):
    r = run_gate(tree, "green")
    assert r.returncode != 0 and "Green before model is a skip, not a pass." in r.stderr
    r = run_gate(tree, "model")
    assert r.returncode != 0 and "No red log. The model waits." in r.stderr

    r = run_gate(tree, "red")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Witnessed by the server" in r.stdout and "red captured" in r.stdout
    assert "FAILED" in (tree / "artifacts" / "red.log").read_text()

    r = run_gate(tree, "model")
    assert r.returncode != 0 and "Write artifacts/prompt.txt first." in r.stderr
    do_honest_work(tree)
    r = run_gate(tree, "model")
    assert r.returncode == 0 and "model window open" in r.stdout
    assert float((tree / "artifacts" / "model_allowed.at").read_text()) > 0

    r = run_gate(tree, "green")
    assert r.returncode != 0 and "still red" in r.stderr
    apply_fix(tree)
    write_refusal(tree)
    r = run_gate(tree, "green")
    assert r.returncode == 0 and "green captured" in r.stdout, r.stdout + r.stderr

    # every step refused here went to the server too, as a refused receipt (step 12)
    lines = [x for x in receipts_jsonl(tree) if x.get("accepted") is not False]
    refused = [x for x in receipts_jsonl(tree) if x.get("accepted") is False]
    assert [(x["step"], x["witnessed"]) for x in lines] == [("red", True), ("model", True), ("green", True)]
    assert [(x["step"], x["witnessed"]) for x in refused] == [("green", True), ("model", True), ("model", True),
                                                             ("green", True)]
    stored = GateReceipt.objects.filter(accepted=True).order_by("pk")
    assert [r.pk for r in stored] == [x["receipt"] for x in lines]
    assert stored[1].log_text.startswith("invoices.py uses abs()")  # the model step carries the prompt
    assert "artifacts/red.log" in stored[1].tree_hashes
    assert [r.pk for r in GateReceipt.objects.filter(accepted=False).order_by("pk")] == [x["receipt"] for x in refused]

    r = run_gate(tree, "status")
    assert r.returncode == 0 and "Time left:" in r.stdout and "green" in r.stdout


def test_offline_the_gate_still_works_and_says_the_step_was_not_witnessed(tree):
    gate = tree / "gate.py"
    source = gate.read_text()
    start = source.index('SERVER = "') + len('SERVER = "')
    end = source.index('"', start)
    gate.write_text(source[:start] + "http://127.0.0.1:9" + source[end:])  # nothing listens on port 9
    r = run_gate(tree, "red")
    assert r.returncode == 0 and "Not witnessed: the server could not be reached" in r.stdout
    (entry,) = receipts_jsonl(tree)
    assert entry["witnessed"] is False and "unreachable" in entry["why"]
    assert not GateReceipt.objects.exists()


def test_the_server_refuses_the_model_step_when_red_was_never_witnessed(tree):
    assert run_gate(tree, "red", "--offline").returncode == 0
    do_honest_work(tree)
    r = run_gate(tree, "model")
    assert r.returncode != 0
    assert "The server refused this step: No red run has been witnessed yet" in r.stdout
    assert not (tree / "artifacts" / "model_allowed.at").exists()
    assert not GateReceipt.objects.filter(accepted=True).exists()
    assert run_gate(tree, "red").returncode == 0  # the tests still fail: witness red now
    assert run_gate(tree, "model").returncode == 0


def test_red_never_overwrites_a_red_log_with_a_passing_run_or_after_the_stamp(tree):
    red_log = tree / "artifacts" / "red.log"
    assert run_gate(tree, "red").returncode == 0
    captured = red_log.read_text()
    do_honest_work(tree)
    assert run_gate(tree, "model").returncode == 0

    # Red again once the model window is open: refused, the red log from before the stamp is kept.
    r = run_gate(tree, "red")
    assert r.returncode != 0 and "The model window is already open" in r.stderr
    assert red_log.read_text() == captured

    # Still red at green: the tail of the run is shown, and no green.log is written from a failing run.
    r = run_gate(tree, "green")
    assert r.returncode != 0 and "still red" in r.stderr and "FAILED" in r.stderr
    assert not (tree / "artifacts" / "green.log").exists()

    apply_fix(tree)
    assert run_gate(tree, "green").returncode == 0
    (tree / "artifacts" / "model_allowed.at").unlink()
    r = run_gate(tree, "red")  # the tests pass now: nothing to capture, and red.log stays as it was
    assert r.returncode != 0 and "red.log is green. The gate wants a failure." in r.stderr
    assert "was not changed" in r.stderr and red_log.read_text() == captured
    steps = [(x["step"], x.get("accepted") is not False) for x in receipts_jsonl(tree)]
    assert steps == [("red", True), ("model", True), ("red", False), ("green", False), ("green", True),
                     ("red", False)]


def test_without_pytest_the_gate_says_so_and_sends_nothing(tree, tmp_path):
    import subprocess
    import sys

    # A Python that surely has no pytest: a fresh virtualenv without pip.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    r = run_gate(tree, "red", python=tmp_path / "bare" / "bin" / "python")
    assert r.returncode != 0 and "-m pip install pytest" in r.stderr
    assert not (tree / "artifacts" / "red.log").exists()
    assert not GateReceipt.objects.exists()


def test_without_the_projects_packages_the_gate_says_how_to_install_them(tree):
    # The runner's Python has pytest alone, as a candidate's has before `pip install -r requirements.txt`.
    (tree / "requirements.txt").write_text("python-dateutil==2.9.0.post0\n")
    (tree / "invoices.py").write_text("import dateutil.rrule\n" + (tree / "invoices.py").read_text())
    r = run_gate(tree, "red")
    assert r.returncode != 0
    assert "could not import dateutil" in r.stderr and "-m pip install -r requirements.txt" in r.stderr
    assert not (tree / "artifacts" / "red.log").exists()
    assert not GateReceipt.objects.exists()


def test_status_reads_in_plain_times_and_usage_is_an_error(tree):
    assert run_gate(tree, "red").returncode == 0
    r = run_gate(tree, "status")
    assert r.returncode == 0 and "UTC" in r.stdout and "+00:00" not in r.stdout
    assert "Witnessed by the server:" in r.stdout
    r = run_gate(tree, "rde")
    assert r.returncode == 2 and "python gate.py red" in r.stdout


def test_status_marks_no_upload_reviewed_when_none_was_accepted(tree, tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    from grading.tests.zips import make_zip
    from takehome.models import Invitation

    invitation = Invitation.objects.get()
    data = make_zip(tmp_path / "link.zip", {"w/invoices.py": b"x = 1\n"}, symlinks={"w/link": "/etc/passwd"})
    answer = Client().post(f"/t/{invitation.link_token()}/upload",
                           {"archive": SimpleUploadedFile("w.zip", data.read_bytes())},
                           headers={"X-Takehome-Client": "gate"})
    assert answer.status_code == 201 and answer.json()["status"] == "rejected"
    r = run_gate(tree, "status")
    assert r.returncode == 0 and "(reviewed)" not in r.stdout, r.stdout
    assert "none was accepted, so none is marked 'reviewed'" in r.stdout and "not accepted: The archive" in r.stdout


class QuietHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass


def submit_to(tree, handler):
    """Run `gate.py submit` against a stand-in server (a proxy, a slow server) answering with ``handler``."""
    fill_artifacts(tree)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        point_gate_at(tree, f"http://127.0.0.1:{server.server_port}")
        return run_gate(tree, "submit")
    finally:
        server.shutdown()


def test_submit_too_soon_after_the_last_says_how_long_to_wait(tree, settings):
    settings.UPLOAD_INTERVAL_S = 60
    fill_artifacts(tree)
    first = run_gate(tree, "submit")
    assert first.returncode == 0, first.stdout + first.stderr
    r = run_gate(tree, "submit")
    assert r.returncode == 1
    (line,) = r.stderr.strip().splitlines()  # one plain sentence: no traceback, no JSON
    assert line.startswith("Upload refused: Too soon: this link takes one upload every 60 seconds")
    assert "Wait " in line and " seconds, then upload again. Your earlier uploads are kept." in line
    assert Submission.objects.count() == 1
    status = run_gate(tree, "status").stdout
    assert "reviewers see the one marked 'reviewed'" in status and status.count("(reviewed)") == 1


def test_submit_past_the_total_limit_says_whom_to_write_to(tree, settings):
    settings.UPLOAD_INTERVAL_S = 0
    settings.UPLOAD_MAX_COUNT = 1
    fill_artifacts(tree)
    assert run_gate(tree, "submit").returncode == 0
    r = run_gate(tree, "submit")
    assert r.returncode == 1
    assert r.stderr.strip() == ("Upload refused: This link has taken 1 upload, the most it accepts, so this one was "
                                "not stored. Your uploads are kept, and the latest accepted one is reviewed. If you "
                                "need to upload again, write to the person who invited you.")


def test_a_429_without_a_readable_body_still_reads_as_a_sentence(tree):
    # A proxy in front of the server may answer 429 in HTML: the gate says what to do, not "HTTP 429".
    class Busy(QuietHandler):
        def do_POST(self):
            self.send_response(429)
            self.send_header("Retry-After", "30")
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html><body><h1>429 Too Many Requests</h1></body></html>")

    r = submit_to(tree, Busy)
    assert r.returncode == 1
    assert r.stderr.strip() == ("Upload refused: The server is taking too many requests (HTTP 429). "
                                "Wait 30 seconds, then try again.")


@pytest.mark.parametrize("stored", [True, False])
def test_an_upload_without_an_answer_in_time_is_never_called_failed(tree, stored):
    """The server takes the upload but answers too late: gate.py asks the status whether it arrived."""
    import hashlib
    import json

    uploads = []
    asked = threading.Event()

    class Slow(QuietHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            zip_start = body.index(b"PK\x03\x04")
            uploads.append(hashlib.sha256(body[zip_start:body.rindex(b"\r\n--")]).hexdigest())
            # why an event, not a sleep: this answers nothing until the gate has given up on it and asked for
            # the status, however long the gate's timeout takes on a loaded machine
            asked.wait(120)

        def do_GET(self):
            asked.set()
            found = [{"sha256": digest, "uploaded_at": "2025-01-01T10:00:00+00:00"} for digest in uploads if stored]
            reply = json.dumps({"submissions": found}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    gate = tree / "gate.py"
    # why 5 s: the upload waits this long for an answer that never comes, and the status question asked
    # after it must be answered within it by this process's server thread, which a loaded machine can hold
    gate.write_text(gate.read_text().replace("TIMEOUT_S = 30", "TIMEOUT_S = 5"))
    r = submit_to(tree, Slow)
    said = r.stdout + r.stderr
    assert said.startswith("The server did not answer in time (") and "failed" not in said
    if stored:
        assert r.returncode == 0
        assert f"it has stored an upload with exactly these bytes (sha256 {uploads[0]}" in said
        assert "your work arrived" in said
    else:
        assert r.returncode == 1
        assert "Your upload may have arrived all the same: look at your page" in said


def test_a_step_after_the_deadline_is_refused_and_its_receipt_noted(tree, settings):
    from datetime import timedelta

    from django.utils import timezone

    from takehome.models import Invitation

    Invitation.objects.update(deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 60))
    r = run_gate(tree, "red")
    assert r.returncode == 1
    assert "The server refused this step: Time is up: the deadline was " in r.stdout
    assert "This red step is kept as refused" in r.stdout
    (entry,) = receipts_jsonl(tree)
    kept = GateReceipt.objects.get()
    assert (entry["witnessed"], entry["accepted"], entry["receipt"]) == (True, False, kept.pk)
    assert kept.accepted is False and kept.refusal.startswith("Time is up")


def test_submit_names_the_missing_artifacts_and_uploads_nothing_without_a_yes(tree):
    (tree / "artifacts").mkdir(exist_ok=True)
    (tree / "artifacts" / "model.md").write_text("  \n")
    r = run_gate(tree, "submit")  # stdin is not a terminal: nobody to ask
    assert r.returncode == 1
    assert "Reviewers look for these, and this folder does not have them:" in r.stderr
    assert "artifacts/refuse.md is missing (one unsafe patch and why you would not apply it)" in r.stderr
    assert "artifacts/model.md is empty (the model's raw reply)" in r.stderr
    assert "artifacts/red.log is missing (the tests failing before your fix: run `python gate.py red`)" in r.stderr
    assert "artifacts/green.log is missing" in r.stderr
    assert "Nothing was uploaded." in r.stderr and "python gate.py submit --anyway" in r.stderr
    assert "Traceback" not in r.stderr
    assert not Submission.objects.exists()


def test_submit_anyway_uploads_and_still_says_what_is_missing(tree):
    r = run_gate(tree, "submit", "--anyway")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "artifacts/refuse.md is missing" in r.stderr and "Uploading anyway (--anyway)." in r.stderr
    assert Submission.objects.count() == 1


@pytest.mark.parametrize("answer, uploaded", [(b"y\n", True), (b"\n", False)])
def test_submit_at_a_terminal_asks_before_uploading_an_incomplete_folder(tree, answer, uploaded):
    import os
    import subprocess

    primary, secondary = os.openpty()  # a terminal on stdin, as a candidate has
    try:
        gate = subprocess.Popen([str(runner_python()), "gate.py", "submit"], cwd=tree, stdin=secondary,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={"PATH": os.environ.get("PATH", ""), "HOME": str(tree.parent), "NO_PROXY": "*"})
        os.write(primary, answer)
        out, err = gate.communicate(timeout=300)
    finally:
        os.close(primary)
        os.close(secondary)
    assert "artifacts/refuse.md is missing" in err
    assert (gate.returncode == 0) is uploaded, out + err
    assert Submission.objects.exists() is uploaded


def test_submit_of_a_complete_folder_asks_nothing(tree):
    fill_artifacts(tree)
    r = run_gate(tree, "submit")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Reviewers look for" not in r.stderr and Submission.objects.count() == 1
