"""What the grading core needs to know about one packet version.

Plain data, no Django: the recruiter side turns a ``PacketVersion`` row into a
``PacketSpec`` (``PacketVersion.to_spec()``), and tests and the command line can
build one from a folder laid out like ``takehome/sample_packets/refund-sum/``.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

ARTIFACTS_DIR = "artifacts"
# Files the candidate's download adds beside the fixture. They are not the
# candidate's work (gate.py holds their personal link; the reruns use the
# packet's own environment, whatever requirements.txt says), so the grader
# leaves them out of an upload unless the packet's own fixture has them.
BUNDLE_PATHS = ("gate.py", "README.txt", "requirements.txt")
TEST_FILE_RE = re.compile(r"(^|/)(test_[^/]*\.py|[^/]*_test\.py|conftest\.py)$")


def is_test_path(path: str) -> bool:
    """True for files pytest treats as tests or test configuration."""
    return bool(TEST_FILE_RE.search(path))


@dataclass(frozen=True)
class PacketSpec:
    """One immutable packet version, as the grader sees it.

    ``fixture`` is the original tree handed to candidates (path -> bytes, POSIX
    paths relative to the tree's root). ``solution`` holds the fixed production
    files; its keys are, by definition, the packet's production paths.
    ``reference_tests`` are hidden tests added when checking a candidate's fix.
    ``forbidden_patterns`` and ``refusal_hints`` map a short label to a regular
    expression (searched case-insensitively for hints, as written for patterns);
    a refusal hint may also hold a list of them, any one matching counts.
    ``decoys`` are plausible wrong fixes, by name: each maps production paths to
    the decoy's version of them (paths it leaves out are the solution's). A
    candidate's test that catches the bug fails on every decoy it can see.
    """

    slug: str
    version: int
    fixture: Mapping[str, bytes]
    solution: Mapping[str, bytes]
    reference_tests: Mapping[str, bytes]
    protected_paths: tuple[str, ...] = ()
    forbidden_patterns: Mapping[str, str] = field(default_factory=dict)
    refusal_hints: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    test_command: tuple[str, ...] = ("python", "-m", "pytest", "-q")
    time_limit_minutes: int = 90
    decoys: Mapping[str, Mapping[str, bytes]] = field(default_factory=dict)
    # The environment the tests run in: a pip requirements file (pinned, from
    # the package index only; "" = pytest alone) and a Python version such as
    # "3.11" ("" = the server's default interpreter). See grading/engine/runner.py.
    requirements: str = ""
    python: str = ""

    @property
    def production_paths(self) -> tuple[str, ...]:
        return tuple(sorted(self.solution))

    def fixture_test_paths(self) -> tuple[str, ...]:
        return tuple(sorted(p for p in self.fixture if is_test_path(p)))

    def cache_key(self) -> str:
        """Stable name for this version, for caching the original tree's run."""
        return f"{self.slug}-v{self.version}"


DECOY_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")


def split_decoys(files: Mapping[str, bytes]) -> dict[str, dict[str, bytes]]:
    """``{"name/path": bytes}`` (how decoys are stored) as ``{name: {path: bytes}}``."""
    decoys: dict[str, dict[str, bytes]] = {}
    for path, data in sorted(files.items()):
        name, _, rest = path.partition("/")
        if rest:
            decoys.setdefault(name, {})[rest] = data
    return decoys


def join_decoys(decoys: Mapping[str, Mapping[str, bytes]]) -> dict[str, bytes]:
    """The reverse of :func:`split_decoys`."""
    return {f"{name}/{path}": data for name, files in decoys.items() for path, data in files.items()}


def read_tree(root: Path) -> dict[str, bytes]:
    """The files under root as {posix path: bytes}; links are not followed, caches left out."""
    if not root.is_dir():
        return {}
    return {
        PurePosixPath(p.relative_to(root)).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts
    }


def load_spec_dir(root: Path, version: int = 1) -> PacketSpec:
    """Build a spec from a packet folder: packet.json, fixture/, solution/, reference_tests/, decoys/<name>/,
    and requirements.txt when the packet needs more than pytest."""
    meta = json.loads((root / "packet.json").read_text())
    requirements = root / "requirements.txt"
    return PacketSpec(
        slug=meta["slug"],
        version=version,
        fixture=read_tree(root / "fixture"),
        solution=read_tree(root / "solution"),
        reference_tests=read_tree(root / "reference_tests"),
        protected_paths=tuple(meta.get("protected_paths", ())),
        forbidden_patterns=dict(meta.get("forbidden_patterns", {})),
        refusal_hints=dict(meta.get("refusal_hints", {})),
        test_command=tuple(shlex.split(meta.get("test_command", "python -m pytest -q"))),
        time_limit_minutes=int(meta.get("time_limit_minutes", 90)),
        decoys=split_decoys(read_tree(root / "decoys")),
        requirements=requirements.read_text() if requirements.is_file() else "",
        python=str(meta.get("python_version", "")),
    )


SAMPLE_PACKET_DIR = Path(__file__).resolve().parents[2] / "takehome" / "sample_packets" / "refund-sum"
SAMPLE_PACKETS_DIR = SAMPLE_PACKET_DIR.parent


def sample_spec(slug: str = "refund-sum") -> PacketSpec:
    """A built-in sample packet (refund-sum unless named), read from the repository."""
    return load_spec_dir(SAMPLE_PACKETS_DIR / slug)
