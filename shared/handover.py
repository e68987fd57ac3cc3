"""What a process running as root writes for the web server, which runs as a user of its own.

docker-compose.yml runs the web server unprivileged (user `takehome`) and the workspace host as root (it
mounts the workspaces' files and starts their shells under uids of their own). Both store uploads under
MEDIA_ROOT (a candidate's zip; a hosted workspace's submit), and the web server reads what the host wrote
(a reviewer's download of a hosted submit, the session's recording). So what root writes there is handed
to MEDIA_ROOT's owner: a folder of root's would refuse the web server's next upload into it, and a file of
root's (mode 0600) the reviewer's download. Nothing changes where this process is not root, or where
MEDIA_ROOT is root's own (`make run`: one user for everything).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)


def media_owner() -> tuple[int, int] | None:
    """(uid, gid) of MEDIA_ROOT when this process is root and MEDIA_ROOT is another user's; else None."""
    if os.geteuid() != 0:
        return None
    try:
        st = os.stat(settings.MEDIA_ROOT)
    except OSError:
        return None
    return None if st.st_uid == 0 else (st.st_uid, st.st_gid)


def hand_over(*paths: Path | str) -> None:
    """Give ``paths`` (files or folders this process made under MEDIA_ROOT) to MEDIA_ROOT's owner.

    A failure is logged, never raised: what was stored stays stored, and the log says what to fix.
    """
    owner = media_owner()
    if owner is None:
        return
    for path in paths:
        try:
            os.lchown(path, *owner)
        except OSError as exc:
            log.error("could not give %s to the web server's user (uid %s): %s; the web server may be refused "
                      "it (chown -R %s:%s %s)", path, owner[0], exc, owner[0], owner[1], settings.MEDIA_ROOT)


def share_with_web(path: Path | str) -> None:
    """Let the web server read ``path``, a file of root's it must show (mode 0640): its group becomes
    MEDIA_ROOT's. The owner stays root, so the web server may read it and never change it."""
    owner = media_owner()
    if owner is None:
        return
    try:
        if os.stat(path).st_gid != owner[1]:
            os.chown(path, -1, owner[1])
    except OSError as exc:
        log.error("could not let the web server's group (gid %s) read %s: %s", owner[1], path, exc)
