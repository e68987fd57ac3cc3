"""Runner environments per (Python, requirements): built once from a local index, shared, read-only.

The builds use a package index written into a temporary folder (hand-made wheels,
one source-only release, and the runner's own pytest pins downloaded once into
var/), with pip isolated from this machine's configuration: no network.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from conftest import require
from grading.engine import runner
from grading.engine.pythons import Interpreter, discover
from grading.engine.requirements import RequirementsRefused
from grading.engine.runner import (
    MARKER,
    RUNNER_REQUIREMENTS,
    RunnerUnavailable,
    ensure_env,
    env_key,
    env_ready,
    prune_envs,
    runner_python,
)
from grading.tests.pypi import make_wheel, write_index
from shared import pytest_slots

SYSTEM = Path("/usr/bin/python3")


@pytest.fixture
def bare_env_root():
    """A folder the sandbox's uids can reach (pytest's tmp_path is mode 0700), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="th-envs-", dir="/var/tmp"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture(scope="module")
def seeded_root(seed_envs):
    """A folder holding one copy of the seed (conftest.seed_envs) for this module's tests to link to."""
    folder = Path(tempfile.mkdtemp(prefix="th-envs-seed-", dir="/var/tmp"))
    seed_envs(folder)
    yield folder
    shutil.rmtree(folder)


@pytest.fixture
def env_root(bare_env_root, seeded_root):
    """The same, holding the bare venv a first build makes (the seed), as on a worker that built before.

    why hard links, not copies: a build only reads the seed (it copies it into its own folder) and nothing
    writes to one, so each test's seed is the same files for a twentieth of a copy's CPU (about 1 s each).
    """
    for seed in seeded_root.iterdir():
        shutil.copytree(seed, bare_env_root / seed.name, symlinks=True, copy_function=os.link)
    return bare_env_root


@pytest.fixture(scope="session")
def system_python() -> Interpreter:
    (python,) = discover([SYSTEM])
    assert python.problem is None, python.problem
    return python


def build(root, python, requirements, index):
    return ensure_env(root, python, requirements, index_url=index.url, isolated=True, timeout_s=300)


