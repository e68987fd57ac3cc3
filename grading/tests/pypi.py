"""A local package index for the runner-environment tests: hand-made wheels, no network.

``write_index`` lays out a PEP 503 simple index (``simple/<name>/index.html`` linking
to ``files/``) that pip reads through a ``file://`` URL.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import shutil
import zipfile
from collections.abc import Iterable
from pathlib import Path

from grading.tests.zips import tar_gz


def sha256_of(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _dist(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def make_wheel(folder: Path, name: str, version: str, *, requires: Iterable[str] = (),
               requires_python: str | None = None) -> Path:
    """A pure-Python wheel holding the module ``<name>.py`` with ``VERSION = "<version>"``."""
    dist = _dist(name)
    info = f"{dist}-{version}.dist-info"
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    metadata += [f"Requires-Dist: {requirement}" for requirement in requires]
    if requires_python:
        metadata.append(f"Requires-Python: {requires_python}")
    files = {
        f"{dist}.py": f'VERSION = "{version}"\n'.encode(),
        f"{info}/METADATA": ("\n".join(metadata) + "\n").encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [_record_line(path, data) for path, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = Path(folder) / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, data in files.items():
            wheel.writestr(member, data)
    return path


def make_sdist(folder: Path, name: str, version: str, *, setup_writes: Path) -> Path:
    """A source-only release whose setup.py, if pip ever ran it, would create ``setup_writes``."""
    base = f"{name}-{version}"
    files = {
        f"{base}/PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{base}/setup.py": f"open({str(setup_writes)!r}, 'w').write('setup.py ran')\n".encode(),
    }
    return tar_gz(Path(folder) / f"{base}.tar.gz", files)


def write_index(root: Path, files: Iterable[Path], *, requires_python: dict[str, str] | None = None) -> str:
    """A simple index under ``root`` listing ``files`` (wheels and sdists); returns its file:// URL.

    ``requires_python`` maps a file name to the Requires-Python the index announces for it, as PyPI does.
    """
    requires_python = requires_python or {}
    (root / "files").mkdir(parents=True, exist_ok=True)
    projects: dict[str, list[str]] = {}
    for path in files:
        shutil.copy(path, root / "files" / path.name)
        project = re.split(r"-\d", path.name, maxsplit=1)[0]
        checksum = sha256_of(path)
        attribute = ""
        if path.name in requires_python:
            attribute = f' data-requires-python="{html.escape(requires_python[path.name])}"'
        projects.setdefault(re.sub(r"[-_.]+", "-", project).lower(), []).append(
            f'<a href="../../files/{path.name}#sha256={checksum}"{attribute}>{path.name}</a>'
        )
    for project, links in projects.items():
        folder = root / "simple" / project
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    return (root / "simple").as_uri()
