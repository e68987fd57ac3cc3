"""The editor's JSON endpoints (sessions_app/hosted/editor.py) on a real workspace's files, without a shell.

The token authorises as for the terminal; writes need the page's CSRF token;
a save over a change on disk is 409; a frozen or closed workspace is never
written. The path safety itself is grading/tests/test_editing.py's.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret
from django.test import Client
from django.utils import timezone

from sessions_app.actions import do_start_session
from sessions_app.hosted import consumers, workspaces
from sessions_app.models import Workspace
from takehome.actions import do_extend_deadline
from takehome.models import Invitation

from .hosted_shell import shells  # noqa: F401  (the workspaces' folder and uids of the tests)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def csrf_client():
    """A browser's client: CSRF enforced, with the cookie and the header a page carries."""
    client = Client(enforce_csrf_checks=True)
    secret = _get_new_csrf_string()
    client.cookies["csrftoken"] = secret
    client.csrf_header = _mask_cipher_secret(secret)
    return client


def url(invitation, tail: str = "") -> str:
    return f"/t/{invitation.raw_token}/workspace/files{tail}"


def post(client, invitation, tail: str, body: dict, csrf: bool = True):
    headers = {"X-CSRFToken": client.csrf_header} if csrf else {}
    return client.post(url(invitation, tail), json.dumps(body), content_type="application/json", headers=headers)


def test_list_open_save_create_and_rename_through_the_link(shells, csrf_client, invitation):  # noqa: F811
    do_start_session(invitation)
    listed = csrf_client.get(url(invitation)).json()["entries"]
    assert {"path": "invoices.py", "kind": "file"}.items() <= next(e for e in listed if e["path"] == "invoices.py").items()
    opened = csrf_client.get(url(invitation, "/read"), {"path": "invoices.py"}).json()
    assert "def total" in opened["text"] and not opened["binary"]

    assert post(csrf_client, invitation, "/save", {"path": "invoices.py", "text": "X = 1\n", "base": opened["sha256"]},
                csrf=False).status_code == 403  # why: a page of another site cannot write the candidate's files
    saved = post(csrf_client, invitation, "/save", {"path": "invoices.py", "text": "X = 1\n", "base": opened["sha256"]})
    assert saved.status_code == 200 and saved.json()["message"] == "Saved invoices.py."
    again = csrf_client.get(url(invitation, "/read"), {"path": "invoices.py"}).json()
    assert again["text"] == "X = 1\n" and again["sha256"] == saved.json()["sha256"]
    assert Workspace.objects.get(invitation=invitation).last_seen_at is not None

    stale = post(csrf_client, invitation, "/save", {"path": "invoices.py", "text": "X = 2\n", "base": opened["sha256"]})
    assert stale.status_code == 409 and "changed on disk by the terminal" in stale.json()["message"]
    assert stale.json()["sha256"] == again["sha256"]

    assert post(csrf_client, invitation, "/create", {"path": "src/new.py"}).json()["path"] == "src/new.py"
    renamed = post(csrf_client, invitation, "/rename", {"path": "src/new.py", "to": "lib/moved.py"})
    assert renamed.status_code == 200 and renamed.json()["message"] == "Renamed src/new.py to lib/moved.py."
    outside = post(csrf_client, invitation, "/rename", {"path": "lib/moved.py", "to": "../../etc/x.py"})
    assert outside.status_code == 400 and "'..'" in outside.json()["message"]
    missing = csrf_client.get(url(invitation, "/read"), {"path": "nope.py"})
    assert missing.status_code == 404 and missing.json()["message"] == "There is no file nope.py in the workspace."


def expire(invitation, settings) -> None:
    Invitation.objects.filter(pk=invitation.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 1))
    invitation.refresh_from_db()


def test_a_frozen_workspace_is_not_written(shells, csrf_client, invitation, monkeypatch, settings):  # noqa: F811
    do_start_session(invitation)
    opened = csrf_client.get(url(invitation, "/read"), {"path": "invoices.py"}).json()
    Workspace.objects.filter(invitation=invitation).update(frozen_at=timezone.now())
    # the deadline passed after the editor's check of the link (which let the save through)
    expire(invitation, settings)
    monkeypatch.setattr(consumers, "refusal_for", lambda invitation: None)
    refused = post(csrf_client, invitation, "/save", {"path": "invoices.py", "text": "X\n", "base": opened["sha256"]})
    assert refused.status_code == 403 and refused.json()["message"].startswith("Time is up")
    assert post(csrf_client, invitation, "/create", {"path": "b.py"}).json()["code"] == "frozen"


def test_the_link_decides_as_for_the_terminal(shells, csrf_client, invitation):  # noqa: F811
    not_started = csrf_client.get(url(invitation))
    assert not_started.status_code == 403 and "press Start" in not_started.json()["message"]
    do_start_session(invitation)
    invitation.refresh_from_db()
    invitation.deadline = timezone.now() - timezone.timedelta(hours=1)
    invitation.save(update_fields=["deadline"])
    closed = post(csrf_client, invitation, "/save", {"path": "invoices.py", "text": "X\n", "base": "0"})
    assert closed.status_code == 403 and closed.json()["message"] == "Time is up: the workspace is closed."
    assert csrf_client.get("/t/not-a-real-token/workspace/files").status_code == 404


def test_a_frozen_workspace_whose_deadline_was_extended_is_written_again(shells, csrf_client, invitation,  # noqa: F811
                                                                          settings):
    do_start_session(invitation)
    opened = csrf_client.get(url(invitation, "/read"), {"path": "invoices.py"}).json()
    expire(invitation, settings)
    workspaces.freeze(invitation, Workspace.objects.get(invitation=invitation), timezone.now())
    do_extend_deadline(invitation, 30)
    saved = post(csrf_client, invitation, "/save", {"path": "invoices.py", "text": "X = 1\n", "base": opened["sha256"]})
    assert saved.status_code == 200 and saved.json()["message"] == "Saved invoices.py."
    row = Workspace.objects.get(invitation=invitation)
    assert row.frozen_at is None and not row.closed
    assert csrf_client.get(url(invitation, "/read"), {"path": "invoices.py"}).json()["text"] == "X = 1\n"
