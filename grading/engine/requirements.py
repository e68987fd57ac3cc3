"""A packet's requirements.txt: what the server agrees to install, and the text pip is given.

A packet names packages from the package index only, each pinned to one version
(``name==version``; extras, environment markers and pip's ``--hash`` allowed).
Anything that could fetch code from elsewhere or change how pip resolves is
refused line by line, before pip ever sees the text. Plain Python, no Django.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

MAX_REQUIREMENTS_BYTES = 64 * 1024
# pip accepts these three for --hash; the hex digest has a fixed length for each.
HASH_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}
# why: pip reads a comment from '#' at the start or after whitespace, never inside a word.
COMMENT = re.compile(r"(^|\s+)#.*$")
URL = re.compile(r"^([a-z][a-z0-9+.-]*://|(git|hg|svn|bzr)\+|file:)", re.IGNORECASE)
ARCHIVE_SUFFIXES = (".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tar")
SOURCE_OPTIONS = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--trusted-host", "--no-index"}
INCLUDE_OPTIONS = {"-r", "--requirement", "-c", "--constraint"}
EDITABLE_OPTIONS = {"-e", "--editable"}


class RequirementsRefused(Exception):
    """The requirements cannot be used; ``str(exc)`` is the sentence to show the recruiter."""


@dataclass(frozen=True)
class Pin:
    """One accepted requirement line: a package pinned to one version."""

    line: int
    name: str  # canonical (PEP 503) name
    version: str
    requirement: str  # as pip should read it, normalised by packaging
    hashes: tuple[str, ...]

    def for_pip(self) -> str:
        return " ".join([self.requirement, *(f"--hash={h}" for h in self.hashes)])


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Lines with pip's backslash continuations joined and comments removed, each with its first line number."""
    lines: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        if raw.endswith("\\"):
            pending.append(raw[:-1])
            continue
        pending.append(raw)
        lines.append((start, COMMENT.sub("", " ".join(pending)).strip()))
        pending = []
    if pending:
        lines.append((start, COMMENT.sub("", " ".join(pending)).strip()))
    return [(number, line) for number, line in lines if line]


def _refuse_option(number: int, option: str) -> str:
    name = option.split("=", 1)[0]
    if name in SOURCE_OPTIONS:
        return (
            f"Line {number}: {name} changes where packages come from; packets install from the "
            "server's package index only, so remove it."
        )
    if name in INCLUDE_OPTIONS:
        return f"Line {number}: {name} includes another file; put every requirement in this one file instead."
    if name in EDITABLE_OPTIONS:
        return (
            f"Line {number}: {name} installs from a local folder or a repository; name a package from "
            "the index as name==version instead."
        )
    return (
        f"Line {number}: the option {name} is not allowed; only name==version lines, each with "
        "optional --hash=sha256:..., are accepted."
    )


def _where_from(number: int, spec: str) -> str | None:
    """A sentence if ``spec`` points at a URL or a local path instead of naming a package."""
    if URL.match(spec) or "://" in spec:
        return (
            f"Line {number}: {spec} is a URL; packets install packages from the package index only, "
            "named as name==version."
        )
    if spec.startswith((".", "/", "~")) or "/" in spec.split(";")[0] or "\\" in spec or spec.endswith(ARCHIVE_SUFFIXES):
        return (
            f"Line {number}: {spec} is a local path; packets install packages from the package index "
            "only, named as name==version."
        )
    return None


def _hashes(number: int, options: list[str]) -> tuple[list[str], list[str]]:
    """The ``--hash`` values among ``options``, and a sentence for each other option or bad hash."""
    hashes, problems = [], []
    tokens = iter(options)
    for token in tokens:
        if token == "--hash":
            token = "--hash=" + next(tokens, "")
        if not token.startswith("-"):
            continue  # the value of an option refused just before
        if not token.startswith("--hash="):
            problems.append(_refuse_option(number, token))
            continue
        value = token.split("=", 1)[1]
        algorithm, _, digest = value.partition(":")
        if HASH_LENGTHS.get(algorithm) != len(digest) or not re.fullmatch(r"[0-9a-fA-F]+", digest):
            problems.append(
                f"Line {number}: {token} is not a hash pip can check; write it as --hash=sha256:<64 hex digits>."
            )
        else:
            hashes.append(f"{algorithm}:{digest.lower()}")
    return hashes, problems


