#!/usr/bin/env python3
"""The gate for this take-home. Plain Python 3.8+, standard library only.

    python gate.py red       run the tests; keeps artifacts/red.log (it must fail; refused once the model window is open)
    python gate.py model     needs a red log and artifacts/prompt.txt; opens the model window
    python gate.py ask       after red, when this server provides the model: sends artifacts/prompt.txt
                             to it, prints the reply as it comes and keeps it in artifacts/model.md
                             (the next ask in model-2.md, and so on)
    python gate.py ask "your next question"
                             goes on with the conversation (the model also gets its earlier
                             exchanges); the question is kept in prompt-2.txt beside model-2.md
    python gate.py ask --new starts a new conversation (with a question after it, or prompt.txt)
    python gate.py green     needs the model window (unless this take-home uses no model); runs the
                             tests; keeps artifacts/green.log
    python gate.py submit    zips this folder (artifacts included) and uploads it; it says first
                             which artifacts are missing and asks (--anyway: upload without asking)
    python gate.py status    what the server has witnessed, and the time left

Each of red, model and green also sends a receipt to the server: the log's
text, a sha256 of every file here, and your local time. The server keeps the
receipt with its own time and answers with a receipt id, which is added to
artifacts/receipts.jsonl. When the server cannot be reached the step still
works here, and the line in receipts.jsonl says it was not witnessed.
Add --offline to any step to skip the server on purpose.

A step the gate refuses here (green before model, model before red, still
red...) is sent to the server too, as a refused step; one refused while
offline waits in artifacts/unsent.jsonl and is sent, marked as sent late,
the next time the gate reaches the server.
"""

import datetime
import hashlib
import http.client
import json
import os
import re
import socket
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
LIMITS = "__TAKEHOME_LIMITS__"
# Who provides the model: "provided" (this server, python gate.py ask), "own" (yours) or "none" (no model step).
MODEL_POLICY = "__TAKEHOME_MODEL_POLICY__"

ROOT = Path(__file__).resolve().parent
ART = ROOT / "artifacts"
RED = ART / "red.log"
PROMPT = ART / "prompt.txt"
STAMP = ART / "model_allowed.at"
GREEN = ART / "green.log"
RECEIPTS = ART / "receipts.jsonl"
UNSENT = ART / "unsent.jsonl"  # steps refused here while offline, sent when the server is next reached
SKIP_DIRS = {".venv", "venv", "env", ".git", ".hg", "__pycache__", ".pytest_cache", ".mypy_cache",
             ".ruff_cache", ".tox", "node_modules", ".idea", ".vscode"}
# Ours, not your work: left out of the upload (gate.py also holds your link).
NOT_SUBMITTED = {"gate.py", "README.txt"}
# What the steps above ask you to write under artifacts/, and what each is for (this take-home's list,
# filled in with the rest): submit names any that are missing or empty.
EXPECTED = "__TAKEHOME_EXPECTED__"
TIMEOUT_S = 30
# A busy server (HTTP 503 with Retry-After) stored nothing: wait as it asks and send
# again, this many times, waiting at most LONGEST_WAIT_S each time. A 429 is about
# your own pace (one upload every so often): it is said, not waited out, so a submit
# run twice by mistake never stores two uploads.
RETRIES = 4
LONGEST_WAIT_S = 60
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


