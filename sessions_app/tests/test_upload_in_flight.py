"""An upload is judged by when its request began, and every refused upload is kept (step 12).

Through daphne (takehome.asgi), which hands a request to Django only once its
whole body has arrived: the test sends the request line and headers with
``Expect: 100-continue``, waits for daphne's "100 Continue" (the request has
begun on the server), closes uploads, and only then sends the zip.
"""

from __future__ import annotations

import json
import socket
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from grading.tests.reviewing import make_submission
from sessions_app.actions import do_start_session
from sessions_app.models import GateReceipt, Submission
from takehome.models import Invitation
from takehome.tests.factories import InvitationFactory

from .helpers import daphne_serving, honest_zip

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def daphne(settings, monkeypatch, media_root):
    settings.UPLOAD_INTERVAL_S = 0
    with daphne_serving(settings, monkeypatch) as url:
        yield url


@pytest.fixture
def candidate(sample_packet):
    invitation = InvitationFactory(packet_version=sample_packet.latest_version())
    do_start_session(invitation)
    return invitation


def close_uploads_now(invitation, settings) -> None:
    """Uploads close this instant: the deadline is now minus the grace period."""
    deadline = timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S)
    Invitation.objects.filter(pk=invitation.pk).update(deadline=deadline)


def read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def upload(url: str, invitation, *, before_body=None, extra_headers: str = "") -> tuple[int, dict]:
    """POST a zip as gate.py does; ``before_body`` runs once daphne has read the request line and headers."""
    boundary = "----t" + uuid.uuid4().hex
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="archive"; filename="w.zip"\r\n'
            "Content-Type: application/zip\r\n\r\n").encode() + honest_zip() + f"\r\n--{boundary}--\r\n".encode()
    host, port = url.removeprefix("http://").split(":")
    head = (f"POST /t/{invitation.raw_token}/upload HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "X-Takehome-Client: gate\r\nAccept: application/json\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len(body)}\r\n"
            f"Expect: 100-continue\r\nConnection: close\r\n{extra_headers}\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head)
        assert b"100 Continue" in read_until(sock, b"\r\n\r\n")  # the request has begun on the server
        if before_body is not None:
            before_body()
        sock.sendall(body)
        answer = read_until(sock, b"}")
        while True:  # the rest of the JSON body, up to the closed connection
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, json.loads(answer.split(b"\r\n\r\n", 1)[1])


def test_an_upload_under_way_when_uploads_close_is_taken(daphne, candidate, settings):
    status, reply = upload(daphne, candidate, before_body=lambda: close_uploads_now(candidate, settings))
    assert status == 201, reply
    assert Submission.objects.filter(invitation=candidate).count() == 1
    assert not GateReceipt.objects.filter(step="upload", accepted=False).exists()


def test_an_upload_still_arriving_past_the_allowance_is_refused_and_kept(settings, monkeypatch, media_root,
                                                                         candidate):
    settings.UPLOAD_IN_FLIGHT_S = 0  # no time at all for the body after uploads close
    settings.UPLOAD_INTERVAL_S = 0
    with daphne_serving(settings, monkeypatch) as url:
        status, reply = upload(url, candidate, before_body=lambda: close_uploads_now(candidate, settings))
    assert status == 403 and reply["code"] == "deadline", reply
    assert "had not arrived whole 0 seconds after they closed" in reply["message"]
    assert not Submission.objects.exists()
    refused = GateReceipt.objects.get(invitation=candidate, step="upload")
    assert not refused.accepted and refused.refusal == reply["message"][:300]


def test_an_upload_begun_after_uploads_closed_is_refused_whatever_its_headers_say(daphne, candidate, settings):
    close_uploads_now(candidate, settings)
    began = (timezone.now() - timedelta(hours=1)).timestamp()
    forged = (f"X-Request-Start: t={began:.3f}\r\nTakehome-Request-Began: {began}\r\n"
              f"takehome.request_began: {began}\r\n")
    status, reply = upload(daphne, candidate, extra_headers=forged)
    assert status == 403 and reply["code"] == "deadline", reply
    assert not Submission.objects.exists()
    assert GateReceipt.objects.filter(invitation=candidate, step="upload", accepted=False).count() == 1


def test_refused_uploads_are_on_the_board_and_the_review_page(client, recruiter, reviewer, sample_packet,
                                                              settings):
    submission = make_submission(sample_packet)
    invitation = submission.invitation
    do_start_session(invitation)
    close_uploads_now(invitation, settings)
    client.force_login(recruiter)
    response = client.post(f"/t/{invitation.link_token()}/upload", {"archive": b"not a zip"},
                           headers={"X-Takehome-Client": "gate"})
    assert response.status_code == 403
    refused = GateReceipt.objects.get(invitation=invitation, step="upload", accepted=False)
    board = client.get(f"/packets/{sample_packet.slug}/invitations/").content.decode()
    assert 'data-refused-uploads="1"' in board and "1 upload refused" in board
    client.force_login(reviewer)
    page = client.get(f"/review/{submission.pk}/").content.decode()
    section = page.split('id="refused-uploads"')[1].split("</section>")[0]
    assert "Uploads the server refused (1)" in section and f'data-refused-upload="{refused.pk}"' in section
    assert "Time is up" in section


def test_a_too_soon_retry_reads_for_reviewers_and_is_no_refused_upload_on_the_board(
        client, recruiter, reviewer, sample_packet, settings):
    # why apart from the others: the candidate was told to wait and may upload again, so nothing was lost
    settings.UPLOAD_INTERVAL_S = 60
    submission = make_submission(sample_packet)  # stored just now
    invitation = submission.invitation
    do_start_session(invitation)
    gate = {"X-Takehome-Client": "gate"}
    soon = client.post(f"/t/{invitation.link_token()}/upload", {"archive": b"PK"}, headers=gate)
    assert soon.status_code == 429 and "then upload again" in soon.json()["message"]  # the candidate's words
    too_soon = GateReceipt.objects.get(invitation=invitation, step="upload", accepted=False)
    assert too_soon.refusal.startswith("Too soon: sent ") and "the candidate was told to wait" in too_soon.refusal
    client.force_login(recruiter)
    board = client.get(f"/packets/{sample_packet.slug}/invitations/").content.decode()
    assert "data-refused-uploads" not in board and "upload refused" not in board

    close_uploads_now(invitation, settings)
    late = client.post(f"/t/{invitation.link_token()}/upload", {"archive": b"PK"}, headers=gate)
    assert late.status_code == 403
    board = client.get(f"/packets/{sample_packet.slug}/invitations/").content.decode()
    assert 'data-refused-uploads="1"' in board and "1 upload refused" in board
    assert 'title="Time is up' in board  # the newest counted refusal, not the retry

    client.force_login(reviewer)
    page = client.get(f"/review/{submission.pk}/").content.decode()
    section = page.split('id="refused-uploads"')[1].split("</section>")[0]
    assert "Uploads the server refused (2)" in section and f'data-refused-upload="{too_soon.pk}"' in section
    retry = section.split(f'data-refused-upload="{too_soon.pk}"')[1].split("</li>")[0]
    assert "Too soon: sent " in retry and "after the previous upload" in retry
    assert "the candidate was told to wait" in retry and "Wait " not in retry and "your" not in retry.lower()
