"""supervisord's event listener for `make run` (see scripts/supervisord.conf).

Prints each program's output in the terminal, every line labelled with the
program's name ("worker | ..."); the unlabelled copy is in var/log/<name>.log.
Says when a program comes up, dies, is restarted or stopped ("system | ...");
supervisord's own log stays in var/log/supervisord.log.

A program is up when it says so (READY: daphne listening, Celery's worker ready,
beat started, the workspace host serving), not when it has lived supervisord's
startsecs: on a loaded machine a program can take longer than that to fail its
start, and supervisord would then restart it for ever. When a program exits
before it was up more than STARTRETRIES times in a row (or supervisord gives up
on it), writes the reason to var/supervisor/gave-up and stops supervisord:
`make run` without its web server or its worker would only look as if it
worked. scripts/run-supervised prints the reason last and exits 1.

The protocol: write READY, read one header line and `len` characters of
payload, answer RESULT; the listener's stdout belongs to supervisord, so
everything meant for a person goes to stderr.
"""

import os
import re
import signal
import sys
from pathlib import Path

WIDTH = len("worker")  # the longest program name, so the bars line up
LISTENER = "listener"  # this program's own name in supervisord.conf
unfinished: dict[str, str] = {}  # per program, a last line still without its newline
# What each program prints once it is up; a program not named here (Redis) is up when supervisord says so.
READY = {
    "web": re.compile(r"Listening on TCP address "),
    "worker": re.compile(r"\S@\S+ ready\.$"),
    "beat": re.compile(r"beat: Starting\.\.\."),
    "workspaces": re.compile(r"^Serving the "),
}
STARTRETRIES = 3  # as startretries in supervisord.conf
up: dict[str, bool] = {}  # per program: whether its running process has said it is up
pids: dict[str, str] = {}  # per program, the pid of its running process
failed_starts: dict[str, int] = {}  # per program, how many starts in a row ended before it was up
gave_up = False


def headers(line: str) -> dict[str, str]:
    return dict(word.split(":", 1) for word in line.split())


def next_event() -> tuple[dict[str, str], str]:
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)  # supervisord has gone: nothing more will come
    envelope = headers(line)
    return envelope, sys.stdin.read(int(envelope["len"]))


def done() -> None:
    sys.stdout.write("RESULT 2\nOK")
    sys.stdout.flush()


def say(name: str, line: str) -> None:
    sys.stderr.write(f"{name:<{WIDTH}} | {line}\n")
    sys.stderr.flush()


def print_labelled(name: str, text: str, pid: str | None = None) -> None:
    """Print the finished lines of `text` after the program's name; keep an unfinished one."""
    if pid:
        pids[name] = pid
    lines = (unfinished.pop(name, "") + text).split("\n")
    if lines[-1]:
        unfinished[name] = lines[-1]
    for line in lines[:-1]:
        say(name, line.rstrip("\r"))
        if name in READY and not up.get(name, True) and READY[name].search(line.rstrip("\r")):
            came_up(name)


def came_up(name: str) -> None:
    up[name] = True
    failed_starts[name] = 0
    say("system", f"{name} is up (pid {pids.get(name)})")


def failed_start(name: str) -> None:
    """One more start of the program ended before it was up: start it again, or give up on it."""
    failed_starts[name] = failed_starts.get(name, 0) + 1
    if failed_starts[name] > STARTRETRIES:
        give_up(name)
    else:
        say("system", f"{name} exited before it was up (try {failed_starts[name]}); starting it again")


def finish_line(name: str) -> None:
    """A program that ended may have left a last line without its newline."""
    if name in unfinished:
        say(name, unfinished.pop(name))


def report_state(event: str, fields: dict[str, str]) -> None:
    name = fields["processname"]
    if name == LISTENER:
        return
    if event in ("PROCESS_STATE_EXITED", "PROCESS_STATE_STOPPED", "PROCESS_STATE_BACKOFF"):
        finish_line(name)
    if event == "PROCESS_STATE_STARTING":
        up[name] = name not in READY
    elif event == "PROCESS_STATE_RUNNING":
        pids[name] = fields.get("pid", "")
        if name not in READY:
            came_up(name)
    elif event == "PROCESS_STATE_BACKOFF":  # supervisord's own count: it exited within startsecs
        failed_start(name)
    elif event == "PROCESS_STATE_EXITED" and fields["expected"] == "0":
        if up.get(name, True):
            failed_starts[name] = 0
            say("system", f"{name} died (pid {fields['pid']}); restarting it")
        else:  # it lived past startsecs, yet never said it was up
            failed_start(name)
    elif event == "PROCESS_STATE_FATAL":
        give_up(name)
    elif event == "PROCESS_STATE_STOPPED":
        say("system", f"{name} stopped")


def give_up(name: str) -> None:
    """Say why everything stops, where the launcher will find it, then stop supervisord (once)."""
    global gave_up
    if gave_up:
        return
    gave_up = True
    var = os.environ["TAKEHOME_VAR_DIR"]
    reason = (
        f"make run stopped: {name} could not be started (it exited again and again before it was up,\n"
        f"so make run gave up on it). Its last lines are above, labelled '{name}', and in\n"
        f"{var}/log/{name}.log. Fix the cause, then run make run again."
    )
    Path(var, "supervisor", "gave-up").write_text(reason + "\n")
    say("system", f"{name} could not be started: stopping everything")
    os.kill(os.getppid(), signal.SIGTERM)  # why the parent: an event listener is supervisord's child


def handle(envelope: dict[str, str], payload: str) -> None:
    event = envelope["eventname"]
    if event.startswith("PROCESS_LOG"):
        header, _, text = payload.partition("\n")
        fields = headers(header)
        print_labelled(fields["processname"], text, fields.get("pid"))
    elif event.startswith("PROCESS_STATE"):
        report_state(event, headers(payload))


def main() -> None:
    # why newline="": `len` counts the characters sent; turning \r\n into \n would miscount.
    sys.stdin.reconfigure(encoding="utf-8", newline="")
    sys.stderr.reconfigure(encoding="utf-8", errors="replace")
    while True:
        handle(*next_event())
        done()


if __name__ == "__main__":
    main()
