"""A packet version's work mode is enforced by the server on every candidate route (step 12).

hosted: no download, no gate receipt from gate.py, no zip upload (409 with a
sentence, nothing stored). zip: no workspace page, capture or submit (the
terminal's WebSocket already closes with 4403: test_terminal.py). Over the
real web server (live_server) with real multipart uploads. And on a
hosted-only version only what the server witnessed opens the model window
and counts for the model and green order checks.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import pytest

from sessions_app import actions
from sessions_app.actions import GateReport, do_start_session, refusal_for
from sessions_app.model_window import window as model_window
from sessions_app.models import GateReceipt, Submission
from takehome.tests.factories import InvitationFactory, make_packet

from .conftest import url
from .helpers import RED_LOG, honest_zip, receipt

live = pytest.mark.django_db(transaction=True)


def started_in(mode: str, **overrides):
    invitation = InvitationFactory(packet_version=make_packet(work_mode=mode, **overrides).latest_version())
    do_start_session(invitation)
    return invitation


def call(base: str, path: str, method: str = "GET", body: bytes | None = None, headers: dict | None = None):
    """(status, body as text) of one request to the live server."""
    request = urllib.request.Request(base + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def multipart(data: bytes) -> tuple[bytes, str]:
    boundary = "----t" + uuid.uuid4().hex
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="archive"; filename="w.zip"\r\n'
            "Content-Type: application/zip\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


GATE = {"Accept": "application/json", "X-Takehome-Client": "gate"}


@live
def test_a_hosted_only_packet_refuses_every_zip_route_with_409_and_stores_nothing(live_server):
    invitation = started_in("hosted")
    t = f"/t/{invitation.raw_token}"

    status, text = call(live_server.url, t + "/download")
    assert status == 409 and "hosted workspace only" in text
    status, text = call(live_server.url, t + "/download", headers=GATE)
    assert status == 409 and json.loads(text)["code"] == "work_mode"

    for step in ("red", "model", "green"):
        status, text = call(live_server.url, f"{t}/gate/{step}", "POST", receipt(RED_LOG).encode(),
                            {**GATE, "Content-Type": "application/json"})
        assert status == 409, text
        assert json.loads(text)["message"] == actions.NOT_ZIP

    body, content_type = multipart(honest_zip())
    status, text = call(live_server.url, t + "/upload", "POST", body, {**GATE, "Content-Type": content_type})
    assert status == 409 and json.loads(text)["message"] == actions.NOT_ZIP
    assert not GateReceipt.objects.filter(step__in=["red", "model", "green"]).exists()
    assert not Submission.objects.exists()


@live
def test_a_zip_only_packet_refuses_the_workspace_routes_with_409(live_server, client):
    invitation = started_in("zip")
    t = f"/t/{invitation.raw_token}"
    status, text = call(live_server.url, t + "/workspace")
    assert status == 409 and "no hosted workspace" in text
    # the buttons' posts keep CSRF: Django's client posts them as the page would
    for path in ("/workspace/capture/red", "/workspace/submit"):
        response = client.post(t + path, headers={"Accept": "application/json"})
        assert response.status_code == 409, (path, response.content)
        assert response.json()["message"] == actions.NOT_HOSTED
        assert b"no hosted workspace" in client.post(t + path).content
    assert not GateReceipt.objects.exists() and not Submission.objects.exists()
    # the actions say the same to the terminal's `gate` command (the gate host calls them)
    with pytest.raises(actions.SessionRefused) as refused:
        actions.do_capture(invitation, "red")
    assert refused.value.code == "work_mode"


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["zip", "both"])
def test_zip_and_both_still_take_the_gate_and_the_download(client, mode):
    invitation = started_in(mode)
    assert client.get(url("download", invitation)).status_code == 200
    response = client.post(url("gate-step", invitation, step="red"), receipt(RED_LOG),
                           content_type="application/json")
    assert response.status_code == 201, response.content


@pytest.mark.django_db
def test_both_offers_the_workspace_page(client):
    invitation = started_in("both")
    assert client.get(url("workspace", invitation)).status_code == 200


def _candidate_red(invitation) -> GateReceipt:
    """An accepted red receipt sent by gate.py (as a hosted-only version held before its routes were closed)."""
    return GateReceipt.objects.create(invitation=invitation, step="red", log_text=RED_LOG,
                                      captured_by=GateReceipt.CapturedBy.CANDIDATE)


@pytest.mark.django_db
def test_on_a_hosted_only_packet_a_posted_red_opens_no_model_window(client, upstream):
    invitation = started_in("hosted", model_policy="provided")
    response = client.post(url("gate-step", invitation, step="red"), receipt(RED_LOG),
                           content_type="application/json")
    assert response.status_code == 409
    _candidate_red(invitation)
    asked = client.post(f"/t/{invitation.raw_token}/model/v1/chat/completions",
                        json.dumps({"messages": [{"role": "user", "content": "why?"}]}),
                        content_type="application/json")
    assert asked.status_code == 403 and asked.json()["error"]["code"] == "red_not_witnessed"
    assert "capture red in your workspace" in asked.json()["error"]["message"]
    assert upstream.got == []
    # a red the server captured opens it
    GateReceipt.objects.create(invitation=invitation, step="red", log_text=RED_LOG,
                               captured_by=GateReceipt.CapturedBy.SERVER)
    assert model_window.closed_because(invitation) == ""


@pytest.mark.django_db
def test_on_a_hosted_only_packet_the_order_checks_count_only_server_captures():
    invitation = started_in("hosted", model_policy="provided")
    prompt = GateReport("", {actions.PROMPT_FILE: ""}, "")
    _candidate_red(invitation)
    assert "No red run has been witnessed" in refusal_for(invitation, "model", prompt, None)
    GateReceipt.objects.create(invitation=invitation, step="model", captured_by=GateReceipt.CapturedBy.CANDIDATE,
                               accepted=True)  # the model window's own record (no gate.py for this version)
    GateReceipt.objects.create(invitation=invitation, step="green", captured_by=GateReceipt.CapturedBy.CANDIDATE)
    # the green check counts the model window's record; a candidate's green never counts for later steps
    assert refusal_for(invitation, "green", GateReport("", {}, ""), None) is None
    GateReceipt.objects.create(invitation=invitation, step="red", captured_by=GateReceipt.CapturedBy.SERVER)
    assert refusal_for(invitation, "model", prompt, None) is None


@pytest.mark.django_db
def test_in_both_a_gate_red_counts_as_it_does_in_zip(client, upstream):
    invitation = started_in("both", model_policy="provided")
    response = client.post(url("gate-step", invitation, step="red"), receipt(RED_LOG),
                           content_type="application/json")
    assert response.status_code == 201
    assert model_window.closed_because(invitation) == ""


@pytest.mark.django_db
@pytest.mark.parametrize("mode, says, never", [
    ("hosted", "capture red in your workspace", "gate.py"),
    ("zip", "run python gate.py red", "workspace"),
    ("both", "capture red in your workspace (the button, or `gate red` in the terminal), or run python gate.py red",
     None),
])
def test_the_closed_model_window_names_the_way_red_is_captured_in_each_work_mode(mode, says, never, settings):
    settings.MODEL_URL = "http://127.0.0.1:9/v1"  # configured; never reached before red
    # why: the workspace's chat pane shows this message, where only `gate red` and the button exist
    message = model_window.closed_because(started_in(mode, model_policy="provided"))
    assert says in message and (never is None or never not in message), message
