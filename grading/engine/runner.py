"""The runner virtualenvs that candidates' tests run in.

The default one (:func:`ensure_runner`) is built from Debian's ``/usr/bin/python3``
(never the pyenv interpreter under ``/root``: mode 0700, so the sandbox's
unprivileged uid could not execute it), under a world-readable folder, with only
the pinned pytest: ``python -m grading.engine.runner PATH`` builds it for ``make``, and
the worker calls it on start. A packet that declares requirements or a Python
gets its own (:func:`ensure_env`), one per (Python, requirements), shared by
every packet that asks for the same. Plain Python, no Django.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .pythons import Interpreter
from .requirements import Pin, RequirementsRefused, normalised, pins

RUNNER_REQUIREMENTS = Path(__file__).with_name("runner-requirements.txt")
SYSTEM_PYTHON = Path("/usr/bin/python3")
MARKER = ".takehome-runner"
ENV_KEY = re.compile(r"py\d+\.\d+-[0-9a-f]{20}")
PIP_OUTPUT_KEPT = 1500


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
    return marker.is_file() and marker.read_text().strip() == wanted and runner_python(runner_dir).exists()


def _check_reachable(folder: Path) -> None:
    blocked = untraversable_parents(folder)
    if blocked:
        raise RunnerUnavailable(
            f"the sandbox uid cannot reach {folder}: {', '.join(map(str, blocked))} "
            "must be traversable by others (chmod o+x, or choose another runner folder)"
        )


@contextmanager
def _lock(path: Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on the file ``path``; yields False at once if ``wait`` is off and another holds it."""
    while True:
        with open(path, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            # why: prune_envs deletes a lock file while holding it; one we waited on may be gone.
            try:
                same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                yield True
                return


def _build_once(target: Path, wanted: str, build: Callable[[Path], None]) -> Path:
    """Build ``target`` unless it is current, once however many callers ask at the same time.

    The build happens in ``<target>.building`` under ``<target>.lock``; the marker is
    written last, then the tree made world-readable, then renamed into place, so a
    half-built folder is never at ``target``.
    """
    if _is_current(target, wanted):
        return target
    with _lock(target.with_name(target.name + ".lock")):
        if _is_current(target, wanted):  # another worker built it meanwhile
            return target
        staging = target.with_name(target.name + ".building")
        shutil.rmtree(staging, ignore_errors=True)  # left by a build that was killed
        try:
            build(staging)
            _compile(staging)
            (staging / MARKER).write_text(wanted + "\n")
            _make_world_readable(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        shutil.rmtree(target, ignore_errors=True)
        # Renaming a venv is safe for our use: pyvenv.cfg only names the base
        # interpreter, and the sandbox calls bin/python, never the bin/ scripts
        # whose shebangs still name the staging path.
        staging.rename(target)
    return target


# What a build leaves out of this process's environment: the worker's own PYTHONPATH or PYTHONHOME must not
# leak into the venv's interpreter, and nothing may send the environment's bytecode elsewhere or keep it
# from being written (see _compile).
NOT_FOR_BUILDS = ("PYTHONPATH", "PYTHONHOME", "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE", "PIP_NO_COMPILE")


def _run(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if name not in NOT_FOR_BUILDS}
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=max(timeout_s, 1))
    except subprocess.TimeoutExpired:
        raise RunnerUnavailable(
            f"building a runner environment took longer than its time limit at "
            f"{' '.join(argv[:4])}; try again, or raise the limit"
        ) from None


def _make_venv(python: Path, staging: Path, timeout_s: float = 300) -> None:
    if not python.exists():
        raise RunnerUnavailable(f"{python} is missing: install it with 'apt-get install python3 python3-venv'")
    argv = [str(python), "-m", "venv", str(staging)]
    done = _run(argv, timeout_s)
    if done.returncode != 0:
        raise RunnerUnavailable(
            f"building the runner venv failed at {' '.join(argv[:4])} (is python3-venv installed? "
            f"'apt-get install python3-venv'):\n{done.stderr.strip()[-2000:]}"
        )


def _compile(venv: Path, timeout_s: float = 300) -> None:
    """Write the bytecode of everything installed in ``venv``, beside each module, by the venv's own Python.

    why: the sandbox mounts an environment read-only and its Python writes no bytecode, so what the
    environment lacks is compiled again at every run: a pytest run without its bytecode costs about four
    times the CPU of one with it. pip writes it as it installs, but not where PYTHONPYCACHEPREFIX points it
    elsewhere (make test sets it) or where pip's configuration says no-compile; this makes sure. What is
    compiled already is only looked at; a file that does not compile is left as it is, as pip leaves it.
    """
    _run([str(runner_python(venv)), "-m", "compileall", "-q", str(venv / "lib")], timeout_s)


def _build_runner(staging: Path) -> None:
    _make_venv(SYSTEM_PYTHON, staging)
    # fmt: off
    argv = [
        str(runner_python(staging)), "-m", "pip", "install", "--quiet",
        "--disable-pip-version-check", "--no-cache-dir",
        "-r", str(RUNNER_REQUIREMENTS),
    ]
    # fmt: on
    done = _run(argv, 900)
    if done.returncode != 0:
        raise RunnerUnavailable(
            f"building the runner venv failed at {' '.join(argv[:4])}:\n{done.stderr.strip()[-2000:]}"
        )


def ensure_runner(runner_dir: Path) -> Path:
    """Build the runner venv at ``runner_dir`` unless it is already current; return its path.

    Idempotent and safe to call from several workers at once (a file lock
    serialises the build). A change to ``runner-requirements.txt`` rebuilds it.
    """
    runner_dir = Path(runner_dir).resolve()
    runner_dir.parent.mkdir(parents=True, exist_ok=True)
    _check_reachable(runner_dir.parent)
    return _build_once(runner_dir, _requirements_hash(), _build_runner)


def env_key(python_version: str, requirements: str) -> str:
    """The folder name of the environment for this Python and these requirements, e.g. ``py3.11-3f2a...``.

    Stable across comments, spacing and line order; changes with the runner's own
    pins. Raises RequirementsRefused for text that is not acceptable.
    """
    digest = hashlib.sha256()
    for part in (python_version, normalised(requirements), RUNNER_REQUIREMENTS.read_text()):
        digest.update(part.encode() + b"\0")
    return f"py{python_version}-{digest.hexdigest()[:20]}"


def env_ready(root: Path, python_version: str, requirements: str) -> Path | None:
    """The environment's folder under ``root`` if it is built and complete, else None."""
    key = env_key(python_version, requirements)
    target = Path(root) / key
    return target if _is_current(target, key) else None


class _Pip:
    """pip as run inside one environment being built, with the server's index options."""

    def __init__(self, venv: Path, cache: Path, index_url: str | None, isolated: bool, deadline: float):
        self.python = str(runner_python(venv))
        self.options = ["--disable-pip-version-check", "--no-input", "--cache-dir", str(cache)]
        self.options += ["--isolated"] * isolated
        self.index = ["--index-url", index_url] if index_url else []
        self.deadline = deadline

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        return _run([self.python, "-m", "pip", *args, *self.options], self.deadline - time.monotonic())

    def versions(self, name: str) -> list[str]:
        """Every version of ``name`` on the index, wheel or not, newest first ([] if it has none)."""
        found = re.search(
            r"^Available versions: (.+)$", self("index", "versions", "--pre", *self.index, name).stdout, re.M
        )
        return found.group(1).split(", ") if found else []


def _missing(output: str, pip: _Pip, python_version: str) -> tuple[str, str] | None:
    """The package pip found nothing for, and why it cannot be had; None if pip said no such thing."""
    found = re.search(r"Could not find a version that satisfies the requirement (\S+)", output)
    if not found:
        return None
    try:
        wanted = Requirement(found.group(1))
    except InvalidRequirement:
        return None
    name = wanted.name
    return canonicalize_name(name), _why_missing(output, pip, python_version, wanted)


def _why_missing(output: str, pip: _Pip, python_version: str, wanted: Requirement) -> str:
    name = wanted.name
    ignored = re.search(r"require a different python version: (.+)$", output, re.M)
    for version, needs in re.findall(r"(\S+) Requires-Python ([^;]+)", ignored.group(1) if ignored else ""):
        if wanted.specifier.contains(version, prereleases=True):
            return f"{name} {version} needs Python {needs.strip()}, and this packet uses Python {python_version}."
    available = pip.versions(name)
    if not available:
        return f"{name} is not on the package index: check the name's spelling."
    matching = [version for version in available if wanted.specifier.contains(version, prereleases=True)]
    if not matching:
        return (
            f"{name} has no version {str(wanted.specifier).removeprefix('==')} on the package index; "
            f"its latest are {', '.join(available[:5])}."
        )
    return (
        f"{name} {matching[0]} has no wheel for Python {python_version} on this platform, and the "
        "server never builds packages from source: choose a version that publishes a wheel."
    )


def _indented_after(output: str, heading: str) -> list[str]:
    """The indented lines that follow ``heading`` in pip's output."""
    lines = output.split(heading, 1)[1].splitlines()[1:] if heading in output else []
    block = []
    for line in lines:
        if line.strip() and not line.startswith(" "):
            break
        if line.strip():
            block.append(line.strip())
    return block


def _unhashed(line: str) -> str:
    """pip's line for a requirement without a pin or hash, less its download URL and temporary paths."""
    if "--hash=" in line:  # pip wrote the line to add: "name==version --hash=sha256:..."
        return line
    parent = re.search(r"\(from ([^)\s]+?)(?:->|\))", line)
    return line.split()[0] + (f" (needed by {parent.group(1)})" if parent else "")


def _explain_pip_failure(output: str, pip: _Pip, python_version: str, ours: set[str]) -> Exception:
    """The exception for a failed pip install: RequirementsRefused naming the package when the
    packet is at fault, RunnerUnavailable when the machine or the index is.

    ``ours`` holds the runner's own pin names: pip missing one of those is the server's problem.
    """
    if re.search(
        r"NewConnectionError|Failed to establish a new connection|ConnectTimeoutError|"
        r"Temporary failure in name resolution|ProxyError|SSLError",
        output,
    ):
        return RunnerUnavailable(
            "the package index could not be reached, so nothing could be installed; "
            f"try again later:\n{output.strip()[-PIP_OUTPUT_KEPT:]}"
        )
    if "No space left on device" in output:
        return RunnerUnavailable("the disk is full: no runner environment can be built until space is freed")
    if "DO NOT MATCH THE HASHES" in output:
        found = re.findall(r"^\s+(\S+)==(\S+) from .*\n\s+Expected sha256 \S+\n\s+Got\s+(\S+)", output, re.M)
        named = "; ".join(f"{name} {version} (the index has sha256:{got})" for name, version, got in found)
        return RequirementsRefused(
            f"These downloads do not match the --hash given for them: {named or output[-PIP_OUTPUT_KEPT:]}. "
            "Fix the hash or the version."
        )
    for heading in ("Hashes are required in --require-hashes mode", "all requirements must have their versions pinned"):
        missing = [_unhashed(line) for line in _indented_after(output, heading)]
        if missing:
            return RequirementsRefused(
                "In hash-checking mode every package installed, dependencies too, needs "
                f"a line name==version --hash=...; these have none: {'; '.join(missing)}."
            )
    too_new = re.search(r"Package '(\S+)' requires a different Python: \S+ not in '([^']+)'", output)
    if too_new:
        return RequirementsRefused(
            f"{too_new.group(1)} needs Python {too_new.group(2)}, and this packet uses Python {python_version}."
        )
    causes = _indented_after(output, "The conflict is caused by:")
    if causes:
        return RequirementsRefused(
            "The requirements conflict with each other or with the runner's pytest "
            f"(grading/engine/runner-requirements.txt): {'; '.join(causes)}."
        )
    not_found = _missing(output, pip, python_version)
    if not_found:
        name, why = not_found
        return (
            RunnerUnavailable(f"the runner's own pins cannot be installed: {why}")
            if name in ours
            else RequirementsRefused(why)
        )
    return RequirementsRefused(f"pip could not install the requirements:\n{output.strip()[-PIP_OUTPUT_KEPT:]}")


def _seed_for(python: Path, root: Path, timeout_s: float) -> Path:
    """A bare venv of ``python`` (pip only) under ``root``, built once, that new environments start as copies of.

    why: ``python -m venv`` installs pip afresh (ensurepip) each time, about 2 s of CPU per environment;
    copying a venv is safe here for the reason renaming one is (see _build_once). The seed's name holds
    the interpreter's path and its size and time, so a Python upgraded in place gets a new seed.
    """
    stat = python.resolve().stat()
    digest = hashlib.sha256(f"{python.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    seed = root / f".seed-{digest}"
    return _build_once(seed, digest, lambda staging: _make_venv(python, staging, timeout_s))


def _build_env(staging: Path, python: Interpreter, packet: list[Pin], pip: _Pip) -> None:
    seed = _seed_for(python.path, staging.parent, pip.deadline - time.monotonic())
    shutil.copytree(seed, staging, symlinks=True, ignore=shutil.ignore_patterns(MARKER))
    # why: a packet may pin its own pytest or one of its dependencies; the runner's pin of that name gives way.
    runner = [pin for pin in pins(RUNNER_REQUIREMENTS.read_text()) if pin.name not in {p.name for p in packet}]
    ours = {pin.name for pin in runner}
    # why: keep the packet's versions while the runner's pins go in: pip would otherwise replace them silently.
    constraints = []
    for pin in packet:
        requirement = Requirement(pin.requirement)
        requirement.extras = set()
        constraints.append(str(requirement))
    with tempfile.TemporaryDirectory() as scratch:
        files = {}
        for name, lines in (
            ("packet.txt", [pin.for_pip() for pin in packet]),
            ("runner.txt", [pin.requirement for pin in runner]),
            ("constraints.txt", constraints),
        ):
            files[name] = Path(scratch) / name
            files[name].write_text("".join(line + "\n" for line in lines))
        # why: --only-binary: no setup.py of any package ever runs on the server.
        steps = [
            ["install", "--only-binary=:all:", "-r", str(files["runner.txt"]), "-c", str(files["constraints.txt"])]
        ]
        if packet:
            steps.insert(0, ["install", "--only-binary=:all:", "-r", str(files["packet.txt"])])
        for step in steps:
            done = pip(*step, *pip.index)
            if done.returncode != 0:
                raise _explain_pip_failure(done.stdout + done.stderr, pip, python.version, ours)
    done = pip("check")
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()
        conflicts = "; ".join(line.strip().rstrip(".") for line in output.splitlines()[-20:] if line.strip())
        raise RequirementsRefused(
            "The requirements conflict with each other or with the runner's pytest "
            f"(grading/engine/runner-requirements.txt): {conflicts}."
        )


def ensure_env(
    root: Path,
    python: Interpreter,
    requirements: str,
    *,
    index_url: str | None = None,
    isolated: bool = False,
    timeout_s: float = 900,
) -> Path:
    """The runner environment for this Python and these requirements, ``root/<env_key>``, built if missing.

    The packet's pins are installed from wheels only, then the runner's pytest pins (less the
    names the packet pins itself), then ``pip check``. Safe to call from several workers at once:
    one builds, the others wait and reuse it. Raises RequirementsRefused when the packet's
    requirements are at fault (the message names the package and says why), RunnerUnavailable
    when the machine is. ``isolated`` makes pip ignore this machine's pip configuration.
    """
    if python.problem:
        raise RunnerUnavailable(python.problem)
    packet = pins(requirements)
    key = env_key(python.version, requirements)
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    _check_reachable(root)
    deadline = time.monotonic() + timeout_s

    def build(staging: Path) -> None:
        _build_env(staging, python, packet, _Pip(staging, root / ".pip-cache", index_url, isolated, deadline))

    return _build_once(root / key, key, build)


def prune_envs(root: Path, keep: Iterable[str]) -> list[Path]:
    """Remove the environments under ``root`` whose key is not in ``keep``, and the ``.building``
    folders that builds killed midway left; never one being built now. Returns what it removed.
    """
    root, keep = Path(root), set(keep)
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for path in sorted(root.iterdir()):
        key = path.name.removesuffix(".building")
        if not path.is_dir() or not ENV_KEY.fullmatch(key) or path.name in keep:
            continue
        lock = root / f"{key}.lock"
        with _lock(lock, wait=False) as held:
            if not held:  # a build of this key is running
                continue
            shutil.rmtree(path)
            removed.append(path)
            if key not in keep:
                lock.unlink(missing_ok=True)
    # The lock files of builds that failed (nothing was built, so no folder above took them along).
    for lock in sorted(root.glob("*.lock")):
        key = lock.name.removesuffix(".lock")
        if ENV_KEY.fullmatch(key) and key not in keep and not (root / key).exists():
            with _lock(lock, wait=False) as held:
                if held:
                    lock.unlink(missing_ok=True)
    return removed


def installed(env: Path) -> list[str]:
    """The distributions in the virtualenv ``env``, as "name version", sorted (for the self-check's log)."""
    found = []
    for info in Path(env).glob("lib/python*/site-packages/*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").partition("-")
        found.append(f"{name} {version}")
    return sorted(found, key=str.lower)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m grading.engine.runner",
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
