"""What a packet version holds, and the one rule for when two versions hold the same.

A version is written from a ``VersionContent`` (the form, an import, a sample
packet's folder). ``fingerprint`` says what of it matters: two contents with
the same fingerprint would give candidates the same exercise and be graded the
same way, so saving one over the other would only pile up versions.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from grading.engine import rubric
from grading.engine.spec import join_decoys, split_decoys

from .models import PacketFile, PacketVersion


@dataclass(frozen=True)
class VersionContent:
    """Everything a new packet version holds, before it is written."""

    prompt: str
    fixture: Mapping[str, bytes]
    solution: Mapping[str, bytes]
    reference_tests: Mapping[str, bytes]
    test_command: str = "python -m pytest -q"
    protected_paths: tuple[str, ...] = ()
    forbidden_patterns: Mapping[str, str] | None = None
    refusal_hints: Mapping[str, str | list[str]] | None = None  # label -> one pattern, or several (any counts)
    time_limit_minutes: int = 90
    rubric: Mapping[str, str] | None = None  # cell key -> label
    rubric_definitions: Mapping[str, str] | None = None  # cell key -> what passes and fails it
    decoys: Mapping[str, Mapping[str, bytes]] | None = None
    requirements: str = ""  # pip requirements, pinned, from the package index only ("" = pytest alone)
    python_version: str = ""  # one of TAKEHOME_PYTHONS' versions ("" = the default)
    model_policy: str = ""  # PacketVersion.ModelPolicy ("" = provided when an upstream is configured, else own)
    model_name: str = ""  # overrides TAKEHOME_MODEL_NAME ("" = the setting)
    work_mode: str = "zip"  # PacketVersion.WorkMode: zip, hosted or both (the candidate picks)


def content_cells(content: VersionContent) -> tuple[rubric.RubricCell, ...]:
    """The rubric a version of this content carries, the defaults filled in for its model policy."""
    return rubric.cells(content.rubric, content.rubric_definitions,
                        no_model=content.model_policy == PacketVersion.ModelPolicy.NONE)


def content_of(version: PacketVersion) -> VersionContent:
    """A stored version as the content it was written from (its files read once, or from a prefetch)."""
    files: dict[str, dict[str, bytes]] = defaultdict(dict)
    for f in version.files.all():
        files[f.kind][f.path] = bytes(f.content)
    return VersionContent(
        prompt=version.prompt,
        fixture=files[PacketFile.Kind.FIXTURE],
        solution=files[PacketFile.Kind.SOLUTION],
        reference_tests=files[PacketFile.Kind.REFERENCE_TEST],
        decoys=split_decoys(files[PacketFile.Kind.DECOY]),
        test_command=version.test_command,
        protected_paths=tuple(version.protected_paths),
        forbidden_patterns=version.forbidden_patterns,
        refusal_hints=version.refusal_hints,
        time_limit_minutes=version.time_limit_minutes,
        rubric=version.rubric,
        rubric_definitions=version.rubric_definitions,
        requirements=version.requirements,
        python_version=version.python_version,
        model_policy=version.model_policy,
        model_name=version.model_name,
        work_mode=version.work_mode,
    )


def _hashes(files: Mapping[str, bytes]) -> dict[str, str]:
    return {path: hashlib.sha256(bytes(data)).hexdigest() for path, data in files.items()}


def _command(command: str) -> list[str] | str:
    """The command as the sandbox runs it (shlex's words), so spacing and quoting styles do not count."""
    try:
        return shlex.split(command)
    except ValueError:  # the form and the import refuse such a command; compared as written, should one get here
        return command


def fingerprint(content: VersionContent) -> str:
    """A sha256 of what the version gives candidates and how it is graded; equal fingerprints, same version.

    Counted: the prompt (line ends and the blank lines around it aside, which
    browsers and editors change unasked), every file of the fixture, the
    solution, the hidden tests and the decoys by path and content hash, the
    test command as run, protected paths, forbidden patterns, refusal hints
    (one pattern or a list of one alike), the time limit, the environment
    (requirements, the blank lines around them aside, and Python), the model
    policy and name, how candidates work, and the rubric's words as the
    version would carry them (defaults filled in). Not counted: when, by whom
    or from where it was made (the form, an import, a zip's file times), and
    the packet's title, which belongs to the packet rather than a version.
    """
    hints = {label: [patterns] if isinstance(patterns, str) else list(patterns)
             for label, patterns in (content.refusal_hints or {}).items()}
    facts = {
        "prompt": content.prompt.replace("\r\n", "\n").strip(),
        "fixture": _hashes(content.fixture),
        "solution": _hashes(content.solution),
        "reference_tests": _hashes(content.reference_tests),
        "decoys": _hashes(join_decoys(content.decoys or {})),
        "test_command": _command(content.test_command),
        "protected_paths": list(content.protected_paths),
        "forbidden_patterns": dict(content.forbidden_patterns or {}),
        "refusal_hints": hints,
        "time_limit_minutes": content.time_limit_minutes,
        "requirements": content.requirements.replace("\r\n", "\n").strip(),
        "python_version": content.python_version,
        "model_policy": content.model_policy,
        "model_name": content.model_name.strip(),
        "work_mode": content.work_mode,
        "rubric": [[c.key, c.label, c.definition] for c in content_cells(content)],
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def same_content(version: PacketVersion, content: VersionContent) -> bool:
    """Whether ``version`` already holds ``content``, by ``fingerprint``."""
    return fingerprint(content_of(version)) == fingerprint(content)
