"""What the candidate can observe of grading: nothing that moves with it.

Through the real web server and a real worker: the candidate's status JSON,
upload list and receipt page read the same just after the upload and once
the worker has graded (or refused) it, so the time grading took, which the
candidate's own code can stretch while the packet's hidden tests call it,
never reaches them. Reviewers see the grading as it goes.
"""

from __future__ import annotations

import json
import urllib.request
import uuid

import pytest

from sessions_app.models import Submission

from .conftest import url
from .helpers import download_tree, run_gate
from .test_end_to_end import symlink_zip, wait_graded, work_through_the_gate

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_env(worker_env):
    # why: this candidate is a script that goes from red to green in seconds (see test_end_to_end).
    return {**worker_env, "TAKEHOME_MIN_RED_TO_GREEN_S": "0"}


def get(base: str, path: str, **headers) -> bytes:
    request = urllib.request.Request(base + path, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()


def candidate_view(base: str, invitation) -> dict:
    """Everything the candidate's side says about the uploads, from the server over HTTP.

    The clock (server_time, seconds_left) moves by itself and is left out.
    """
    status = json.loads(get(base, url("status", invitation)))
    status.pop("server_time"), status.pop("seconds_left")
    view = {"status": status, "list": get(base, url("landing", invitation), **{"HX-Request": "true"})}
    for s in status["submissions"]:
        view[s["id"]] = get(base, url("submission-detail", invitation, pk=s["id"]), **{"HX-Request": "true"})
    return view


def post_zip(base: str, invitation, data: bytes) -> dict:
    """A real multipart upload, as gate.py sends one."""
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"archive\"; filename=\"w.zip\"\r\n"
            f"Content-Type: application/zip\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(base + url("upload", invitation), data=body, method="POST", headers={
        "Content-Type": f"multipart/form-data; boundary={boundary}", "X-Takehome-Client": "gate"})
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 201
        return json.loads(response.read())


def test_the_candidate_sees_nothing_of_grading_move_while_reviewers_do(
        ready, client, live_server, settings, sample_packet, celery_worker_proc, reviewer, tmp_path):
    from django.test import Client

    from takehome.tests.factories import InvitationFactory

    settings.SITE_URL = live_server.url
    settings.UPLOAD_INTERVAL_S = 0
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    assert client.post(url("start", invitation), {"confirm": "yes"}).status_code == 302
    tree = download_tree(live_server.url, invitation.raw_token, tmp_path)
    work_through_the_gate(tree)
    submitted = run_gate(tree, "submit")
    assert submitted.returncode == 0, submitted.stdout
    upload = Submission.objects.get(invitation=invitation)
    before = candidate_view(live_server.url, invitation)
    assert wait_graded(upload.pk, celery_worker_proc).status == Submission.Status.GRADED
    assert candidate_view(live_server.url, invitation) == before

    assert "It will be reviewed." in submitted.stdout and before["status"]["submissions"][0]["status"] == "received"
    assert b"received, will be reviewed" in before[upload.pk] and b"hx-trigger" not in before["list"]
    assert "received" in run_gate(tree, "status").stdout and "graded" not in run_gate(tree, "status").stdout
    desk = Client()
    desk.force_login(reviewer)
    assert ">Graded</span>" in desk.get(f"/review/{upload.pk}/").content.decode()

    # A zip that cannot be unpacked: said in the upload's own answer, and nothing moves when the worker refuses it.
    answer = post_zip(live_server.url, invitation, symlink_zip(tmp_path))
    assert answer["status"] == "rejected" and "symbolic link" in answer["refusal"]
    before = candidate_view(live_server.url, invitation)
    assert [s["status"] for s in before["status"]["submissions"]] == ["rejected", "received"]
    refused = wait_graded(answer["submission"], celery_worker_proc)
    assert refused.status == Submission.Status.REJECTED and refused.reject_reason == answer["refusal"]
    assert candidate_view(live_server.url, invitation) == before
