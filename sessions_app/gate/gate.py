#!/usr/bin/env python3
"""The gate for this take-home. Plain Python 3.8+, standard library only.

    python gate.py red       run the tests; keeps artifacts/red.log (it must fail)
    python gate.py model     needs a red log and artifacts/prompt.txt; opens the model window
    python gate.py green     needs the model window; runs the tests; keeps artifacts/green.log
    python gate.py submit    zips this folder (artifacts included) and uploads it
    python gate.py status    what the server has witnessed, and the time left

Each of red, model and green also sends a receipt to the server: the log's
text, a sha256 of every file here, and your local time. The server keeps the
receipt with its own time and answers with a receipt id, which is added to
artifacts/receipts.jsonl. When the server cannot be reached the step still
works here, and the line in receipts.jsonl says it was not witnessed.
Add --offline to any step to skip the server on purpose.
"""

import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from pathlib import Path

# Filled in for you when you downloaded this folder. Do not share it: it is your link.
SERVER = "__TAKEHOME_SERVER__"
TOKEN = "__TAKEHOME_TOKEN__"
TEST_COMMAND = ["python", "-m", "pytest", "-q"]  # __TAKEHOME_TEST_COMMAND__
MAX_UPLOAD_BYTES = 20971520  # __TAKEHOME_MAX_UPLOAD_BYTES__

ROOT = Path(__file__).resolve().parent
ART = ROOT / "artifacts"
RED = ART / "red.log"
PROMPT = ART / "prompt.txt"
STAMP = ART / "model_allowed.at"
GREEN = ART / "green.log"
RECEIPTS = ART / "receipts.jsonl"
SKIP_DIRS = {".venv", "venv", "env", ".git", ".hg", "__pycache__", ".pytest_cache", ".mypy_cache",
             ".ruff_cache", ".tox", "node_modules", ".idea", ".vscode"}
# Ours, not your work: left out of the upload (gate.py also holds your link).
NOT_SUBMITTED = {"gate.py", "README.txt"}
TIMEOUT_S = 30
LOG_LIMIT = 200000


def local_time():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def tree_files():
    """Every file of the project folder, minus virtualenvs, version control and caches."""
    for folder, dirs, files in os.walk(str(ROOT)):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS
                         and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg")))
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")) or name == ".DS_Store":
                continue
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                yield path


def tree_hashes():
    hashes = {}
    for path in tree_files():
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(65536), b""):
                digest.update(block)
        hashes[path.relative_to(ROOT).as_posix()] = digest.hexdigest()
    return hashes


def run_tests(log):
    command = list(TEST_COMMAND)
    if command and command[0] in ("python", "python3"):
        command[0] = sys.executable
    p = subprocess.run(command, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    log.write_text(p.stdout + p.stderr)
    return p.returncode


def request(method, path, body=None, headers=None):
    """Call the server; returns (status, parsed JSON). Raises OSError when it cannot be reached."""
    req = urllib.request.Request(SERVER + "/t/" + TOKEN + path, data=body, method=method)
    req.add_header("Accept", "application/json")
    req.add_header("X-Takehome-Client", "gate")
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw.decode("utf-8"))
    except ValueError:
        return status, {"message": "The server answered HTTP %s without a readable reply." % status}


def record(entry):
    ART.mkdir(exist_ok=True)
    with RECEIPTS.open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")


def witness(step, log_text, offline):
    """Send the step's receipt. Returns True when the step may go on, False when the server refused."""
    sent_at = local_time()
    entry = {"step": step, "local_time": sent_at}
    if offline:
        record(dict(entry, witnessed=False, why="--offline"))
        print("Not witnessed (--offline): the server did not see this step. Say why in artifacts/notes.md.")
        return True
    body = json.dumps({"log": log_text[-LOG_LIMIT:], "files": tree_hashes(), "local_time": sent_at,
                       "token": TOKEN}).encode("utf-8")
    try:
        status, reply = request("POST", "/gate/" + step, body, {"Content-Type": "application/json"})
    except OSError as exc:
        reason = getattr(exc, "reason", exc)
        record(dict(entry, witnessed=False, why="server unreachable: %s" % reason))
        print("Not witnessed: the server could not be reached (%s). The step still counts here;" % reason)
        print("the line in artifacts/receipts.jsonl says it was not witnessed.")
        return True
    message = reply.get("message", "")
    if status in (200, 201) and reply.get("accepted"):
        record(dict(entry, witnessed=True, receipt=reply.get("receipt"), server_time=reply.get("received_at")))
        print("Witnessed by the server: receipt %s at %s." % (reply.get("receipt"), reply.get("received_at")))
        return True
    if "receipt" in reply:
        record(dict(entry, witnessed=True, accepted=False, receipt=reply.get("receipt"), refusal=message))
    print("The server refused this step: " + (message or "HTTP %s" % status))
    return False


