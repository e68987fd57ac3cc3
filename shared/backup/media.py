"""The uploads' share of a backup: every file under MEDIA_ROOT, as it is."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

from . import Part
from .archive import Collector


def folder() -> Path:
    return Path(settings.MEDIA_ROOT)


def accepts(rel: str) -> bool:
    # why no dot-named part: those are files being written (an upload in flight, under uploads/.incoming),
    # never a stored one; stored uploads are named by their content, once written never changed
    return not any(part.startswith(".") for part in rel.split("/"))


def collect(c: Collector) -> None:
    root = folder()
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):  # never into a link to a folder
        dirnames[:] = sorted(d for d in dirnames if accepts(d))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if accepts(rel):
                c.add_file(rel, path)


PART = Part(name="media", title="uploads (MEDIA_ROOT)", folder=folder, collect=collect, accepts=accepts)
