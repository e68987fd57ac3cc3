"""Which of the candidate's artifacts are there, and how to read them.

The candidate's files come from every kind of machine: a log redirected by
PowerShell 5 is UTF-16 with a byte-order mark, Notepad adds a UTF-8 BOM, and
Windows tools write CRLF line endings. Every reader of an artifact goes through
``read_artifact`` so that the checks after it see plain ``\\n`` text.
"""

from __future__ import annotations

import codecs
from pathlib import Path

ARTIFACTS_DIR = "artifacts"
ARTIFACT_NAMES = (
    "red.log",
    "prompt.txt",
    "model.md",
    "model_allowed.at",
    "green.log",
    "refuse.md",
    "notes.md",
)
# The model step's artifacts: not asked for when the packet's policy is "none".
MODEL_ARTIFACTS = ("prompt.txt", "model.md", "model_allowed.at")
DEFAULT_LIMIT = 256 * 1024

_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _artifact_path(tree: Path, name: str) -> Path | None:
    """The artifact's path, or None when it is absent or not a regular file."""
    path = Path(tree) / ARTIFACTS_DIR / name
    # The unpacker refuses symlinks, but the checks may also run on a folder
    # a person points them at: never follow a link out of the tree.
    if path.is_symlink() or not path.is_file():
        return None
    return path


def _read_capped(path: Path, limit: int) -> bytes:
    """The whole file when small; otherwise its head and its tail.

    A pytest log's closing "1 failed in 0.03s" line is at the very end, so a
    plain prefix of a long log would hide the one line that matters most.
    """
    size = path.stat().st_size
    with path.open("rb") as f:
        if size <= limit:
            return f.read(limit)
        half = (limit // 2) & ~1  # even, so UTF-16 stays aligned
        head = f.read(half)
        f.seek(size - half)
        tail = f.read(half)
    marker = f"\n[... {size - 2 * half} bytes not shown ...]\n"
    # The marker must be in the file's own encoding, or it would garble the tail.
    if head.startswith(codecs.BOM_UTF16_LE):
        return head + marker.encode("utf-16-le") + tail
    if head.startswith(codecs.BOM_UTF16_BE):
        return head + marker.encode("utf-16-be") + tail
    return head + marker.encode("utf-8") + tail


def _encoding_of(data: bytes) -> str:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    return "utf-8"


def decode_text(data: bytes) -> str:
    """Decode bytes from any candidate machine into text with ``\\n`` line ends.

    UTF-8 unless a byte-order mark says UTF-16; undecodable bytes become U+FFFD
    rather than failing, since a damaged byte must not hide the rest of a log.
    """
    text = data.decode(_encoding_of(data), errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_artifact(tree: Path, name: str, limit: int = DEFAULT_LIMIT) -> str | None:
    """The text of ``tree/artifacts/<name>``, or None when it is not there.

    At most ``limit`` bytes are read (head and tail of a longer file), decoded
    as UTF-8 with errors replaced, BOM removed and CRLF turned into LF.
    """
    path = _artifact_path(tree, name)
    if path is None:
        return None
    return decode_text(_read_capped(path, limit))


def check_artifacts(tree: Path, model_step: bool = True) -> dict[str, bool | None]:
    """For each expected artifact: present and not blank (after strip).

    Without a model step (policy "none") a model artifact that is absent is
    None, "not asked for", rather than False, "missing".
    """
    found: dict[str, bool | None] = {}
    for name in ARTIFACT_NAMES:
        text = read_artifact(tree, name)
        found[name] = bool(text and text.strip())
        if not found[name] and not model_step and name in MODEL_ARTIFACTS:
            found[name] = None
    return found