def run_in(env: Path, code: str) -> str:
    done = subprocess.run([str(runner_python(env)), "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


# -- keys, readiness and pruning: no build ------------------------------------------------

def test_the_key_ignores_comments_spacing_order_and_spelling():
    key = env_key("3.11", "tinylib==1.0\nclash==1.0\n")
    assert key.startswith("py3.11-") and len(key) == len("py3.11-") + 20
    assert env_key("3.11", "# ours\nClash == 1.0\n\ntinylib==1.0  # why\n") == key


@pytest.mark.parametrize("python, requirements", [
    ("3.12", "tinylib==1.0\nclash==1.0\n"),
    ("3.11", "tinylib==1.1\nclash==1.0\n"),
    ("3.11", "tinylib==1.0\n"),
    ("3.11", "tinylib[extra]==1.0\nclash==1.0\n"),
])
def test_the_key_changes_with_the_python_and_the_pins(python, requirements):
    assert env_key(python, requirements) != env_key("3.11", "tinylib==1.0\nclash==1.0\n")


def test_the_key_changes_with_the_runner_pins(monkeypatch, tmp_path):
    key = env_key("3.11", "")
    (tmp_path / "runner.txt").write_text(RUNNER_REQUIREMENTS.read_text().replace("pytest==", "pytest==0"))
    monkeypatch.setattr(runner, "RUNNER_REQUIREMENTS", tmp_path / "runner.txt")
    assert env_key("3.11", "") != key


def test_the_key_of_refused_text_is_refused():
    with pytest.raises(RequirementsRefused, match="Line 1: ./pkg is a local path"):
        env_key("3.11", "./pkg\n")


def fake_env(root: Path, key: str, *, complete: bool = True) -> Path:
    folder = root / key
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").write_text("")
    if complete:
        (folder / MARKER).write_text(key + "\n")
    return folder


def test_env_ready_only_for_a_complete_env(tmp_path):
    key = env_key("3.11", "tinylib==1.0\n")
    assert env_ready(tmp_path, "3.11", "tinylib==1.0\n") is None
    fake_env(tmp_path, key + ".building")  # a build that was killed: never used
    assert env_ready(tmp_path, "3.11", "tinylib==1.0\n") is None
    fake_env(tmp_path, key, complete=False)
    assert env_ready(tmp_path, "3.11", "tinylib==1.0\n") is None
    (tmp_path / key / MARKER).write_text(key + "\n")
    assert env_ready(tmp_path, "3.11", "tinylib==1.0\n") == tmp_path / key


def test_prune_keeps_what_is_asked_and_what_is_being_built(tmp_path):
    kept, old, killed, building = (env_key("3.11", f"tinylib=={v}\n") for v in ("1.0", "1.1", "1.2", "1.3"))
    for key in (kept, old):
        fake_env(tmp_path, key)
    fake_env(tmp_path, kept + ".building", complete=False)  # a killed rebuild of a kept key
    fake_env(tmp_path, killed + ".building", complete=False)
    fake_env(tmp_path, building + ".building", complete=False)
    (tmp_path / ".pip-cache").mkdir()
    (tmp_path / "notes").mkdir()
    with open(tmp_path / f"{building}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as ensure_env holds it while it builds
        removed = prune_envs(tmp_path, keep=[kept])
    assert sorted(removed) == sorted([tmp_path / old, tmp_path / f"{kept}.building", tmp_path / f"{killed}.building"])
    assert sorted(path.name for path in tmp_path.iterdir() if path.is_dir()) == sorted(
        [kept, f"{building}.building", ".pip-cache", "notes"])
    assert prune_envs(tmp_path / "absent", keep=[]) == []


def test_an_unusable_python_is_the_machine_s_problem(env_root):
    broken = Interpreter(Path("/root/.pyenv/versions/3.11.7/bin/python3.11"), "3.11", "it cannot be reached.")
    with pytest.raises(RunnerUnavailable, match="it cannot be reached"):
        ensure_env(env_root, broken, "tinylib==1.0\n")


def test_refused_text_is_refused_before_anything_is_built(bare_env_root, system_python):
    env_root = bare_env_root
    with pytest.raises(RequirementsRefused, match="Line 2: --index-url changes where packages come from"):
        ensure_env(env_root, system_python, "tinylib==1.0\n--index-url https://evil.example/simple\n")
    assert list(env_root.iterdir()) == []


def test_a_root_the_sandbox_cannot_reach_is_refused(tmp_path, system_python):
    with pytest.raises(RunnerUnavailable, match="must be traversable by others"):
        ensure_env(tmp_path / "envs", system_python, "")  # pytest's tmp_path is mode 0700


# -- builds (slow: the local_index fixture) ------------------------------------------------

def assert_read_only_for_others(env: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(env):
        for name in [*dirnames, *filenames]:
            mode = os.lstat(os.path.join(dirpath, name)).st_mode
            assert stat.S_ISLNK(mode) or (mode & 0o005 and not mode & 0o002), os.path.join(dirpath, name)


def left(env_root: Path) -> set[str]:
    """What is in the environments' folder beside what every build shares: pip's cache and the bare venvs."""
    return {path.name for path in env_root.iterdir() if path.name != ".pip-cache" and not path.name.startswith(".seed-")}


def test_builds_an_env_with_the_packet_s_package_and_pytest(env_root, system_python, local_index):
    env = build(env_root, system_python, "TinyLib==1.0  # ours\n", local_index)
    assert env == env_root / env_key("3.11", "tinylib==1.0\n")
    assert run_in(env, "import tinylib, pytest; print(tinylib.VERSION, pytest.__version__)") == "1.0 9.2.0"
    assert env_ready(env_root, "3.11", "tinylib==1.0\n") == env
    assert_read_only_for_others(env)
    assert left(env_root) == {env.name, f"{env.name}.lock"}
    marker = (env / MARKER).stat().st_mtime_ns
    assert build(env_root, system_python, "tinylib==1.0\n", local_index) == env  # built once, reused
    assert (env / MARKER).stat().st_mtime_ns == marker
    # It began as a copy of the one bare venv of this Python, which outlives the environments pruned.
    seeds = [path for path in env_root.iterdir() if path.name.startswith(".seed-") and path.is_dir()]
    assert len(seeds) == 1 and not list(seeds[0].glob("lib/python*/site-packages/tinylib*"))
    assert prune_envs(env_root, keep=[]) == [env] and seeds[0].is_dir()


def missing_bytecode(env: Path, version: str, packages=("_pytest", "pluggy")) -> list[Path]:
    """The modules of ``packages`` in ``env`` whose bytecode for that Python is not beside them."""
    tag = "cpython-" + version.replace(".", "")
    sources = [path for package in packages for path in env.glob(f"lib/python{version}/site-packages/{package}/**/*.py")]
    assert sources, f"none of {packages} is in {env}"
    return [path for path in sources if not (path.parent / "__pycache__" / f"{path.stem}.{tag}.pyc").is_file()]


def test_an_env_keeps_its_bytecode_beside_its_modules_whatever_the_builder_s_environment_says(
        env_root, system_python, local_index, monkeypatch, tmp_path):
    """The sandbox reads an environment read-only and writes no bytecode: a module without its own is compiled
    again at every run. A builder whose environment sends bytecode elsewhere (PYTHONPYCACHEPREFIX, as make test
    sets it) or says not to write it still leaves it in place."""
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PIP_NO_COMPILE", "1")
    env = build(env_root, system_python, "tinylib==1.0\n", local_index)
    assert missing_bytecode(env, "3.11", ("_pytest", "pluggy", "tinylib")) == []


def test_the_runner_keeps_its_bytecode_beside_its_modules(runner_dir):
    """The runner make built (under make test's PYTHONPYCACHEPREFIX on a fresh checkout): every module of
    pytest has its bytecode in place, or each sandboxed run would compile it again (runner._compile)."""
    version = next(runner_dir.glob("lib/python3.*")).name.removeprefix("python")
    assert missing_bytecode(runner_dir, version) == []


def test_the_sandbox_runs_tests_that_import_the_package(env_root, system_python, local_index, scratch_dir, tmp_path):
    from grading.engine.sandbox import Sandbox, SandboxLimits

    require(shutil.which("bwrap") is not None, "bwrap is missing (apt-get install bubblewrap)")
    env = build(env_root, system_python, "tinylib==1.1\n", local_index)
    (tmp_path / "test_lib.py").write_text("import tinylib\n\ndef test_version():\n    assert tinylib.VERSION == '1.1'\n")
    sandbox = Sandbox(env, scratch_dir, uid_base=pytest_slots.uids("envs"), slots=2, limits=SandboxLimits(wall_s=30))
    result = sandbox.run(tmp_path, ("python", "-m", "pytest", "-q"))
    assert (result.outcome, result.passed) == ("passed", 1), result.log


@pytest.mark.parametrize("requirements, message", [
    ("tinylib==1.0\nnosuch==1.0\n", "nosuch is not on the package index: check the name's spelling."),
    ("tinylib==9.9\n", "tinylib has no version 9.9 on the package index; its latest are 1.1, 1.0."),
    ("srconly==1.0\n", "srconly 1.0 has no wheel for Python 3.11 on this platform, and the server never "
                       "builds packages from source"),
    ("needsnew==1.0\n", "needsnew 1.0 needs Python >=3.99, and this packet uses Python 3.11."),
    ("pluggy==0.9\n", "conflict with each other or with the runner's pytest (grading/engine/runner-requirements.txt): "
                      "pytest 9.2.0 depends on pluggy<2 and >=1.6; The user requested (constraint) pluggy==0.9."),
    ("clash==1.0\n", "conflict with each other or with the runner's pytest (grading/engine/runner-requirements.txt): "
                     "clash 1.0 has requirement pluggy<1, but you have pluggy 1.7.0."),
    ("clash==1.0 --hash=sha256:{clash}\n", "In hash-checking mode every package installed, dependencies too, "
                                           "needs a line name==version --hash=...; these have none: pluggy<1 (needed by clash==1.0)."),
])
def test_what_cannot_be_installed_is_refused_by_name(env_root, system_python, local_index, requirements, message):
    requirements = requirements.format(**local_index.sha256)
    with pytest.raises(RequirementsRefused) as refused:
        build(env_root, system_python, requirements, local_index)
    assert message in str(refused.value)
    assert env_ready(env_root, "3.11", requirements) is None
    assert [name for name in left(env_root) if (env_root / name).is_dir()] == []
    assert not local_index.setup_ran.exists(), "a setup.py ran on the server"


def test_hash_checking_mode(env_root, system_python, local_index):
    right = f"tinylib==1.0 \\\n    --hash=sha256:{local_index.sha256['tinylib']}\n"
    env = build(env_root, system_python, right, local_index)
    assert run_in(env, "import tinylib; print(tinylib.VERSION)") == "1.0"
    wrong = f"tinylib==1.0 --hash=sha256:{'0' * 64}\n"
    with pytest.raises(RequirementsRefused) as refused:
        build(env_root, system_python, wrong, local_index)
    assert str(refused.value).startswith(
        f"These downloads do not match the --hash given for them: tinylib 1.0 (the index has "
        f"sha256:{local_index.sha256['tinylib']})")


def test_concurrent_builds_of_one_env_build_it_once(bare_env_root, system_python, local_index, monkeypatch):
    env_root = bare_env_root  # why bare: the one venv made is the seed, which two builds also make once
    venvs = []
    make_venv = runner._make_venv
    monkeypatch.setattr(runner, "_make_venv", lambda *args: venvs.append(args) or make_venv(*args))
    results: list[Path | BaseException] = []

    def one() -> None:
        try:
            results.append(build(env_root, system_python, "", local_index))  # no requirements: pytest alone
        except BaseException as exc:  # shown by the assert below
            results.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [env_root / env_key("3.11", "")] * 2
    assert len(venvs) == 1
    assert run_in(results[0], "import pytest; print(pytest.__version__)") == "9.2.0"


def test_a_killed_build_is_not_used_and_is_cleaned(env_root, system_python, local_index):
    key = env_key("3.11", "tinylib==1.0\n")
    half = fake_env(env_root, key + ".building")  # even with a marker, a .building folder is never used
    (half / "leftover").write_text("from the killed build")
    assert env_ready(env_root, "3.11", "tinylib==1.0\n") is None
    env = build(env_root, system_python, "tinylib==1.0\n", local_index)
    assert env == env_root / key and not half.exists() and not (env / "leftover").exists()
    assert run_in(env, "import tinylib; print(tinylib.VERSION)") == "1.0"


@pytest.mark.slow
def test_an_unreachable_index_is_the_machine_s_problem(env_root, system_python):
    # why: port 9 (discard) has no listener here: the connection is refused at once.
    with pytest.raises(RunnerUnavailable, match="the package index could not be reached"):
        ensure_env(env_root, system_python, "tinylib==1.0\n", index_url="http://127.0.0.1:9/simple", isolated=True)
    assert [name for name in left(env_root) if (env_root / name).is_dir()] == []


@pytest.mark.slow
def test_an_index_without_the_runner_s_pins_is_the_machine_s_problem(env_root, system_python, tmp_path):
    url = write_index(tmp_path / "index", [make_wheel(tmp_path, "tinylib", "1.0")])
    with pytest.raises(RunnerUnavailable, match="the runner's own pins cannot be installed: .* is not on the package index"):
        ensure_env(env_root, system_python, "tinylib==1.0\n", index_url=url, isolated=True)


HASHES_REQUIRED = """\
ERROR: Hashes are required in --require-hashes mode, but they are missing from some requirements. Here is a list of \
those requirements along with the hashes their downloaded archives actually had. Add lines like these to your \
requirements files to prevent tampering. (If you did not enable --require-hashes manually, note that it turns on \
automatically when any package has a hash.)
    pluggy==0.9 --hash=sha256:bba34e24
"""


@pytest.mark.parametrize("output, kind, message", [
    (HASHES_REQUIRED, RequirementsRefused, "dependencies too, needs a line name==version --hash=...; these have "
                                           "none: pluggy==0.9 --hash=sha256:bba34e24."),
    ("ERROR: Package 'needsnew' requires a different Python: 3.11.2 not in '>=3.99'\n", RequirementsRefused,
     "needsnew needs Python >=3.99, and this packet uses Python 3.11."),
    ("ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device\n", RunnerUnavailable,
     "the disk is full"),
    ("x" * 3000 + "\nERROR: something pip had never said before\n", RequirementsRefused,
     "pip could not install the requirements:\n" + "x" * 1400),
])
def test_pip_s_other_failures_are_explained(output, kind, message):
    explained = runner._explain_pip_failure(output, pip=None, python_version="3.11", ours=set())
    assert isinstance(explained, kind) and message in str(explained)
    assert len(str(explained)) < 1700
