"""What the gate's steps ask a candidate to have under artifacts/ before submitting, and which of it is lacking.

The one rule for both ways of working. The download's gate.py is a
standalone script, so it cannot import this: bundle.py writes ``expected()``
into it when the folder is downloaded, and gate.py checks the folder against
that list. The hosted submit checks the workspace's files, as they will be
uploaded, with ``missing_artifacts()``. Plain Python: no Django.

Each ``what`` says what the file is for and, for a file a gate step writes,
that step as gate.py has it (run `python gate.py red`); the hosted session
says the step its own way (sessions_app.actions.hosted_words).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

FOLDER = "artifacts"


@dataclass(frozen=True)
class Artifact:
    name: str  # under artifacts/
    what: str  # what it is for, as the candidate reads it
    model_step: bool = False  # asked for only when the take-home has a model step

    @property
    def path(self) -> str:
        return f"{FOLDER}/{self.name}"


EXPECTED = (
    Artifact("red.log", "the tests failing before your fix: run `python gate.py red`"),
    Artifact("prompt.txt", "your exact prompt to the model", model_step=True),
    Artifact("model_allowed.at", "the time the model window opened: run `python gate.py model`", model_step=True),
    Artifact("model.md", "the model's raw reply", model_step=True),
    Artifact("green.log", "the tests passing after your fix: run `python gate.py green`"),
    Artifact("refuse.md", "one unsafe patch and why you would not apply it"),
)


def expected(model_step: bool) -> tuple[Artifact, ...]:
    """The artifacts asked for: all of them, or without the model's when the take-home uses no model."""
    return tuple(a for a in EXPECTED if model_step or not a.model_step)


@dataclass(frozen=True)
class Missing:
    """An expected artifact that is not there (``empty``: there, with nothing but blanks in it)."""

    artifact: Artifact
    empty: bool
    what: str  # what it is for: the artifact's words, or a page's own (dataclasses.replace)

    @property
    def path(self) -> str:
        return self.artifact.path

    @property
    def state(self) -> str:
        return "empty" if self.empty else "missing"

    @property
    def line(self) -> str:
        """As gate.py prints it: artifacts/refuse.md is missing (one unsafe patch and why ...)."""
        return f"{self.path} is {self.state} ({self.what})"


def missing_artifacts(files: Mapping[str, bytes], model_step: bool) -> list[Missing]:
    """The expected artifacts that ``files`` (paths under the project folder -> bytes) lacks, or has empty.

    Empty means nothing but whitespace, as gate.py counts it: a file made
    with ``touch`` is no reply and no refusal.
    """
    lacking = []
    for artifact in expected(model_step):
        data = files.get(artifact.path)
        if data is None or not data.strip():
            lacking.append(Missing(artifact, empty=data is not None, what=artifact.what))
    return lacking