def cmd_red(offline):
    ART.mkdir(exist_ok=True)
    code = run_tests(RED)
    if code == 0:
        sys.exit("red.log is green. The gate wants a failure.")
    if not witness("red", RED.read_text(), offline):
        sys.exit(1)
    print("red captured")


def cmd_model(offline):
    if not RED.exists() or "FAILED" not in RED.read_text():
        sys.exit("No red log. The model waits.")
    if not PROMPT.exists():
        sys.exit("Write artifacts/prompt.txt first.")
    stamp = str(time.time())
    if not witness("model", PROMPT.read_text(), offline):
        sys.exit(1)
    STAMP.write_text(stamp)
    print("model window open")


def cmd_green(offline):
    if not STAMP.exists():
        sys.exit("Green before model is a skip, not a pass.")
    code = run_tests(GREEN)
    if code != 0:
        sys.exit("still red")
    if not witness("green", GREEN.read_text(), offline):
        sys.exit(1)
    print("green captured")


def multipart(field, filename, data):
    boundary = "----takehome-" + uuid.uuid4().hex
    head = ('--%s\r\nContent-Disposition: form-data; name="%s"; filename="%s"\r\n'
            "Content-Type: application/zip\r\n\r\n" % (boundary, field, filename)).encode("utf-8")
    tail = ("\r\n--%s--\r\n" % boundary).encode("utf-8")
    return head + data + tail, "multipart/form-data; boundary=" + boundary


def cmd_submit(offline):
    if offline:
        sys.exit("submit needs the server; upload the zip from your page instead.")
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "submission.zip"
        with zipfile.ZipFile(str(archive), "w", zipfile.ZIP_DEFLATED) as zf:
            for path in tree_files():
                if path.parent == ROOT and path.name in NOT_SUBMITTED:
                    continue
                zf.write(str(path), ROOT.name + "/" + path.relative_to(ROOT).as_posix())
        data = archive.read_bytes()
    if len(data) > MAX_UPLOAD_BYTES:
        sys.exit("The zip is %s bytes, over the limit of %s. Remove large files and try again."
                 % (len(data), MAX_UPLOAD_BYTES))
    body, content_type = multipart("archive", ROOT.name + ".zip", data)
    try:
        status, reply = request("POST", "/upload", body, {"Content-Type": content_type})
    except OSError as exc:
        sys.exit("The server could not be reached (%s). Try again, or upload the zip from your page."
                 % getattr(exc, "reason", exc))
    if status not in (200, 201):
        sys.exit("Upload refused: " + reply.get("message", "HTTP %s" % status))
    print(reply.get("message", "Uploaded."))
    print("sha256 %s (here: %s)" % (reply.get("sha256"), hashlib.sha256(data).hexdigest()))
    print("received at %s (server time)" % reply.get("received_at"))


def cmd_status(offline):
    try:
        status, reply = request("GET", "/status")
    except OSError as exc:
        sys.exit("The server could not be reached (%s)." % getattr(exc, "reason", exc))
    if status != 200:
        sys.exit(reply.get("message", "HTTP %s" % status))
    left = reply.get("seconds_left")
    if left is None:
        print("The clock has not started.")
    else:
        print("Time left: %d min %02d s (deadline %s)" % (left // 60, left % 60, reply.get("deadline")))
    for r in reply.get("receipts", []):
        state = "accepted" if r.get("accepted") else "refused: " + r.get("refusal", "")
        print("  %-6s %s  receipt %s  %s" % (r.get("step"), r.get("received_at"), r.get("id"), state))
    for s in reply.get("submissions", []):
        print("  upload %s  %s  %s" % (s.get("uploaded_at"), s.get("sha256", "")[:12], s.get("status")))


COMMANDS = {"red": cmd_red, "model": cmd_model, "green": cmd_green, "submit": cmd_submit, "status": cmd_status}

if __name__ == "__main__":
    args = sys.argv[1:]
    offline = "--offline" in args
    args = [a for a in args if a != "--offline"]
    cmd = args[0] if args else "help"
    if cmd not in COMMANDS:
        print("usage: python gate.py red|model|green|submit|status [--offline]")
    else:
        COMMANDS[cmd](offline)
