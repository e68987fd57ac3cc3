"""What a workspace host running as root stores for the web server, which runs as a user of its own
(docker-compose.yml): a hosted submit's zip and its folders go to MEDIA_ROOT's owner, and the recording's
group becomes that owner's, so the web server stores the next upload there and shows both to reviewers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

from conftest import require
from sessions_app import actions
from sessions_app.hosted import workspaces

WEB_UID = WEB_GID = 54321  # a user of the web server's kind: neither root nor any sandbox's


@pytest.fixture
def web_owns_media(media_root, settings):
    require(os.geteuid() == 0, "giving files to another user takes root: run the tests as root")
    settings.MEDIA_ROOT.mkdir(parents=True, exist_ok=True)
    os.chown(settings.MEDIA_ROOT, WEB_UID, WEB_GID)
    return settings.MEDIA_ROOT


def owner(path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_uid, st.st_gid


def test_a_hosted_submits_zip_and_its_folders_are_the_web_servers(web_owns_media):
    incoming = actions._incoming(b"PK\x05\x06" + b"\0" * 18, "workspace.zip")
    assert owner(incoming.path) == (WEB_UID, WEB_GID) and owner(incoming.path.parent) == (WEB_UID, WEB_GID)
    stored = Path(settings.MEDIA_ROOT) / actions._store(incoming)
    assert owner(stored) == (WEB_UID, WEB_GID)
    for folder in (stored.parent, stored.parent.parent):  # uploads/<xx>/: the web server stores the next there
        assert owner(folder) == (WEB_UID, WEB_GID), folder
        assert os.stat(folder).st_mode & 0o700 == 0o700


def test_the_recording_is_the_hosts_and_the_web_server_may_read_it(web_owns_media, invitation, settings, tmp_path):
    settings.WORKSPACES_DIR = tmp_path / "workspaces"
    workspaces.append_marker(invitation, "red captured")
    path = workspaces.cast_path(invitation)
    assert owner(path) == (0, WEB_GID)  # root's still: the web server reads it, never changes it
    assert os.stat(path).st_mode & 0o777 == 0o640


def test_nothing_changes_under_one_user(media_root, settings, invitation, tmp_path):
    """make run: MEDIA_ROOT is the user's own, and so is everything stored."""
    settings.WORKSPACES_DIR = tmp_path / "workspaces"
    settings.MEDIA_ROOT.mkdir(parents=True, exist_ok=True)
    mine = (os.geteuid(), os.getegid())
    assert owner(settings.MEDIA_ROOT) == mine
    stored = Path(settings.MEDIA_ROOT) / actions._store(actions._incoming(b"PK\x05\x06" + b"\0" * 18, "workspace.zip"))
    assert owner(stored) == mine
    workspaces.append_marker(invitation, "submitted")
    assert owner(workspaces.cast_path(invitation)) == mine
