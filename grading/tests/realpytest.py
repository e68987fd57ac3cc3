"""Real pytest output, made on demand by real pytest versions, for the red-log tests.

Virtualenvs holding pytest 7.4, 8.3 and 9.2 from PyPI are built with the
interpreter running the tests, under ``<var>/test-pytest/``, once (a marker
file says a venv is complete, and a lock keeps two test runs from building the
same one). Interpreters of other Python versions found on the machine
(``python3.10``, ``python3.13``) get a pytest 8.3 venv too.

Each log is what a candidate's terminal would show: pytest run in a copy of a
small tree under a temporary folder, with a plain environment (no ``CI``,
which would stop pytest from shortening messages), stdout and stderr
together; mode ``tty`` runs pytest on a pseudo-terminal 100 columns wide, as
``script`` or a copy from a terminal window records it.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grading.engine.spec import sample_spec

PYTEST_VERSIONS = ("7.4.4", "8.3.5", "9.2.0")
OTHER_PYTHONS = ("python3.10", "python3.13")
OTHER_PYTHON_PYTEST = "8.3.5"
MARKER = ".complete"
# In the marker beside the version: a venv built before its bytecode was kept beside its modules is built again.
BYTECODE = "bytecode-in-place"

# Mode name -> pytest arguments (and environment). "tty" runs on a pseudo-terminal.
MODES: dict[str, tuple[str, ...]] = {
    "q": ("-q",),
    "default": (),
    "v": ("-v",),
    "vv": ("-vv",),
    "rA": ("-rA",),
    "tb_short": ("--tb=short",),
    "tb_long": ("--tb=long",),
    "tb_native": ("--tb=native",),
    "tb_line": ("--tb=line",),
    "tb_no": ("-q", "--tb=no"),
    "color": ("--color=yes",),
    "showlocals": ("-q", "-l"),
    "x": ("-q", "-x"),
    "columns120": ("-q",),
    "ci": ("-q",),
    "assert_plain": ("-q", "--assert=plain"),
    "tty": (),
}
MODE_ENV = {"columns120": {"COLUMNS": "120"}, "ci": {"CI": "true"}}
TTY_COLUMNS = 100
MAIN = tuple(f"pytest{v.split('.')[0]}" for v in PYTEST_VERSIONS)  # "pytest7", "pytest8", "pytest9"

# The logs the tests read: (tree, interpreter, mode). Every pytest version runs
# the common modes on every tree; the rarer modes are spread over the versions.
EVERY_VERSION = {
    "orig": ("q", "default", "v", "tb_short", "tb_native", "color", "tty"),
    "cand": ("q", "v", "tb_short", "tty"),
    "deep": ("q", "tb_short", "tb_native", "tb_long"),
    "cand_first_guess": ("q",),
}
SPREAD = {
    "orig": ("vv", "rA", "tb_long", "tb_line", "tb_no", "showlocals", "x", "columns120", "ci"),
    "cand": ("default", "rA", "color", "assert_plain"),
    "deep": ("vv", "v", "showlocals"),
    "cand_first_guess": ("tb_short",),
}
ON_OTHER_PYTHONS = (("orig", "tb_native"), ("cand", "q"), ("deep", "q"), ("deep", "tb_short"))


class VenvUnavailable(Exception):
    """A pytest venv could not be built; the message says why (usually: no network)."""


def build_venv(folder: Path, python: str, version: str) -> Path:
    """A venv at ``folder`` with ``pytest==version`` for ``python``, built unless complete; its python."""
    folder = Path(folder)
    exe = folder / "bin" / "python"
    complete = f"{version} {BYTECODE}\n"
    if _read(folder / MARKER) == complete:
        return exe
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(folder.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _read(folder / MARKER) == complete:
            return exe
        shutil.rmtree(folder, ignore_errors=True)
        # why without pip, installed by this interpreter's pip: a pip of its own costs each venv more than pytest
        for argv in ([python, "-m", "venv", "--without-pip", str(folder)],
                     [sys.executable, "-m", "pip", "--python", str(exe), "install", "--quiet",
                      "--disable-pip-version-check", "--no-compile", f"pytest=={version}"]):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                shutil.rmtree(folder, ignore_errors=True)
                raise VenvUnavailable(f"{' '.join(argv[:5])} failed: {done.stderr.strip()[-1500:]}")
        # why --no-compile above and this instead: pip writes bytecode where PYTHONPYCACHEPREFIX points (make
        # test sets it), never beside the modules, so each of the corpus's runs (which write none) compiled
        # pytest again, about half its CPU. As with pip, a module that does not compile is left as it is.
        in_place = {name: value for name, value in os.environ.items() if name != "PYTHONPYCACHEPREFIX"}
        subprocess.run([str(exe), "-m", "compileall", "-q", str(folder / "lib")], capture_output=True,
                       timeout=600, env=in_place)
        (folder / MARKER).write_text(complete)
    return exe


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def other_pythons() -> dict[str, str]:
    """Interpreters of other Python versions on this machine that really run: {"py3.10": path}.

    A pyenv shim may exist for a version that is installed but not enabled;
    each candidate is tried before it is used.
    """
    found: dict[str, str] = {}
    for name in OTHER_PYTHONS:
        candidates = [shutil.which(name), *sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/*/bin/{name}")))]
        for exe in filter(None, candidates):
            try:
                ok = subprocess.run([exe, "-c", "import venv"], capture_output=True, timeout=30).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
            if ok:
                found[name.replace("python", "py")] = exe
                break
    return found


def _plain_env(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    return {**env, **extra}


def _run_on_tty(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    """Run ``argv`` with a pseudo-terminal as stdout and stderr; what the terminal showed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, TTY_COLUMNS, 0, 0))
    proc = subprocess.Popen(argv, cwd=cwd, env={**env, "TERM": "xterm-256color"},
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = bytearray()
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                break
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: the terminal's other side closed
                break
            if not data:
                break
            out += data
    finally:
        os.close(master)
        proc.wait(timeout=60)
    return out.decode("utf-8", "replace")


def run_pytest(python: Path, tree: Path, mode: str) -> str:
    """pytest's output for ``tree`` in ``mode``, as the candidate's terminal shows it."""
    argv = [str(python), "-m", "pytest", "-p", "no:cacheprovider", *MODES[mode]]
    env = _plain_env(tree.parent, MODE_ENV.get(mode, {}))
    if mode == "tty":
        return _run_on_tty(argv, tree, env)
    done = subprocess.run(argv, cwd=tree, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=120)
    return done.stdout.decode("utf-8", "replace")


def corpus_entries(other: Iterable[str] = ()) -> list[tuple[str, str, str]]:
    """(tree, interpreter label, mode) of every log in the corpus; ``other``: labels of other Pythons."""
    entries = [(tree, label, mode) for tree, modes in EVERY_VERSION.items() for label in MAIN for mode in modes]
    for tree, modes in SPREAD.items():
        entries += [(tree, MAIN[k % len(MAIN)], mode) for k, mode in enumerate(modes)]
    entries += [(tree, label, mode) for label in other for tree, mode in ON_OTHER_PYTHONS]
    return entries


def make_logs(pythons: Mapping[str, Path], entries: list[tuple[str, str, str]], cache_dir: Path,
              workers: int = 2) -> dict[tuple[str, str, str], str]:
    """Run pytest for every entry and return the logs; kept in ``cache_dir`` between test runs.

    The cache file is named by a digest of this module's source, the entries
    and the interpreters, so a change to any of them makes the logs afresh.
    """
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(json.dumps([sorted(entries), sorted((k, str(v)) for k, v in pythons.items())]).encode())
    cache = Path(cache_dir) / f"logs-{digest.hexdigest()[:16]}.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    # why a lock: parallel test processes each ask for the logs; one makes them, the others wait and read them
    with open(cache.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cache.exists():
            stored = json.loads(cache.read_text())
            return {tuple(k.split("|")): v for k, v in stored.items()}
        return _make_logs(pythons, entries, cache, workers)


def _make_logs(pythons: Mapping[str, Path], entries: list[tuple[str, str, str]], cache: Path,
               workers: int) -> dict[tuple[str, str, str], str]:
    all_trees = trees()
    with tempfile.TemporaryDirectory(prefix="pytest-corpus-") as tmp:
        def one(entry: tuple[str, str, str]) -> str:
            tree, label, mode = entry
            # A folder named like a candidate's checkout, under a temporary home.
            folder = write_files(all_trees[tree], Path(tmp) / "-".join(entry) / "takehome")
            return run_pytest(pythons[label], folder, mode)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            logs = dict(zip(entries, pool.map(one, entries)))
    partial = cache.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps({"|".join(k): v for k, v in logs.items()}))
    partial.replace(cache)
    return logs


def once_per_run(tmp_path_factory, name: str, make: Callable[[], dict]) -> dict:
    """``make()``'s JSON-able result, made by one of the run's test processes and read by the others.

    Kept under the run's temporary folder (the one every pytest-xdist worker's folder is in), so the
    next run makes it afresh with the code it tests.
    """
    from conftest import run_folder

    folder = run_folder(tmp_path_factory)
    stored = folder / f"{name}.json"
    with open(folder / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stored.exists():
            return json.loads(stored.read_text())
        result = make()
        partial = stored.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(result))
        partial.replace(stored)
        return result


def write_files(files: Mapping[str, bytes], dest: Path) -> Path:
    """Write ``{path: bytes}`` under ``dest``; return ``dest``."""
    for path, data in files.items():
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        (dest / path).write_bytes(data)
    return dest


# --- the trees ------------------------------------------------------------------------------

# A candidate who wrote failing tests first: a class, a parametrised test, a
# warning, a message on an assert of a local name, captured output.
REFUNDS_TEST = '''import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))
import invoices  # noqa: E402

FIXTURE = Path(__file__).parent.parent / "sample.csv"


def write(tmp_path, *cents):
    path = tmp_path / "rows.csv"
    path.write_text("cents\\n" + "".join(f"{c}\\n" for c in cents))
    return path


class TestRefunds:
    def test_refund_lowers_the_total(self):
        warnings.warn("refunds are negative", UserWarning)
        assert invoices.total(FIXTURE) == 1300

    @pytest.mark.parametrize("cents,expected", [((100, 50), 150), ((100, -40), 60)])
    def test_rows(self, tmp_path, cents, expected):
        assert invoices.total(write(tmp_path, *cents)) == expected


def test_only_refunds(tmp_path):
    total = invoices.total(write(tmp_path, -5, -10))
    print("total was", total)
    assert total == -15, "refunds only must sum below zero"


def test_positive_rows_are_kept(tmp_path):
    assert invoices.total(write(tmp_path, 10, 20)) == 30
'''

# Failures of other shapes: an error raised in the production code three
# frames down, pytest's own diffs of strings, lists and sets, a chained error.
PARSING_TEST = '''import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))
import invoices  # noqa: E402

FIXTURE = Path(__file__).parent.parent / "sample.csv"


def total_of(tmp_path, text):
    path = tmp_path / "rows.csv"
    path.write_text(text)
    return invoices.total(path)


def test_bad_cents_are_reported(tmp_path):
    assert total_of(tmp_path, "cents\\nabc\\n") == 0


def test_summary_line():
    assert f"total {invoices.total(FIXTURE)}" == "total 1300"


def test_totals_as_a_list():
    assert [invoices.total(FIXTURE)] == [1300]


def test_refund_rows():
    with FIXTURE.open() as f:
        rows = list(csv.DictReader(f))
    assert {r["cents"] for r in rows if r["cents"].startswith("-")} == {"-200", "-300"}


def test_chained_error(tmp_path):
    try:
        total_of(tmp_path, "cents\\nx\\n")
    except ValueError as exc:
        raise RuntimeError("could not total the refunds") from exc
'''

# A test the grader plants in its reruns: randomly named, it must fail.
CANARY_TEST = '''def test_q7zk3_canary():
    assert sum([1, 2]) == 4
'''


def trees() -> dict[str, dict[str, bytes]]:
    """Every tree the corpus runs pytest on, by name.

    ``orig`` is the sample packet as shipped; ``cand`` adds a candidate's own
    failing tests, ``deep`` tests of other shapes. The rest are the same work
    at another moment: ``cand_first_guess`` is ``cand`` before its expectation
    was corrected (the red run, then an edit); ``cand_docstring`` is ``cand``
    after three lines were added at the top of its test file.
    """
    fixture = dict(sample_spec().fixture)
    refunds = REFUNDS_TEST.encode()
    return {
        "orig": fixture,
        "cand": {**fixture, "tests/test_refunds.py": refunds},
        "deep": {**fixture, "tests/test_parsing.py": PARSING_TEST.encode()},
        "cand_first_guess": {**fixture, "tests/test_refunds.py": refunds.replace(b"== 1300", b"== 1200")},
        "cand_docstring": {**fixture, "tests/test_refunds.py": b'"""Refunds.\n\nWritten first."""\n' + refunds},
    }


def with_canary(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """A rerun's tree as the grader builds it: the candidate's tree plus a planted failing test."""
    return {**files, "test_q7zk3_planted.py": CANARY_TEST.encode()}
