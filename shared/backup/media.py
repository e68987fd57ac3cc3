"""The uploads' share of a backup: every file under MEDIA_ROOT, as it is."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from shared import handover

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


def restored(info: dict, say: Callable[[str], None]) -> None:
    """Give what the restore put under MEDIA_ROOT to MEDIA_ROOT's owner, when the restore ran as root and that
    is another user: the web server's (docker-compose.yml runs the restore in the workspace host's container,
    as root, and the web server as `takehome`). Else its folders would refuse the web server's next upload
    and its files (mode 0600) a reviewer's download."""
    owner = handover.media_owner()
    if owner is None:
        return
    root = folder()
    given = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if accepts(d)]  # why: dot-named folders are not the restore's
        given += [Path(dirpath) / name for name in dirnames + filenames if accepts(name)]
    handover.hand_over(*given)
    say(f"Uploads: given to MEDIA_ROOT's owner (uid {owner[0]}), the web server's user.")


PART = Part(name="media", title="uploads (MEDIA_ROOT)", folder=folder, collect=collect, accepts=accepts,
            restored=restored)