def _parse_line(number: int, line: str) -> tuple[Pin | None, list[str]]:
    if line.startswith("-"):
        return None, [_refuse_option(number, line.split()[0])]
    tokens = line.split()
    # why: as pip does, the requirement ends at the first word that starts with '-'.
    split = next((i for i, token in enumerate(tokens) if token.startswith("-")), len(tokens))
    spec, options = " ".join(tokens[:split]), tokens[split:]
    where = _where_from(number, spec)
    if where:
        return None, [where]
    try:
        requirement = Requirement(spec)
    except InvalidRequirement as exc:
        reason = str(exc).splitlines()[0]
        return None, [f"Line {number}: {spec} is not a requirement pip can read ({reason}); write it as name==version."]
    if requirement.url:
        return None, [
            f"Line {number}: {spec} points at a URL; packets install packages from the package "
            "index only, named as name==version."
        ]
    hashes, problems = _hashes(number, options)
    specifiers = list(requirement.specifier)
    name = requirement.name
    if not specifiers:
        problems.append(f"Line {number}: {name} has no version; pin one exactly, as {name}==<version>.")
    elif len(specifiers) > 1 or specifiers[0].operator != "==" or "*" in specifiers[0].version:
        problems.append(
            f"Line {number}: {name}{requirement.specifier} is not pinned to one version; pin "
            f"it exactly, as {name}==<version>."
        )
    if problems:
        return None, problems
    requirement.name = canonicalize_name(name)
    requirement.extras = {canonicalize_name(extra) for extra in requirement.extras}
    pin = Pin(number, requirement.name, specifiers[0].version, str(requirement), tuple(sorted(hashes)))
    return pin, []


def _pins(text: str | bytes) -> tuple[list[Pin], list[str]]:
    """The accepted pins and one sentence per problem (when any, the pins are not to be used)."""
    not_utf8 = "requirements.txt is not UTF-8 text{}; save it as UTF-8."
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            return [], [not_utf8.format(f" (byte {exc.start:,} cannot be read)")]
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a str holding lone surrogates, from a lax decode
        return [], [not_utf8.format("")]
    if size > MAX_REQUIREMENTS_BYTES:
        return [], [
            f"requirements.txt is {size:,} bytes; the limit is {MAX_REQUIREMENTS_BYTES:,} bytes "
            f"({MAX_REQUIREMENTS_BYTES // 1024} KB). List only the packages the packet imports."
        ]
    found: list[Pin] = []
    problems: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    for number, line in _logical_lines(text):
        pin, line_problems = _parse_line(number, line)
        problems += [(number, problem) for problem in line_problems]
        if pin is None:
            continue
        if pin.name in seen:
            problems.append(
                (number, f"Line {number}: {pin.name} is already on line {seen[pin.name]}; give each package once.")
            )
            continue
        seen[pin.name] = number
        found.append(pin)
    if any(pin.hashes for pin in found):
        # why: pip's hash-checking mode refuses the whole file if one requirement lacks a hash.
        problems += [
            (
                pin.line,
                f"Line {pin.line}: {pin.name} has no --hash, but other lines have one; in "
                "hash-checking mode every line needs one.",
            )
            for pin in found
            if not pin.hashes
        ]
    return found, [problem for _number, problem in sorted(problems, key=lambda item: item[0])]


def check_requirements(text: str | bytes) -> list[str]:
    """One sentence per problem (naming the line and the package), or [] when the text is acceptable."""
    return _pins(text)[1]


def pins(text: str | bytes) -> list[Pin]:
    """The accepted pins, sorted by name; raises RequirementsRefused with every problem."""
    found, problems = _pins(text)
    if len(problems) > 10:  # why: a 64 KB file of bad lines would make a page-long message
        problems = [*problems[:10], f"And {len(problems) - 10:,} more problems."]
    if problems:
        raise RequirementsRefused(" ".join(problems))
    return sorted(found, key=lambda pin: pin.name)


def requirement_names(text: str | bytes) -> set[str]:
    """The canonical names of the packages the text pins (of its acceptable lines)."""
    return {pin.name for pin in _pins(text)[0]}


def normalised(text: str | bytes) -> str:
    """The text pip is given: one pin per line, sorted, without comments; raises RequirementsRefused."""
    return "".join(pin.for_pip() + "\n" for pin in pins(text))
