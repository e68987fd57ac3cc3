"""make run's event listener (scripts/supervisor_listener.py), fed supervisord's events as supervisord sends them.

A program is up when it says so, not when it has lived startsecs: on a loaded machine daphne could take longer
than that to load Django and then fail to bind, and supervisord, which had called it running, restarted it for
ever. These runs give the listener exactly the events such a start produces, so no machine's speed decides them.
"""

from __future__ import annotations

import signal
import subprocess
import sys

from conftest import ROOT

LISTENER = ROOT / "scripts" / "supervisor_listener.py"


def state(event: str, name: str, pid: int, **extra: str) -> tuple[str, str]:
    fields = {"processname": name, "groupname": name, "from_state": "STARTING", **extra, "pid": str(pid)}
    return f"PROCESS_STATE_{event}", " ".join(f"{k}:{v}" for k, v in fields.items())


def log(name: str, pid: int, line: str) -> tuple[str, str]:
    return "PROCESS_LOG_STDOUT", f"processname:{name} groupname:{name} pid:{pid} channel:stdout\n{line}\n"


def slow_failed_start(name: str, pid: int, said: str) -> list[tuple[str, str]]:
    """A start that lived past startsecs (supervisord said RUNNING), printed ``said``, then exited."""
    return [state("STARTING", name, pid), log(name, pid, said), state("RUNNING", name, pid),
            state("EXITED", name, pid, from_state="RUNNING", expected="0")]


def feed(tmp_path, events: list[tuple[str, str]]) -> tuple[int, str]:
    """Run the listener under a shell standing in for supervisord, send it ``events`` one by one as supervisord
    does (a header line and the payload after each READY); the shell's exit code and what the listener said."""
    (tmp_path / "supervisor").mkdir(exist_ok=True)
    stream = "".join(f"ver:3.0 server:supervisor serial:{n} pool:listener poolserial:{n} eventname:{event} "
                     f"len:{len(payload)}\n{payload}" for n, (event, payload) in enumerate(events))
    # why a command after it: a shell with one command may exec it, and the listener's parent would be this test
    done = subprocess.run(["sh", "-c", '"$0" "$1"; exit $?', sys.executable, str(LISTENER)], input=stream,
                          capture_output=True, text=True, timeout=60,
                          env={"TAKEHOME_VAR_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    return done.returncode, done.stderr


def test_a_web_server_that_dies_after_startsecs_without_listening_is_given_up_on(tmp_path):
    failure = "CRITICAL daphne.server Listen failure: Couldn't listen on 127.0.0.1:8000: Address already in use."
    events = [event for pid in range(101, 106) for event in slow_failed_start("web", pid, failure)]
    code, said = feed(tmp_path, events)
    for tries in (1, 2, 3):
        assert f"system | web exited before it was up (try {tries}); starting it again" in said, said
    assert "web is up" not in said  # supervisord's RUNNING is not taken for up
    assert "system | web could not be started: stopping everything" in said
    assert said.count("could not be started") == 1
    assert "make run stopped: web could not be started" in (tmp_path / "supervisor" / "gave-up").read_text()
    assert code in (-signal.SIGTERM, 128 + signal.SIGTERM)  # supervisord (here the shell) was told to stop


def test_a_program_that_said_it_is_up_and_died_is_restarted_and_its_count_starts_again(tmp_path):
    listening = "INFO daphne.server Listening on TCP address 127.0.0.1:8000"
    refused = "CRITICAL daphne.server Listen failure: Couldn't listen on 127.0.0.1:8000: Address already in use."
    events = [*slow_failed_start("web", 201, refused), *slow_failed_start("web", 202, refused),
              *slow_failed_start("web", 203, listening),  # up this time, then it died
              *slow_failed_start("web", 204, refused), *slow_failed_start("web", 205, refused),
              *slow_failed_start("worker", 301, "INFO celery.apps.worker worker@host ready."),
              state("STARTING", "redis", 401), state("RUNNING", "redis", 401)]
    code, said = feed(tmp_path, events)
    assert "system | web is up (pid 203)" in said
    assert "system | web died (pid 203); restarting it" in said
    assert said.count("web exited before it was up (try 1)") == 2 and "(try 3)" not in said
    assert "system | worker is up (pid 301)" in said
    assert "system | redis is up (pid 401)" in said  # no line of its own to wait for: up when supervisord says
    assert "could not be started" not in said and not (tmp_path / "supervisor" / "gave-up").exists()
    assert code == 0, said  # the input ended: the listener stops, nobody was told to stop


def test_supervisords_own_give_up_still_stops_everything_once(tmp_path):
    events = [state("STARTING", "beat", 501)]
    for tries in (1, 2, 3):
        events += [log("beat", 501, "ImportError: no module named nowhere"),
                   state("BACKOFF", "beat", 501, tries=str(tries)), state("STARTING", "beat", 501)]
    events.append(state("FATAL", "beat", 501))
    code, said = feed(tmp_path, events)
    assert "system | beat exited before it was up (try 3); starting it again" in said
    assert said.count("system | beat could not be started: stopping everything") == 1
    assert code in (-signal.SIGTERM, 128 + signal.SIGTERM)
