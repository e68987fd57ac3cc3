"""The dedicated runner virtualenv that candidates' tests run in.

Built from Debian's ``/usr/bin/python3`` (never the pyenv interpreter under
``/root``: mode 0700, so the sandbox's unprivileged uid could not execute it),
under a world-readable folder, with only the pinned pytest. Plain Python, no
Django: ``python -m grading.runner PATH`` builds it for ``make``, and the
worker calls :func:`ensure_runner` on start.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

RUNNER_REQUIREMENTS = Path(__file__).with_name("runner-requirements.txt")
SYSTEM_PYTHON = Path("/usr/bin/python3")
MARKER = ".takehome-runner"


class RunnerUnavailable(Exception):
    """The runner virtualenv cannot be built or used; the message says how to fix it."""


def runner_python(runner_dir: Path) -> Path:
    """The interpreter inside the runner virtualenv."""
    return Path(runner_dir) / "bin" / "python"


def _requirements_hash() -> str:
    return hashlib.sha256(RUNNER_REQUIREMENTS.read_bytes()).hexdigest()


def untraversable_parents(path: Path) -> list[Path]:
    """Folders above ``path`` that other users cannot enter (missing x bit for 'other')."""
    blocked = []
    for parent in [Path(path).resolve(), *Path(path).resolve().parents]:
        if parent.exists() and not parent.stat().st_mode & stat.S_IXOTH:
            blocked.append(parent)
    return blocked


def sandbox_home(var_dir: Path) -> Path:
    """Where the runner virtualenv and scratch space go by default: ``var_dir`` itself
    when every folder above it lets other users through, else a folder of its own
    under /var/tmp (a checkout under /root, mode 0700, cannot hold them: candidate
    code runs as unprivileged uids that must reach both).
    """
    var_dir = Path(var_dir).resolve()
    if not untraversable_parents(var_dir):
        return var_dir
    digest = hashlib.sha256(str(var_dir).encode()).hexdigest()[:12]
    return Path("/var/tmp") / f"takehome-{digest}"


def _make_world_readable(root: Path) -> None:
    # why: the sandbox runs as an unprivileged uid that must read and execute
    # the venv, but must never be able to change it (no write bits for others).
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            mode = os.stat(path).st_mode
            exec_bits = 0o755 if mode & stat.S_IXUSR else 0o644
            os.chmod(path, exec_bits)


def _is_current(runner_dir: Path, wanted: str) -> bool:
    marker = runner_dir / MARKER
    return (
        marker.is_file()
        and marker.read_text().strip() == wanted
        and runner_python(runner_dir).exists()
    )


def _build(runner_dir: Path, wanted: str) -> None:
    if not SYSTEM_PYTHON.exists():
        raise RunnerUnavailable(
            f"{SYSTEM_PYTHON} is missing: install it with 'apt-get install python3 python3-venv'"
        )
    staging = runner_dir.with_name(runner_dir.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    # Build beside the target, then swap: a half-built venv is never visible.
    steps = [
        [str(SYSTEM_PYTHON), "-m", "venv", str(staging)],
        [
            str(runner_python(staging)), "-m", "pip", "install", "--quiet",
            "--disable-pip-version-check", "--no-cache-dir",
            "-r", str(RUNNER_REQUIREMENTS),
        ],
    ]
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            hint = ""
            if "ensurepip" in done.stderr or "venv" in argv[2:3]:
                hint = " (is python3-venv installed? 'apt-get install python3-venv')"
            raise RunnerUnavailable(
                f"building the runner venv failed at {' '.join(argv[:4])}{hint}:\n"
                f"{done.stderr.strip()[-2000:]}"
            )
    (staging / MARKER).write_text(wanted + "\n")
    _make_world_readable(staging)
    shutil.rmtree(runner_dir, ignore_errors=True)
    # Renaming a venv is safe for our use: pyvenv.cfg only names the base
    # interpreter, and the sandbox calls bin/python, never the bin/ scripts
    # whose shebangs still name the staging path.
    staging.rename(runner_dir)


def ensure_runner(runner_dir: Path) -> Path:
    """Build the runner venv at ``runner_dir`` unless it is already current; return its path.

    Idempotent and safe to call from several workers at once (a file lock
    serialises the build). A change to ``runner-requirements.txt`` rebuilds it.
    """
    runner_dir = Path(runner_dir).resolve()
    runner_dir.parent.mkdir(parents=True, exist_ok=True)
    blocked = untraversable_parents(runner_dir.parent)
    if blocked:
        raise RunnerUnavailable(
            f"the sandbox uid cannot reach {runner_dir}: {', '.join(map(str, blocked))} "
            "must be traversable by others (chmod o+x, or choose another runner folder)"
        )
    wanted = _requirements_hash()
    if _is_current(runner_dir, wanted):
        return runner_dir
    lock_path = runner_dir.with_name(runner_dir.name + ".lock")
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _is_current(runner_dir, wanted):  # another worker may have built it meanwhile
            _build(runner_dir, wanted)
    return runner_dir


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m grading.runner",
        description="Build (or check) the sandbox's runner virtualenv: pinned pytest, from Debian's "
        "python3, world-readable. Does nothing if it is already current.",
    )
    parser.add_argument("runner_dir", type=Path, help="where the virtualenv goes, e.g. var/runner")
    args = parser.parse_args(argv)
    try:
        path = ensure_runner(args.runner_dir)
    except RunnerUnavailable as exc:
        print(f"runner: {exc}", file=sys.stderr)
        return 1
    print(f"runner ready: {runner_python(path)}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
