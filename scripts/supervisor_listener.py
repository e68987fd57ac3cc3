"""supervisord's event listener for `make run` (see scripts/supervisord.conf).

Prints each program's output in the terminal, every line labelled with the
program's name ("worker | ..."); the unlabelled copy is in var/log/<name>.log.
Says when a program comes up, dies, is restarted or stopped ("system | ...");
supervisord's own log stays in var/log/supervisord.log.

When supervisord gives up on a program (it exited before it was up, again and
again), writes the reason to var/supervisor/gave-up and stops supervisord:
`make run` without its web server or its worker would only look as if it
worked. scripts/run-supervised prints the reason last and exits 1.

The protocol: write READY, read one header line and `len` characters of
payload, answer RESULT; the listener's stdout belongs to supervisord, so
everything meant for a person goes to stderr.
"""

import os
import signal
import sys
from pathlib import Path

WIDTH = len("worker")  # the longest program name, so the bars line up
LISTENER = "listener"  # this program's own name in supervisord.conf
unfinished: dict[str, str] = {}  # per program, a last line still without its newline


def headers(line: str) -> dict[str, str]:
    return dict(word.split(":", 1) for word in line.split())


def next_event() -> tuple[dict[str, str], str]:
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    envelope = headers(sys.stdin.readline())
    return envelope, sys.stdin.read(int(envelope["len"]))


def done() -> None:
    sys.stdout.write("RESULT 2\nOK")
    sys.stdout.flush()


def say(name: str, line: str) -> None:
    sys.stderr.write(f"{name:<{WIDTH}} | {line}\n")
    sys.stderr.flush()


def print_labelled(name: str, text: str) -> None:
    """Print the finished lines of `text` after the program's name; keep an unfinished one."""
    lines = (unfinished.pop(name, "") + text).split("\n")
    if lines[-1]:
        unfinished[name] = lines[-1]
    for line in lines[:-1]:
        say(name, line.rstrip("\r"))


def finish_line(name: str) -> None:
    """A program that ended may have left a last line without its newline."""
    if name in unfinished:
        say(name, unfinished.pop(name))


STATE_WORDS = {
    "PROCESS_STATE_RUNNING": "{name} is up (pid {pid})",
    "PROCESS_STATE_BACKOFF": "{name} exited before it was up (try {tries}); starting it again",
    "PROCESS_STATE_STOPPED": "{name} stopped",
}


def report_state(event: str, fields: dict[str, str]) -> None:
    name = fields["processname"]
    if name == LISTENER:
        return
    if event in ("PROCESS_STATE_EXITED", "PROCESS_STATE_STOPPED", "PROCESS_STATE_BACKOFF"):
        finish_line(name)
    if event == "PROCESS_STATE_EXITED" and fields["expected"] == "0":
        say("system", f"{name} died (pid {fields['pid']}); restarting it")
    elif event == "PROCESS_STATE_FATAL":
        give_up(name)
    elif event in STATE_WORDS:
        say("system", STATE_WORDS[event].format(name=name, pid=fields.get("pid"), tries=fields.get("tries")))


def give_up(name: str) -> None:
    """Say why everything stops, where the launcher will find it, then stop supervisord."""
    var = os.environ["TAKEHOME_VAR_DIR"]
    reason = (
        f"make run stopped: {name} could not be started (it exited again and again before it was up,\n"
        f"so supervisord gave up on it). Its last lines are above, labelled '{name}', and in\n"
        f"{var}/log/{name}.log. Fix the cause, then run make run again."
    )
    Path(var, "supervisor", "gave-up").write_text(reason + "\n")
    say("system", f"{name} could not be started: stopping everything")
    os.kill(os.getppid(), signal.SIGTERM)  # why the parent: an event listener is supervisord's child


def handle(envelope: dict[str, str], payload: str) -> None:
    event = envelope["eventname"]
    if event.startswith("PROCESS_LOG"):
        header, _, text = payload.partition("\n")
        print_labelled(headers(header)["processname"], text)
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
