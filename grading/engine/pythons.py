"""The Python interpreters this server can build runner environments from.

A packet picks a version ("3.11"); the server lists interpreter paths in a
setting. Each is run once to read its version and to see whether a runner
virtualenv can be made from it and used by the sandbox. Plain Python, no Django.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Run by each interpreter: its version, its real file, its standard library's home, and venv's needs.
PROBE = """
import json, os, sys
try:
    import ensurepip, venv
    has_venv = True
except ImportError:
    has_venv = False
print(json.dumps({"version": "%d.%d" % sys.version_info[:2], "executable": os.path.realpath(sys.executable),
                  "base_prefix": sys.base_prefix, "venv": has_venv}))
"""
VERSION = re.compile(r"\d+\.\d+")


class PythonUnavailable(Exception):
    """The packet's Python cannot be had on this server; the message says which ones can."""


@dataclass(frozen=True)
class Interpreter:
    path: Path
    version: str  # "3.11"; "" when it could not be read
    problem: str | None = None  # why it cannot be used, or None


def _closed_folders(path: Path) -> list[Path]:
    """Folders on the way to ``path`` (as written and as resolved) that other users cannot enter."""
    path = Path(os.path.abspath(path))
    folders = {*path.parents, *path.resolve().parents}
    return sorted(folder for folder in folders if not folder.stat().st_mode & stat.S_IXOTH)


def _unreachable(path: Path, base_prefix: str) -> str | None:
    # why: candidate code runs as unprivileged uids: they must traverse every folder on the
    # way to the interpreter and its standard library, and execute the file itself.
    closed = _closed_folders(path) + _closed_folders(Path(base_prefix) / "lib")
    if closed:
        modes = ", ".join(
            f"{folder} (mode {stat.S_IMODE(folder.stat().st_mode):04o})" for folder in sorted(set(closed))
        )
        return (
            f"{path} cannot be run by the sandbox's unprivileged users: they cannot enter {modes}. "
            "Use an interpreter outside private folders, such as /usr/bin/python3."
        )
    if not path.resolve().stat().st_mode & stat.S_IXOTH:
        return f"{path} cannot be run by the sandbox's unprivileged users: it is not executable by others (chmod o+x)."
    return None


def _inspect(path: Path) -> Interpreter:
    if not path.exists():
        return Interpreter(path, "", f"{path} does not exist.")
    if not path.is_file() or not os.access(path, os.X_OK):
        return Interpreter(path, "", f"{path} is not an executable file.")
    try:
        done = subprocess.run([str(path), "-I", "-c", PROBE], capture_output=True, text=True, timeout=30)
        facts = json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return Interpreter(path, "", f"{path} did not run as a Python interpreter.")
    version = facts["version"]
    if not facts["venv"]:
        return Interpreter(
            path, version, f"{path} has no venv module (on Debian: apt-get install python{version}-venv)."
        )
    return Interpreter(path, version, _unreachable(path, facts["base_prefix"]))


def discover(paths: Sequence[str | Path]) -> list[Interpreter]:
    """Each path as an Interpreter: its version, and a problem sentence when it cannot be used."""
    return [_inspect(Path(path)) for path in paths]


def choose(interpreters: Sequence[Interpreter], version: str) -> Interpreter:
    """The first usable interpreter of ``version`` ("" = the first usable one); raises PythonUnavailable."""
    usable = [python for python in interpreters if python.problem is None]
    have = ", ".join(dict.fromkeys(python.version for python in usable)) or "none that can be used"
    if version and not VERSION.fullmatch(version):
        raise PythonUnavailable(f"{version!r} is not a Python version; write it as major.minor, such as 3.11.")
    for python in usable:
        if python.version == version or not version:
            return python
    broken = [python for python in interpreters if python.version == version and python.problem]
    if broken:
        raise PythonUnavailable(f"Python {version} cannot be used on this server: {broken[0].problem}")
    if not version:
        problems = " ".join(python.problem or "" for python in interpreters) or "none is listed."
        raise PythonUnavailable(f"No Python on this server can be used (TAKEHOME_PYTHONS): {problems}")
    raise PythonUnavailable(f"Python {version} is not on this server; it has {have} (TAKEHOME_PYTHONS).")
