"""After the deadline the workspace page shows what was submitted when, and the frozen files read-only: the tree,
and each file's contents, escaped, in a <pre> the keyboard reaches.

The frozen workspace is made here as the sweep leaves it (its row frozen and closed, its files in saved.tar,
nothing mounted), so these run without root.
"""

from __future__ import annotations

import io
import tarfile
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from grading.engine.sandbox import shell
from sessions_app import actions
from sessions_app.hosted import workspaces
from sessions_app.models import Submission, Workspace
from takehome.models import Invitation

from .conftest import url

pytestmark = pytest.mark.django_db


def frozen(invitation: Invitation, files: dict[str, bytes]) -> Workspace:
    """The invitation's workspace as the deadline's sweep leaves it: frozen, closed, its files in saved.tar."""
    row = Workspace.objects.create(invitation=invitation, host=settings.WORKSPACE_HOST, uid=60999,
                                   frozen_at=timezone.now(), closed=True, deadline_settled_at=timezone.now())
    folder = workspaces.folder_for(invitation)
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / "saved.tar", "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return row


@pytest.fixture
def closed(started, settings, tmp_path):
    settings.WORKSPACES_DIR = tmp_path / "workspaces"
    Invitation.objects.filter(pk=started.pk).update(deadline=timezone.now() - timedelta(hours=2))
    started.refresh_from_db()
    return started


FILES = {
    "invoices.py": b"def total(rows):\n    return sum(int(r['cents']) for r in rows)  # <script>alert(1)</script>\n",
    "tests/test_invoices.py": b"def test_refunds():\n    assert True\n",
    "artifacts/refuse.md": b"Dropping the refund rows hides the bug.\n",
    "__pycache__/invoices.cpython-311.pyc": b"\x00\x01",
    "data.bin": b"\xff\xfe\x00binary",
}


def test_the_closed_workspace_page_shows_the_tree_and_what_was_submitted_when(client, closed):
    frozen(closed, FILES)
    html = client.get(url("workspace", closed)).content.decode()
    section = html.split('id="workspace-closed"')[1]
    assert 'id="terminal"' not in html
    files = [part.split('"')[0] for part in section.split('data-file="')[1:]]
    assert files == ["artifacts/refuse.md", "tests/test_invoices.py", "data.bin", "invoices.py"]  # no caches
    assert ">artifacts/</span>" in section and "/workspace/read-only?path=tests/test_invoices.py" in section
    assert 'id="kept-submissions-none"' in section  # nothing submitted


def test_each_file_is_shown_escaped_and_read_only(client, closed):
    frozen(closed, FILES)
    html = client.get(url("workspace-read-only", closed), {"path": "invoices.py"}).content.decode()
    shown = html.split('id="closed-file-text"')[1].split("</pre>")[0]
    assert 'tabindex="0"' in shown and "&lt;script&gt;alert(1)&lt;/script&gt;" in shown and "<script>" not in shown
    assert 'aria-current="page"' in html.split('data-file="invoices.py"')[1].split(">")[0]
    assert "<form" not in html.split('id="workspace-closed"')[1]  # nothing to change or save
    binary = client.get(url("workspace-read-only", closed), {"path": "data.bin"}).content.decode()
    assert 'id="closed-file-binary"' in binary and "9 bytes" in binary
    unknown = client.get(url("workspace-read-only", closed), {"path": "../../etc/passwd"}).content.decode()
    assert 'id="closed-file-unknown"' in unknown and "root:" not in unknown


def test_a_file_larger_than_shown_is_named_not_read(client, closed):
    frozen(closed, {"a.py": b"x = 1\n", "huge.bin": b"x" * (workspaces.SHOWN_FILE_BYTES + 1)})
    html = client.get(url("workspace-read-only", closed), {"path": "huge.bin"}).content.decode()
    assert 'id="closed-file-too-large"' in html


def test_the_submissions_are_listed_with_their_times_and_the_deadlines_marked(client, closed):
    frozen(closed, FILES)
    for at_deadline in (False, True):
        Submission.objects.create(invitation=closed, archive="uploads/x.zip", sha256="0" * 64, size=1, via="hosted",
                                  at_deadline=at_deadline, uploaded_at=timezone.now())
    html = client.get(url("workspace", closed)).content.decode()
    kept = html.split('id="kept-submissions"')[1].split("</ul>")[0]
    assert kept.count("<li") == 2 and "your Submit" in kept
    assert "submitted by the server at the deadline" in kept and "<time" in kept
    at_deadline = Submission.objects.get(invitation=closed, at_deadline=True)
    receipt = client.get(url("submission-detail", closed, pk=at_deadline.pk)).content.decode()
    assert 'id="receipt-at-deadline"' in receipt and 'id="receipt-late"' not in receipt


def test_before_the_sweep_froze_it_the_page_says_to_come_back(client, closed):
    Workspace.objects.create(invitation=closed, host=settings.WORKSPACE_HOST, uid=60999)
    html = client.get(url("workspace", closed)).content.decode()
    assert 'id="closed-files-waiting"' in html


def test_while_the_workspace_is_open_the_files_page_sends_to_the_workspace(client, started):
    response = client.get(url("workspace-read-only", started), {"path": "invoices.py"})
    assert response.status_code == 302 and response.url.endswith("/workspace")


def test_frozen_files_reads_saved_tar_without_caches_and_caps_each_file(closed):
    row = frozen(closed, {**FILES, "big.bin": b"0" * 1025})
    files = shell.frozen_files(workspaces.workspace_for(closed, row), 1024)
    assert files["invoices.py"] == FILES["invoices.py"] and files["big.bin"] is None
    assert not any("__pycache__" in name for name in files)


def test_the_files_digest_tells_files_apart_and_not_their_order():
    """The digest the deadline compares by is the files', not the zip's (whose entries carry the time)."""
    assert actions.files_digest({"a": b"1", "b": b"2"}) == actions.files_digest({"b": b"2", "a": b"1"})
    assert actions.files_digest({"a": b"1"}) != actions.files_digest({"a": b"2"})
    assert actions.files_digest({"a/b": b""}) != actions.files_digest({"a": b"/b"})
