"""Backups that hold everything an installation keeps: `manage.py backup` and `manage.py restore`.

One file, a gzip'd tar, its members in this order:

    takehome-backup.json   the format and its version, first, so that a file a restore cannot read
                           is refused before anything else is read
    database/...           the database, as its own engine snapshots it (database.py)
    <part>/...             the files each part keeps on this server's disk: media/ (MEDIA_ROOT, the
                           uploads) here, and what the apps register (the candidate's side: workspaces/,
                           the hosted sessions' recordings and files)
    manifest.json          last: what is inside (the database's tables and rows, each part's counts)
                           and every file's size, mode and sha256

A restore unpacks the whole file into a folder of its own and checks all of it against the
manifest before it touches the installation (archive.py); only then does it replace the
database, then the files (actions.py).

What an app keeps on disk is its own business: it registers a Part in its ``AppConfig.ready``,
as it registers its readiness checks (shared/health.py), so this package imports no app.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .archive import Collector

FORMAT = "takehome-backup"
VERSION = 1  # the format this code writes, and the newest it reads


class BackupRefused(Exception):
    """A backup or restore that cannot be done; the message says why and what to do, for an operator."""


def _nothing(*args) -> None:
    return None


@dataclass(frozen=True)
class Part:
    """Files an app keeps on this server's disk, which a backup holds beside the database.

    ``collect`` adds the part's files to a backup through the Collector it is given; ``accepts``
    says which names (relative to ``folder``) a backup of it may hold, and a restore writes no
    other; ``owns`` says which entries at the top of ``folder`` are the part's, the ones a restore
    replaces (another part or program may keep files beside them). ``busy`` says why the part
    cannot be replaced now (None when it can); ``restored`` runs once the database and the
    files are in place, with the part's facts from the manifest and a function that prints a line.
    """

    name: str  # its folder in the archive, and its key in the manifest
    title: str  # what a person calls it, in what the commands print
    folder: Callable[[], Path]  # where it lives on this server (read from the settings when asked)
    collect: Callable[[Collector], None]
    accepts: Callable[[str], bool]
    owns: Callable[[str], bool] = field(default=lambda entry: True)
    busy: Callable[[], str | None] = field(default=_nothing)
    restored: Callable[[dict, Callable[[str], None]], None] = field(default=_nothing)


_PARTS: dict[str, Part] = {}


def register(part: Part) -> None:
    """Add ``part`` to every backup (an app's ``ready``); registering a name again replaces it."""
    _PARTS[part.name] = part


def parts() -> list[Part]:
    return list(_PARTS.values())
