"""A packet as a folder (or a zip of one), laid out like ``takehome/sample_packets/refund-sum/``.

::

    packet.json          slug, title, test_command, time_limit_minutes, protected_paths,
                         forbidden_patterns, refusal_hints (a name: a pattern or a list), rubric, rubric_definitions,
                         python_version (optional: "3.11"; the server's default when absent),
                         model_policy (optional: provided, own or none), model_name (optional),
                         work_mode (optional: zip, hosted or both; zip when absent)
    prompt.md            the candidate's prompt (Markdown)
    requirements.txt     what the tests need beyond pytest (optional; pinned, from the package index only)
    fixture/             the tree handed to candidates
    solution/            the fixed production files
    reference_tests/     the hidden tests
    decoys/<name>/       plausible wrong fixes (optional)

``export_packet`` and ``import_packet`` (and the packet page's buttons) move a
packet between installations through this layout, and an author may write one
by hand. An export may add earlier versions, each in the same layout, under
``versions/<n>/``; an import into an installation without the slug recreates
them, in order, before the top-level one. Reading it is strict: an unknown file or key is refused, with the
name, so a typo never silently drops part of a packet.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Mapping

from .actions import PacketError
from .content import VersionContent
from .models import PacketFile, PacketVersion

FOLDERS = {
    "fixture": "fixture",
    "solution": "solution",
    "reference_tests": "reference_tests",
    "decoys": "decoys",
}
TOP_FILES = ("packet.json", "prompt.md")
OPTIONAL_FILES = ("requirements.txt",)
# Earlier versions, each laid out as the top level is: ``versions/<n>/packet.json``...
HISTORY_FOLDER = "versions"
KNOWN_KEYS = {"slug", "title", "test_command", "time_limit_minutes", "protected_paths",
              "forbidden_patterns", "refusal_hints", "rubric", "rubric_definitions", "python_version",
              "model_policy", "model_name", "work_mode"}
SLUG_RE = re.compile(r"^[-a-zA-Z0-9_]{1,50}$")


def version_meta(version: PacketVersion) -> dict:
    """packet.json for a version."""
    meta = {
        "slug": version.packet.slug,
        "title": version.packet.title,
        "test_command": version.test_command,
        "time_limit_minutes": version.time_limit_minutes,
        "protected_paths": list(version.protected_paths),
        "forbidden_patterns": dict(version.forbidden_patterns),
        "refusal_hints": dict(version.refusal_hints),
        "rubric": dict(version.rubric or {}),
        "rubric_definitions": dict(version.rubric_definitions or {}),
    }
    if version.python_version:
        meta["python_version"] = version.python_version
    if version.model_policy:
        meta["model_policy"] = version.model_policy
    if version.model_name:
        meta["model_name"] = version.model_name
    # why only when not the default: an export of a zip-only version stays byte for byte what it was.
    if version.work_mode != PacketVersion.WorkMode.ZIP:
        meta["work_mode"] = version.work_mode
    return meta


def version_files(version: PacketVersion) -> dict[str, bytes]:
    """The version as ``{path: bytes}`` in the folder layout."""
    folder = {PacketFile.Kind.FIXTURE: "fixture", PacketFile.Kind.SOLUTION: "solution",
              PacketFile.Kind.REFERENCE_TEST: "reference_tests", PacketFile.Kind.DECOY: "decoys"}
    files = {
        "packet.json": (json.dumps(version_meta(version), indent=2) + "\n").encode(),
        "prompt.md": version.prompt.encode(),
    }
    if version.requirements:
        files["requirements.txt"] = version.requirements.encode()
    for f in version.files.all():
        files[f"{folder[f.kind]}/{f.path}"] = bytes(f.content)
    return files


def export_zip(version: PacketVersion, history: bool = False) -> bytes:
    """A zip of ``version`` in the folder layout, its files at the zip's top level.

    With ``history``, the packet's earlier versions follow under ``versions/<n>/``.
    """
    files = version_files(version)
    if history:
        for earlier in version.packet.versions.filter(number__lt=version.number).prefetch_related("files"):
            files.update({f"{HISTORY_FOLDER}/{earlier.number}/{p}": d for p, d in version_files(earlier).items()})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in sorted(files.items()):
            zf.writestr(path, data)
    return buffer.getvalue()


def _strings(value, key: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise PacketError(f"packet.json: {key} must map names to strings.")
    return value


def _patterns(value, key: str, several: bool = False) -> dict:
    """Named regular expressions; with `several`, a name may carry a list of them (any one matching counts)."""
    def ok(v) -> bool:
        return isinstance(v, str) or (several and isinstance(v, list) and bool(v)
                                      and all(isinstance(p, str) for p in v))

    if not isinstance(value, dict) or not all(isinstance(k, str) and ok(v) for k, v in value.items()):
        kind = "a string or a list of strings" if several else "strings"
        raise PacketError(f"packet.json: {key} must map names to {kind}.")
    for name, patterns in value.items():
        for pattern in [patterns] if isinstance(patterns, str) else patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise PacketError(f"packet.json: the {key} entry {name!r} is not a valid regular expression: {exc}.")
    return value


def parse_meta(data: bytes) -> dict:
    """packet.json, checked key by key; PacketError names the first problem."""
    try:
        meta = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PacketError(f"packet.json is not valid JSON: {exc}.") from None
    if not isinstance(meta, dict):
        raise PacketError("packet.json must hold one JSON object ({...}).")
    unknown = sorted(set(meta) - KNOWN_KEYS)
    if unknown:
        raise PacketError("packet.json has keys this installation does not know: " + ", ".join(unknown)
                          + ". Known keys: " + ", ".join(sorted(KNOWN_KEYS)) + ".")
    slug, title = meta.get("slug"), meta.get("title")
    if not isinstance(slug, str) or not SLUG_RE.match(slug):
        raise PacketError("packet.json: slug is required: letters, digits, '-' or '_', at most 50.")
    if not isinstance(title, str) or not title.strip() or len(title) > 200:
        raise PacketError("packet.json: title is required (at most 200 characters).")
    command = meta.get("test_command", "python -m pytest -q")
    if not isinstance(command, str) or not command.strip() or len(command) > 200:
        raise PacketError("packet.json: test_command must be a command line (at most 200 characters).")
    minutes = meta.get("time_limit_minutes", 90)
    if not isinstance(minutes, int) or isinstance(minutes, bool) or not 1 <= minutes <= 10080:
        raise PacketError("packet.json: time_limit_minutes must be a whole number from 1 to 10080.")
    python_version = meta.get("python_version", "")
    if not isinstance(python_version, str) or len(python_version) > 20:
        raise PacketError('packet.json: python_version must be a version such as "3.11".')
    model_policy = meta.get("model_policy", "")
    if model_policy not in PacketVersion.ModelPolicy.values:
        raise PacketError('packet.json: model_policy must be "provided", "own" or "none" (or left out: provided '
                          "when this server has a model, else the candidate's own).")
    model_name = meta.get("model_name", "")
    if not isinstance(model_name, str) or len(model_name) > 200:
        raise PacketError('packet.json: model_name must be a model name such as "qwen2.5-coder:7b" '
                          "(at most 200 characters).")
    work_mode = meta.get("work_mode", PacketVersion.WorkMode.ZIP)
    if work_mode not in PacketVersion.WorkMode.values:
        raise PacketError('packet.json: work_mode must be "zip", "hosted" or "both" (or left out: zip).')
    protected = meta.get("protected_paths", [])
    if not isinstance(protected, list) or not all(isinstance(p, str) for p in protected):
        raise PacketError("packet.json: protected_paths must be a list of fixture paths.")
    return {
        "slug": slug, "title": title.strip(), "test_command": command, "time_limit_minutes": minutes,
        "protected_paths": tuple(protected), "python_version": python_version,
        "model_policy": model_policy, "model_name": model_name.strip(), "work_mode": work_mode,
        "forbidden_patterns": _patterns(meta.get("forbidden_patterns", {}), "forbidden_patterns"),
        "refusal_hints": _patterns(meta.get("refusal_hints", {}), "refusal_hints", several=True),
        "rubric": _strings(meta.get("rubric", {}), "rubric"),
        "rubric_definitions": _strings(meta.get("rubric_definitions", {}), "rubric_definitions"),
    }


def parse_history(files: Mapping[str, bytes], slug: str) -> list[tuple[int, VersionContent]]:
    """The earlier versions under ``versions/<n>/``, oldest first; each must be a whole packet of the same slug."""
    prefix = HISTORY_FOLDER + "/"
    by_number: dict[str, dict[str, bytes]] = {}
    for path, data in files.items():
        if path.startswith(prefix):
            number, _, rest = path[len(prefix):].partition("/")
            if not number.isdigit() or not rest:
                raise PacketError(f"{path}: earlier versions go in numbered folders, e.g. versions/1/packet.json.")
            by_number.setdefault(number, {})[rest] = data
    history = []
    for number in sorted(by_number, key=int):
        try:
            their_slug, _, content = parse_packet(by_number[number], nested=True)
        except PacketError as exc:
            raise PacketError(f"versions/{number}/: {exc}") from None
        if their_slug != slug:
            raise PacketError(f"versions/{number}/packet.json names the packet {their_slug!r}, not {slug!r}.")
        history.append((int(number), content))
    return history


def parse_packet(files: Mapping[str, bytes], nested: bool = False) -> tuple[str, str, VersionContent]:
    """(slug, title, content) from a packet's files in the folder layout; PacketError says what is wrong.

    ``versions/`` is read by :func:`parse_history`; ``nested`` (a version inside it) allows no ``versions/``.
    """
    allowed = (*FOLDERS,) if nested else (*FOLDERS, HISTORY_FOLDER)
    unknown = sorted({p.split("/", 1)[0] + ("/" if "/" in p else "") for p in files
                      if p not in (*TOP_FILES, *OPTIONAL_FILES) and p.split("/", 1)[0] not in allowed})
    if unknown:
        raise PacketError("Unknown files at the top of the packet: " + ", ".join(unknown)
                          + ". A packet holds packet.json, prompt.md, requirements.txt (optional), fixture/, "
                            "solution/, reference_tests/ and decoys/<name>/ only.")
    for name in TOP_FILES:
        if name not in files:
            raise PacketError(f"The packet has no {name} at its top level.")
    for folder in FOLDERS:
        if folder in files:
            raise PacketError(f"{folder} must be a folder, not a file.")
    meta = parse_meta(files["packet.json"])
    try:
        prompt = files["prompt.md"].decode("utf-8")
    except UnicodeDecodeError:
        raise PacketError("prompt.md must be UTF-8 text.") from None
    try:
        requirements = files.get("requirements.txt", b"").decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError:
        raise PacketError("requirements.txt must be UTF-8 text.") from None
    trees = {folder: {p.split("/", 1)[1]: d for p, d in files.items() if p.startswith(folder + "/")}
             for folder in FOLDERS}
    loose = sorted(p for p in trees["decoys"] if "/" not in p)
    if loose:
        raise PacketError("Each decoy is a folder under decoys/ (decoys/<name>/...); these files are not: "
                          + ", ".join("decoys/" + p for p in loose))
    decoys: dict[str, dict[str, bytes]] = {}
    for path, data in trees["decoys"].items():
        name, rest = path.split("/", 1)
        decoys.setdefault(name, {})[rest] = data
    content = VersionContent(
        prompt=prompt,
        fixture=trees["fixture"],
        solution=trees["solution"],
        reference_tests=trees["reference_tests"],
        test_command=meta["test_command"],
        protected_paths=meta["protected_paths"],
        forbidden_patterns=meta["forbidden_patterns"],
        refusal_hints=meta["refusal_hints"],
        time_limit_minutes=meta["time_limit_minutes"],
        rubric=meta["rubric"] or None,
        rubric_definitions=meta["rubric_definitions"] or None,
        decoys=decoys,
        requirements=requirements,
        python_version=meta["python_version"],
        model_policy=meta["model_policy"],
        model_name=meta["model_name"],
        work_mode=meta["work_mode"],
    )
    return meta["slug"], meta["title"], content
