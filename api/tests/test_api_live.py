"""Done when: a hiring system drives the API with a token from outside, against a really running server and
a real Celery worker, and receives the signed ``submission.graded`` webhook on its own receiver.

Ten invitations made by one call, one of them started by the candidate and a zip uploaded (a real
multipart POST, as a browser sends it, CSRF token and all), graded by the worker, which then sends the
webhook; the receiver (an http.server in a thread) checks the signature with the endpoint's secret.
"""

from __future__ import annotations

import re

import pytest
import requests

from api.actions import do_register_endpoint
from sessions_app.tests.helpers import honest_zip

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
GRADED_WAIT_S = 120


@pytest.fixture
def worker_env(worker_env):
    # why: the worker grades, then posts the webhook to the test's receiver on loopback.
    return {**worker_env, "TAKEHOME_WEBHOOK_ALLOW_PRIVATE": "true"}


def csrf_of(session: requests.Session, url: str) -> str:
    page = session.get(url, timeout=30)
    page.raise_for_status()
    return session.cookies.get("csrftoken") or re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]


def test_a_hiring_system_invites_ten_and_hears_of_the_graded_upload(grader_ready, live_server, settings, sample_packet,
                                                                    recruiter, make_token, receiver, private_hooks,
                                                                    celery_worker_proc):
    settings.SITE_URL = live_server.url
    hook = do_register_endpoint(receiver.url, ["invitation.started", "submission.received", "submission.graded"],
                                "ATS", recruiter)
    token = make_token(recruiter, "write")

    ats = requests.Session()
    ats.headers["Authorization"] = f"Bearer {token}"
    people = [{"name": f"Candidate {i}", "email": f"c{i}@example.com"} for i in range(10)]
    made = ats.post(f"{live_server.url}/api/v1/invitations", json={"packet": sample_packet.slug,
                                                                   "candidates": people}, timeout=30)
    assert made.status_code == 201, made.text
    invitations = made.json()
    assert [i["candidate"] for i in invitations] == people and len({i["link"] for i in invitations}) == 10

    chosen = invitations[3]
    candidate = requests.Session()  # the candidate's browser: no token, only the link
    link = chosen["link"]
    started = candidate.post(link + "start", data={"confirm": "yes", "csrfmiddlewaretoken": csrf_of(candidate, link)},
                             timeout=30)
    assert started.status_code == 200 and "Your clock is running" in started.text, started.text[-2000:]
    uploaded = candidate.post(link + "upload", data={"csrfmiddlewaretoken": csrf_of(candidate, link)},
                              files={"archive": ("refund-sum.zip", honest_zip(), "application/zip")}, timeout=60)
    assert uploaded.status_code == 200 and "Upload received and stored" in uploaded.text, uploaded.text[-2000:]

    try:
        graded = receiver.wait_for("submission.graded", GRADED_WAIT_S)
    except AssertionError:
        raise AssertionError("worker log:\n" + celery_worker_proc.output()[-6000:])
    assert receiver.signed_by(graded, hook.secret)
    assert not receiver.signed_by(graded, "whsec_someone-else")
    data = graded["json"]["data"]
    assert data["invitation"]["id"] == chosen["id"] and data["submission"]["status"] == "graded"
    for event in ("invitation.started", "submission.received"):
        earlier = receiver.wait_for(event, 5)
        assert receiver.signed_by(earlier, hook.secret)
        assert earlier["json"]["data"]["invitation"]["id"] == chosen["id"]

    state = ats.get(f"{live_server.url}/api/v1/invitations/{chosen['id']}", timeout=30).json()
    assert state["status"] == "submitted" and state["outcome"]["status"] == "graded"
    assert state["outcome"]["submission_id"] == data["submission"]["id"] and state["decision"] is None