def run_tests():
    """Run the packet's test command here; returns (exit code, everything it printed)."""
    command = list(TEST_COMMAND)
    if command and command[0] in ("python", "python3"):
        command[0] = sys.executable
    p = subprocess.run(command, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    return p.returncode, p.stdout + p.stderr


def tests_could_not_run(output):
    """Stop with a sentence to act on when pytest, or a package the project needs, is missing (nothing is
    written or sent)."""
    if "No module named pytest" in output:
        sys.exit("pytest is not installed for this Python (%s). Install it with\n"
                 "    %s -m pip install pytest\n"
                 "then run this step again. Nothing was written or sent." % (sys.executable, sys.executable))
    missing = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", output)
    # why not when a test FAILED: then the tests ran, and the import is the candidate's own business.
    if missing and "FAILED" not in output and (ROOT / "requirements.txt").is_file():
        sys.exit("%s\n\nThe tests could not import %s. The packages this project needs are in requirements.txt;\n"
                 "install them for this Python (%s) with\n"
                 "    %s -m pip install -r requirements.txt\n"
                 "then run this step again. Nothing was written or sent."
                 % (tail(output), missing.group(1), sys.executable, sys.executable))


def tail(output, lines=15):
    """The end of a test run, for the candidate to read in the terminal."""
    return "\n".join(output.rstrip().splitlines()[-lines:])


def server_request(method, path, body=None, headers=None):
    req = urllib.request.Request(SERVER + "/t/" + TOKEN + path, data=body, method=method)
    req.add_header("Accept", "application/json")
    req.add_header("X-Takehome-Client", "gate")
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    return req


def send(method, path, body=None, headers=None):
    """One call to the server: (status, raw body, Retry-After or None). Raises OSError when it cannot be reached."""
    req = server_request(method, path, body, headers)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as response:
            return response.status, response.read(), None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Retry-After") if exc.headers else None


def parse(status, raw, retry_after):
    try:
        reply = json.loads(raw.decode("utf-8"))
        if isinstance(reply, dict):
            return reply
    except ValueError:
        pass
    wait = "%s seconds" % retry_after if retry_after and retry_after.isdigit() else "a minute"
    if status == 429:
        return {"message": "The server is taking too many requests (HTTP 429). Wait %s, then try again." % wait}
    if status == 503:
        return {"message": "The server is busy (HTTP 503). Wait %s, then try again." % wait}
    return {"message": "The server answered HTTP %s without a readable reply." % status}


def request(method, path, body=None, headers=None):
    """Call the server; returns (status, parsed JSON). Raises OSError when it cannot be reached.

    A busy server's answer (503 with Retry-After) means nothing was stored:
    wait as long as it asks and send the same request again, a few times,
    saying so.
    """
    for attempt in range(1, RETRIES + 2):
        status, raw, retry_after = send(method, path, body, headers)
        reply = parse(status, raw, retry_after)
        if status != 503 or not (retry_after or "").isdigit() or attempt > RETRIES:
            return status, reply
        wait = min(int(retry_after), LONGEST_WAIT_S)
        print("%s\nWaiting %d s, then sending again (try %d of %d)..." % (reply.get("message", "The server is busy."),
                                                                      wait, attempt + 1, RETRIES + 1), flush=True)
        time.sleep(wait)
    return status, reply


def record(entry):
    ART.mkdir(exist_ok=True)
    with RECEIPTS.open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")


def not_witnessed(entry, why, said):
    """The step goes on without the server's receipt; receipts.jsonl says why."""
    record(dict(entry, witnessed=False, why=why))
    print("Not witnessed: %s. The step still counts here;" % said)
    print("the line in artifacts/receipts.jsonl says it was not witnessed.")
    return True


def send_refusal(entry, later):
    """Tell the server of a step refused here: its receipt id; False when it answered but did not keep
    it; None when it could not be reached (or stayed busy)."""
    body = json.dumps({"log": "", "files": tree_hashes(), "local_time": entry["local_time"], "token": TOKEN,
                       "refused": entry["refusal"], "kind": entry["kind"], "offline": later}).encode("utf-8")
    try:
        status, reply = request("POST", "/gate/" + entry["step"], body, {"Content-Type": "application/json"})
    except OSError:
        return None
    if status == 503:
        return None
    if status not in (200, 201) or not reply.get("recorded") or reply.get("receipt") is None:
        return False
    return reply["receipt"]


def refuse(step, message, offline, kind="order"):
    """Stop a step refused here, after telling the server (now, or when it is next reached)."""
    entry = {"step": step, "local_time": local_time(), "refusal": message.strip().split("\n")[0], "kind": kind}
    receipt = None if offline else send_refusal(entry, later=False)
    if receipt is False:
        record(dict(entry, witnessed=False, accepted=False, why="the server did not keep it"))
    elif receipt is not None:
        record(dict(entry, witnessed=True, accepted=False, receipt=receipt))
    else:
        why = "--offline" if offline else "server unreachable"
        record(dict(entry, witnessed=False, accepted=False, why=why))
        ART.mkdir(exist_ok=True)
        with UNSENT.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
    sys.exit(message)


def send_unsent():
    """Send the steps refused here while offline, marked as sent late; keep those the server did not take."""
    if not UNSENT.exists():
        return
    kept = []
    for line in UNSENT.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or not all(k in entry for k in ("step", "local_time", "refusal", "kind")):
            continue
        receipt = send_refusal(entry, later=True) if not kept else None
        if receipt is None:
            kept.append(line)  # the server is out of reach again: the rest waits too
        elif receipt is not False:  # False: the server answered and did not keep it; not sent again
            record(dict(entry, witnessed=True, accepted=False, receipt=receipt, sent_late=True))
    if kept:
        UNSENT.write_text("\n".join(kept) + "\n", encoding="utf-8")
    else:
        UNSENT.unlink()
        print("Steps refused while offline were sent to the server.")


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
        return not_witnessed(entry, "server unreachable: %s" % reason, "the server could not be reached (%s)" % reason)
    message = reply.get("message", "")
    if status == 503:
        return not_witnessed(entry, "server busy: %s" % message, "the server stayed busy (%s)" % message)
    if status in (200, 201) and reply.get("accepted"):
        record(dict(entry, witnessed=True, receipt=reply.get("receipt"), server_time=reply.get("received_at")))
        print("Witnessed by the server: receipt %s at %s." % (reply.get("receipt"), when(reply.get("received_at"))))
        return True
    if "receipt" in reply:
        record(dict(entry, witnessed=True, accepted=False, receipt=reply.get("receipt"), refusal=message))
    print("The server refused this step: " + (message or "HTTP %s" % status))
    return False


def cmd_red(offline):
    if STAMP.exists():
        refuse("red", "The model window is already open, so red was captured before it: artifacts/red.log is\n"
               "kept as it is. To watch the tests fail again, run python -m pytest -q.", offline)
    code, output = run_tests()
    tests_could_not_run(output)
    if code == 0:
        refuse("red", "red.log is green. The gate wants a failure.\nThe tests passed, so there is no failure to "
               "capture (artifacts/red.log was not changed).\nMake a test show the bug, then run python gate.py red "
               "again.", offline, kind="outcome")
    if "FAILED" not in output:
        print(tail(output) + "\n", file=sys.stderr)
        refuse("red", "The tests did not run to a failure (red means the test runner printed FAILED):\n"
               "pytest stopped with exit code %s, see the end of its output above. Fix what stops it,\n"
               "then run python gate.py red again. artifacts/red.log was not changed." % code, offline,
               kind="outcome")
    ART.mkdir(exist_ok=True)
    RED.write_text(output)
    if not witness("red", output, offline):
        sys.exit(1)
    print("red captured")


def cmd_model(offline):
    if MODEL_POLICY == "none":
        refuse("model", "This take-home uses no model, so there is no model step.\n"
               "Fix the code, then run python gate.py green.", offline)
    if not RED.exists() or "FAILED" not in RED.read_text():
        refuse("model", "No red log. The model waits.\nRun python gate.py red first.", offline)
    if not PROMPT.exists():
        refuse("model", "Write artifacts/prompt.txt first.\nPut in it the exact prompt you will send to the model.",
               offline)
    stamp = str(time.time())
    if not witness("model", PROMPT.read_text(), offline):
        sys.exit(1)
    STAMP.write_text(stamp)
    print("model window open")


def next_reply_file():
    """artifacts/model.md, or for a later ask the first free model-N.md: earlier replies are kept."""
    path, n = ART / "model.md", 1
    while path.exists():
        n += 1
        path = ART / ("model-%d.md" % n)
    return path


def prompt_file(reply_file):
    """Where the prompt of a reply is kept: prompt.txt beside model.md, prompt-N.txt beside model-N.md."""
    return ART / reply_file.name.replace("model", "prompt", 1).replace(".md", ".txt")


def write_whole(path, text):
    """``text`` in ``path``, whole or not at all: written beside it, then renamed into place."""
    with tempfile.NamedTemporaryFile("wb", dir=str(ART), suffix=".part", delete=False) as f:
        f.write(text.encode("utf-8"))
    os.replace(f.name, str(path))


def server_error(raw, status):
    """The message of the server's OpenAI-shaped error ({"error": {"message": ...}}), else a sentence."""
    try:
        error = json.loads(raw.decode("utf-8")).get("error")
        if isinstance(error, dict) and error.get("message"):
            return error["message"]
    except (ValueError, AttributeError):
        pass
    return "The server answered HTTP %s without a readable reply." % status


def stream_reply(response):
    """Print the streamed reply as it comes; returns its whole text. Raises ValueError when the stream
    breaks or the server sends an error in it."""
    parts = []
    for line in response:
        line = line.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[len("data:"):].strip()
        if data == "[DONE]":
            print(flush=True)
            return "".join(parts)
        try:
            event = json.loads(data)
        except ValueError:
            raise ValueError("The server sent a piece of the reply that cannot be read.")
        if isinstance(event.get("error"), dict):
            raise ValueError(event["error"].get("message") or "The model's reply broke off.")
        for choice in event.get("choices") or []:
            text = (choice.get("delta") or {}).get("content") or ""
            parts.append(text)
            print(text, end="", flush=True)
    raise ValueError("The reply stopped before its end.")


def cmd_ask(offline, words=(), new=False):
    """Ask the model: ``words`` (the command's text) or artifacts/prompt.txt, in the server's conversation.

    The server keeps the conversation: without --new it sends the model the
    earlier exchanges of the last one too, and says how many.
    """
    if offline:
        sys.exit("ask needs the server: it sends your prompt to the model through it.")
    text = " ".join(words)
    if not text:
        if not PROMPT.exists() or not PROMPT.read_text().strip():
            sys.exit("Write artifacts/prompt.txt first.\nPut in it the exact prompt you will send to the model.")
        text = PROMPT.read_text()
    asked_at, sent_at = str(time.time()), local_time()
    body = json.dumps({"messages": [{"role": "user", "content": text}], "stream": True,
                       "conversation": "new" if new else "continue"})
    req = server_request("POST", "/model/v1/chat/completions", body.encode("utf-8"),
                         {"Content-Type": "application/json", "Accept": "text/event-stream"})
    try:
        # why the longer timeout: the model may think for a while before its first word.
        with urllib.request.urlopen(req, timeout=max(TIMEOUT_S, 120)) as response:
            earlier = response.headers.get("X-Takehome-Earlier-Turns") or "0"
            conversation = response.headers.get("X-Takehome-Conversation") or "?"
            if earlier.isdigit() and int(earlier):
                print("(conversation %s: the model also got %s earlier exchange%s of it)"
                      % (conversation, earlier, "" if earlier == "1" else "s"), flush=True)
            reply = stream_reply(response)
    except urllib.error.HTTPError as exc:
        sys.exit(server_error(exc.read(), exc.code) + "\nNothing was written.")
    except urllib.error.URLError as exc:
        sys.exit("The server could not be reached (%s). Nothing was written." % exc.reason)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        sys.exit("\nThe model's reply did not arrive whole (%s). Nothing was saved; run python gate.py ask "
                 "again." % getattr(exc, "reason", exc))
    target = next_reply_file()
    # why a temporary file renamed into place: a reply is either whole in its file or not there at all.
    write_whole(target, reply)
    asked = prompt_file(target)
    if words or not asked.exists():
        write_whole(asked, text)  # the exact prompt beside its reply (prompt.txt is already it when it was read)
    if not STAMP.exists():
        STAMP.write_text(asked_at)
    record({"step": "ask", "local_time": sent_at, "witnessed": True, "reply": "artifacts/" + target.name,
            "prompt": "artifacts/" + asked.name})
    print("The reply is saved in artifacts/%s, its prompt in artifacts/%s." % (target.name, asked.name))


def cmd_green(offline):
    if MODEL_POLICY == "none":
        if not RED.exists():
            refuse("green", "Green before red is a skip, not a pass.\nRun python gate.py red first.", offline)
    elif not STAMP.exists():
        refuse("green", "Green before model is a skip, not a pass.\nRun python gate.py model first.", offline)
    code, output = run_tests()
    tests_could_not_run(output)
    if code != 0:
        print(tail(output) + "\n", file=sys.stderr)
        refuse("green", "still red: the tests do not pass yet (the end of the run is above). Fix the code,\n"
               "then run python gate.py green again. artifacts/green.log is written once they pass.", offline,
               kind="outcome")
    GREEN.write_text(output)
    if not witness("green", output, offline):
        sys.exit(1)
    print("green captured")


def multipart(field, filename, data):
    boundary = "----takehome-" + uuid.uuid4().hex
    head = ('--%s\r\nContent-Disposition: form-data; name="%s"; filename="%s"\r\n'
            "Content-Type: application/zip\r\n\r\n" % (boundary, field, filename)).encode("utf-8")
    tail = ("\r\n--%s--\r\n" % boundary).encode("utf-8")
    return head + data + tail, "multipart/form-data; boundary=" + boundary


def missing_artifacts():
    """The artifacts the steps ask for that are not here, or empty, each with what it should hold."""
    missing = []
    for name, what in EXPECTED:
        path = ART / name
        if not path.is_file():
            missing.append("artifacts/%s is missing (%s)" % (name, what))
        elif not path.read_bytes().strip():
            missing.append("artifacts/%s is empty (%s)" % (name, what))
    return missing


def confirm_incomplete(anyway):
    """Say what is missing before uploading; go on only if the candidate says so (or passed --anyway)."""
    missing = missing_artifacts()
    if not missing:
        return
    print("Reviewers look for these, and this folder does not have them:", file=sys.stderr)
    for line in missing:
        print("  - " + line, file=sys.stderr)
    if anyway:
        print("Uploading anyway (--anyway).", file=sys.stderr)
        return
    stop = ("Nothing was uploaded. Add what is missing and run python gate.py submit again, or run\n"
            "python gate.py submit --anyway to upload the folder as it is.")
    if not sys.stdin.isatty():
        sys.exit(stop)
    try:
        answer = input("Upload it as it is? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        sys.exit(stop)


def cmd_submit(offline, anyway=False):
    if offline:
        sys.exit("submit needs the server; upload the zip from your page instead.")
    confirm_incomplete(anyway)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "submission.zip"
        with zipfile.ZipFile(str(archive), "w", zipfile.ZIP_DEFLATED) as zf:
            for path in tree_files():
                if path.parent == ROOT and path.name in NOT_SUBMITTED:
                    continue
                zf.write(str(path), ROOT.name + "/" + path.relative_to(ROOT).as_posix())
        data = archive.read_bytes()
    if len(data) > MAX_UPLOAD_BYTES:
        sys.exit("The zip is %.1f MB, over the limit of %.0f MB. Remove large files (data, builds) from\n"
                 "this folder and try again.\n%s" % (len(data) / 1048576, MAX_UPLOAD_BYTES / 1048576, LIMITS))
    body, content_type = multipart("archive", ROOT.name + ".zip", data)
    digest = hashlib.sha256(data).hexdigest()
    try:
        status, reply = request("POST", "/upload", body, {"Content-Type": content_type})
    except OSError as exc:
        return after_no_answer(exc, digest)
    if status == 503:
        sys.exit("The upload was not stored: the server stayed busy through %d tries. %s\n"
                 "Run python gate.py submit again in a few minutes, or upload the zip from your page."
                 % (RETRIES + 1, reply.get("message", "")))
    if status not in (200, 201):
        sys.exit("Upload refused: " + reply.get("message", "HTTP %s" % status))
    print(reply.get("message", "Uploaded."))
    print("sha256 %s (here: %s)" % (reply.get("sha256"), digest))
    print("received at %s (server time)" % when(reply.get("received_at")))


def after_no_answer(exc, digest):
    """An upload got no answer: say whether it was sent, stored, or maybe stored; never "failed"."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, (ConnectionRefusedError, socket.gaierror)):
        sys.exit("The server could not be reached (%s), so nothing was sent. Try again, or upload the zip "
                 "from your page." % reason)
    stored = stored_upload(digest)
    if stored is None:
        sys.exit("The server did not answer in time (%s). Your upload may have arrived all the same: look at "
                 "your page, or run python gate.py status in a minute, before sending it again (sha256 %s)."
                 % (reason, digest))
    print("The server did not answer in time (%s), but it has stored an upload with exactly these bytes "
          "(sha256 %s, received at %s server time): your work arrived." % (reason, digest,
                                                                         when(stored.get("uploaded_at"))))


def stored_upload(digest):
    """The server's record of an upload with this sha256, or None (none, or the server cannot say)."""
    try:
        status, reply = request("GET", "/status")
    except OSError:
        return None
    if status != 200:
        return None
    return next((s for s in reply.get("submissions", []) if s.get("sha256") == digest), None)


def when(iso):
    """A server time as the candidate reads it: 2024-05-01 14:03:07 UTC."""
    if not iso:
        return "?"
    try:
        moment = datetime.datetime.fromisoformat(iso)
    except ValueError:
        return iso
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def cmd_status(offline):
    try:
        status, reply = request("GET", "/status")
    except OSError as exc:
        sys.exit("The server could not be reached (%s)." % getattr(exc, "reason", exc))
    if status != 200:
        sys.exit(reply.get("message", "HTTP %s" % status))
    left = reply.get("seconds_left")
    phase = reply.get("phase")
    if left is None:
        print("The clock has not started: press Start on your page.")
    elif phase == "grace":
        print("The deadline (%s) has passed; uploads are still accepted until %s."
              % (when(reply.get("deadline")), when(reply.get("uploads_close_at"))))
    elif phase == "closed":
        print("Time is up: uploads closed at %s." % when(reply.get("uploads_close_at")))
    else:
        print("Time left: %d min %02d s (deadline %s)" % (left // 60, left % 60, when(reply.get("deadline"))))
    steps = [r for r in reply.get("receipts", []) if r.get("step") != "upload"]
    if steps:
        print("Witnessed by the server:")
    for r in steps:
        state = "accepted" if r.get("accepted") else "refused: " + (r.get("refusal") or "")
        print("  %-6s %s  receipt %s  %s" % (r.get("step"), when(r.get("received_at")), r.get("id"), state))
    uploads = reply.get("submissions", [])
    if uploads and any(s.get("reviewed") for s in uploads):
        print("Uploads (reviewers see the one marked 'reviewed': your latest accepted upload):")
    elif uploads:
        print("Uploads (none was accepted, so none is marked 'reviewed': reviewers see only that they were refused):")
    for s in uploads:
        print("  %s  sha256 %s  %s%s" % (when(s.get("uploaded_at")), s.get("sha256", "")[:12], s.get("status"),
                                        "  (reviewed)" if s.get("reviewed") else ""))
        if s.get("refusal"):
            print("      not accepted: " + s["refusal"])


COMMANDS = {"red": cmd_red, "model": cmd_model, "ask": cmd_ask, "green": cmd_green, "submit": cmd_submit, "status": cmd_status}

def usage():
    """The commands, then the upload limits this server set."""
    return __doc__.strip().split("\n\n")[1] + "\n\n" + LIMITS


if __name__ == "__main__":
    args = sys.argv[1:]
    offline = "--offline" in args
    anyway = "--anyway" in args
    new = "--new" in args
    args = [a for a in args if a not in ("--offline", "--anyway", "--new")]
    cmd = args[0] if args else "help"
    if cmd not in COMMANDS:
        print(usage())
        sys.exit(0 if cmd in ("help", "-h", "--help") else 2)
    if not offline:
        send_unsent()  # before the command, so a submit's zip holds the receipts.jsonl that says so
    if cmd == "submit":
        cmd_submit(offline, anyway)
    elif cmd == "ask":
        cmd_ask(offline, args[1:], new)
    else:
        COMMANDS[cmd](offline)
