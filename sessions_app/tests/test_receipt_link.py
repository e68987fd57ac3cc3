"""An upload's receipt points at the Submission it received (GateReceipt.submission), not at whichever
upload shares its hash and server time; and sessions_app/actions.py is the only module that writes receipts."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from grading.pages import with_upload_verdicts
from sessions_app.models import GateReceipt, Submission

from .conftest import url
from .helpers import honest_zip

pytestmark = pytest.mark.django_db
Step = GateReceipt.Step


def twin_uploads(invitation):
    """Two uploads of the same zip stored in the same instant, the first refused as it arrived."""
    now = timezone.now()
    twins = [Submission.objects.create(invitation=invitation, archive=f"uploads/{n}.zip", sha256="ab" * 32, size=1,
                                       uploaded_at=now, unpack_refusal=refusal)
             for n, refusal in ((1, "the zip holds a link out of its folder"), (2, ""))]
    return now, twins


def test_an_upload_through_the_page_gets_a_receipt_that_points_at_it(client, started, media_root, settings):
    settings.UPLOAD_INTERVAL_S = 0
    for name in ("first.zip", "second.zip"):
        client.post(url("upload", started), {"archive": SimpleUploadedFile(name, honest_zip())})
    assert Submission.objects.count() == 2
    for upload in Submission.objects.all():
        receipt = GateReceipt.objects.get(submission=upload)
        assert (receipt.step, receipt.sha256, receipt.received_at) == (Step.UPLOAD, upload.sha256, upload.uploaded_at)
        page = client.get(url("submission-detail", started, pk=upload.pk)).content.decode()
        assert receipt.received_at.strftime("%H:%M:%S") in page


def test_twin_uploads_each_keep_their_own_verdict(started):
    now, (refused, fine) = twin_uploads(started)
    receipts = [GateReceipt.objects.create(invitation=started, step=Step.UPLOAD, received_at=now,
                                           sha256=upload.sha256, submission=upload) for upload in (refused, fine)]
    rows = with_upload_verdicts([{"id": r.pk, "step": "upload"} for r in receipts], receipts, [refused, fine])
    assert [row["not_accepted"] for row in rows] == ["the zip holds a link out of its folder", ""]


def test_the_migration_links_the_receipts_stored_before_each_to_one_upload(started):
    now, twins = twin_uploads(started)
    old = [GateReceipt.objects.create(invitation=started, step=Step.UPLOAD, received_at=now, sha256="ab" * 32)
           for _ in twins]
    refused = GateReceipt.objects.create(invitation=started, step=Step.UPLOAD, received_at=now, sha256="ab" * 32,
                                         accepted=False, refusal="too soon")
    migration = importlib.import_module("sessions_app.migrations.0011_gatereceipt_submission")
    migration.link_receipts(apps, None)
    linked = {r.pk: r.submission_id for r in GateReceipt.objects.all()}
    assert sorted(linked[r.pk] for r in old) == sorted(u.pk for u in twins)
    assert linked[refused.pk] is None


WRITES = {"create", "bulk_create", "update", "get_or_create", "update_or_create", "delete"}


def receipt_writes(source: str) -> int:
    """How many times ``source`` makes or changes GateReceipt rows (create, bulk_create, update, the constructor)."""
    tree = ast.parse(source)
    found = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "GateReceipt":
            found += 1
        elif isinstance(func, ast.Attribute) and func.attr in WRITES:
            names = {n.id for n in ast.walk(func.value) if isinstance(n, ast.Name)} | {
                n.attr for n in ast.walk(func.value) if isinstance(n, ast.Attribute)}
            found += bool({"GateReceipt", "receipts"} & names)
    return found



@pytest.mark.parametrize("source, writes", [
    ("GateReceipt.objects.create(invitation=i, step='red')", 1),
    ("GateReceipt(invitation=i).save()", 1),
    ("invitation.receipts.create(step='red')", 1),
    ("GateReceipt.objects.filter(pk=1).update(accepted=False)", 1),
    ("GateReceipt.objects.filter(invitation=i).exclude(step='upload').count()", 0),
    ("Submission.objects.create(invitation=i)", 0),
])
def test_the_write_finder_sees_receipts_made_or_changed(source, writes):
    assert receipt_writes(source) == writes


def test_only_sessions_app_actions_makes_receipts():
    """The receipt's one owner: every receipt (and an upload's link to its Submission) is written there."""
    root = Path(__file__).resolve().parents[2]
    offenders = {}
    for app in ("takehome", "sessions_app", "grading", "shared"):
        for path in sorted((root / app).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if "/tests/" in relative or "/migrations/" in relative or relative == "sessions_app/actions.py":
                continue
            if writes := receipt_writes(path.read_text()):
                offenders[relative] = writes
    assert offenders == {}, f"make receipts only in sessions_app/actions.py: {offenders}"
