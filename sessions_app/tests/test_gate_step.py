"""POST /t/<token>/gate/<step>: the server witnesses red, model and green, in that order."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from sessions_app.models import GateReceipt
from takehome.models import Invitation
from takehome.tests.factories import InvitationFactory

from .conftest import url
from .helpers import FORGED_RED, GREEN_LOG, RED_LOG, receipt

pytestmark = pytest.mark.django_db


def post(client, invitation, step, body, token=None):
    path = url("gate-step", invitation, step=step) if token is None else f"/t/{token}/gate/{step}"
    return client.post(path, body, content_type="application/json")


def test_the_three_steps_in_order_are_witnessed(client, started):
    for step, log in (("red", RED_LOG), ("model", "my prompt"), ("green", GREEN_LOG)):
        r = post(client, started, step, receipt(log))
        assert r.status_code == 201, r.json()
        assert r.json()["accepted"] is True and r.json()["step"] == step
        assert GateReceipt.objects.get(pk=r.json()["receipt"]).received_at.isoformat() == r.json()["received_at"]
    rows = list(GateReceipt.objects.filter(invitation=started).values_list("step", "accepted"))
    assert rows == [("red", True), ("model", True), ("green", True)]
    red = GateReceipt.objects.get(step="red")
    assert red.log_text == RED_LOG and red.local_time == "2025-01-01T10:00:00+01:00"
    assert "artifacts/prompt.txt" in red.tree_hashes


def test_the_endpoint_is_exempt_from_csrf(started):
    r = post(Client(enforce_csrf_checks=True), started, "red", receipt(RED_LOG))
    assert r.status_code == 201


@pytest.mark.parametrize("step, log, expected", [
    ("model", "p", "No red run has been witnessed yet"),
    ("green", GREEN_LOG, "Green before model is a skip"),
])
def test_steps_out_of_order_are_refused_and_count_for_nothing(client, started, step, log, expected):
    r = post(client, started, step, receipt(log))
    assert r.status_code == 409
    assert expected in r.json()["message"] and r.json()["accepted"] is False
    # Kept as a refused receipt (a reviewer sees the attempt), never as a step.
    assert not GateReceipt.objects.filter(accepted=True).exists()


@pytest.mark.parametrize("log, expected", [
    (GREEN_LOG, "red means the test runner printed FAILED"),
    ("", "red means the test runner printed FAILED"),
    (FORGED_RED, "does not look like pytest's own output"),
])
def test_red_must_be_a_real_pytest_failure(client, started, log, expected):
    r = post(client, started, "red", receipt(log))
    assert r.status_code == 409 and expected in r.json()["message"]
    assert not GateReceipt.objects.filter(accepted=True).exists()


def test_model_needs_the_prompt_file(client, started):
    post(client, started, "red", receipt(RED_LOG))
    r = post(client, started, "model", receipt("p", files={}))
    assert r.status_code == 409 and "prompt.txt" in r.json()["message"]


def test_green_must_pass(client, started):
    post(client, started, "red", receipt(RED_LOG))
    post(client, started, "model", receipt("p"))
    r = post(client, started, "green", receipt(RED_LOG))
    assert r.status_code == 409 and "still red" in r.json()["message"]


def test_a_receipt_for_another_candidates_token_is_refused_and_stores_nothing(client, started, sample_packet):
    other = InvitationFactory(packet_version=sample_packet.latest_version())
    r = post(client, started, "red", receipt(RED_LOG, token=other.raw_token))
    assert r.status_code == 403 and "another candidate" in r.json()["message"]
    assert not GateReceipt.objects.exists()


@pytest.mark.parametrize("body, expected", [
    ("not json", "not JSON"),
    ("[1, 2]", "JSON object"),
    ('{"log": "x"}', "files"),
    ('{"log": "x", "files": {"a.py": "nothex"}}', "sha256"),
])
def test_bad_receipts_are_refused_and_store_nothing(client, started, body, expected):
    r = post(client, started, "red", body)
    assert r.status_code == 400 and expected in r.json()["message"]
    assert not GateReceipt.objects.exists()


def test_unknown_step_and_unknown_token(client, started):
    assert post(client, started, "upload", receipt(RED_LOG)).status_code == 404
    r = post(client, started, "red", receipt(RED_LOG), token="not-a-token")
    assert r.status_code == 404 and r.json()["message"] == "This link is not valid."
    assert not GateReceipt.objects.exists()


def test_steps_before_start_are_refused(client, invitation):
    r = post(client, invitation, "red", receipt(RED_LOG))
    assert r.status_code == 409 and "Press Start" in r.json()["message"]
    assert not GateReceipt.objects.exists()


@pytest.mark.parametrize("step, log", [("red", RED_LOG), ("model", "my prompt"), ("green", GREEN_LOG)])
def test_steps_after_the_deadline_and_grace_are_refused_like_a_late_upload_and_kept(client, started, settings,
                                                                                 step, log):
    settings.UPLOAD_GRACE_S = 300
    Invitation.objects.filter(pk=started.pk).update(deadline=timezone.now() - timedelta(seconds=301))
    r = post(client, started, step, receipt(log))
    assert r.status_code == 403  # as a late upload is answered
    body = r.json()
    assert body["accepted"] is False and body["step"] == step
    assert body["message"].startswith("Time is up: the deadline was ")
    assert "the gate closed 5 minutes after it" in body["message"]
    assert f"This {step} step is kept as refused" in body["message"]
    kept = GateReceipt.objects.get(pk=body["receipt"])
    assert (kept.step, kept.accepted) == (step, False) and kept.refusal == body["message"]
    assert kept.log_text == log and kept.local_time == "2025-01-01T10:00:00+01:00"  # what was sent, for the reviewer


def test_steps_within_the_grace_period_are_still_witnessed(client, started, settings):
    settings.UPLOAD_GRACE_S = 300
    Invitation.objects.filter(pk=started.pk).update(deadline=timezone.now() - timedelta(seconds=200))
    r = post(client, started, "red", receipt(RED_LOG))
    assert r.status_code == 201 and r.json()["accepted"] is True


def test_a_late_step_and_a_late_upload_say_it_in_the_same_words(client, started, settings, media_root):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from .helpers import honest_zip

    Invitation.objects.filter(pk=started.pk).update(deadline=timezone.now() - timedelta(hours=1))
    step = post(client, started, "red", receipt(RED_LOG)).json()["message"]
    upload = client.post(url("upload", started), {"archive": SimpleUploadedFile("w.zip", honest_zip())},
                         headers={"X-Takehome-Client": "gate"})
    assert upload.status_code == 403
    deadline = upload.json()["message"].split(", and ")[0]
    assert step.split(", and ")[0] == deadline and deadline.startswith("Time is up: the deadline was ")


def test_without_a_model_green_follows_red_and_a_model_step_is_refused(client, started):
    type(started.packet_version).objects.filter(pk=started.packet_version.pk).update(model_policy="none")
    r = post(client, started, "green", receipt(GREEN_LOG))
    assert r.status_code == 409 and "Green before red is a skip" in r.json()["message"]
    assert post(client, started, "red", receipt(RED_LOG)).status_code == 201
    r = post(client, started, "model", receipt("my prompt"))
    assert r.status_code == 409 and "uses no model, so there is no model step" in r.json()["message"]
    r = post(client, started, "green", receipt(GREEN_LOG))
    assert r.status_code == 201 and r.json()["accepted"] is True
    assert list(GateReceipt.objects.filter(accepted=True).values_list("step", flat=True)) == ["red", "green"]
