"""A refused step's reason is said to each reader in their words, for where it is read.

The server keeps a step gate.py refused on the candidate's machine in the
reviewers' words ("on the candidate's machine"); the candidate's own pages
say it to them. A step refused in a hosted workspace is said the workspace's
way (the buttons, `gate` in the terminal, the model window), never with a
gate.py command the candidate does not have, and no page shows a backtick.
"""

import json

import pytest
from django.template.loader import render_to_string
from django.test import Client

from grading.engine.checks.receipts import GATE_REFUSED_ORDER
from grading.tests.reviewing import make_submission
from sessions_app import actions
from sessions_app.hosted.views import PANEL, gate_panel_context
from sessions_app.models import GateReceipt
from takehome.tests.factories import InvitationFactory, make_packet

from .conftest import url
from .helpers import receipt

pytestmark = pytest.mark.django_db
GREEN_FIRST = "Green before model is a skip, not a pass."


def refused_by_gate(client, invitation, offline=False):
    """gate.py refused green here (before the model step) and tells the server, as it does."""
    body = receipt(refused=GREEN_FIRST, kind="order", offline=offline)
    r = client.post(url("gate-step", invitation, step="green"), body, content_type="application/json")
    assert r.status_code == 200 and r.json()["recorded"] is True
    return r.json()


def test_a_step_gate_py_refused_is_said_to_the_candidate_and_kept_for_reviewers(client, reviewer, sample_packet):
    submission = make_submission(sample_packet)  # graded evidence, so the review page lists the receipts
    invitation = submission.invitation
    invitation.raw_token = invitation.issue_token()  # a link this test knows
    invitation.save()
    actions.do_start_session(invitation)
    answer = refused_by_gate(client, invitation)
    refused_by_gate(client, invitation, offline=True)
    yours = f"gate.py refused this step on your machine: {GREEN_FIRST}"
    assert answer["message"] == yours

    page = client.get(url("landing", invitation)).content.decode()
    listed = page.split("What the server has witnessed")[1].split("</ul>")[0]
    assert yours in listed and "candidate&#x27;s machine" not in listed and "Out of order" not in listed
    assert ("gate.py refused this step on your machine while it was offline (it told the server when next "
            f"online): {GREEN_FIRST}") in listed
    status = client.get(url("status", invitation)).json()
    assert [r["refusal"] for r in status["receipts"]][0] == yours

    # the record and the reviewer's page keep the reviewer's words
    assert GateReceipt.objects.filter(refusal__startswith=GATE_REFUSED_ORDER).count() == 2
    desk = Client()
    desk.force_login(reviewer)
    review = desk.get(f"/review/{submission.pk}/").content.decode()
    assert f"Out of order: gate.py refused this step on the candidate&#x27;s machine: {GREEN_FIRST}" in review
    assert "on your machine" not in review


def hosted_invitation(model_policy=""):
    packet = make_packet(slug=f"hosted-{model_policy or 'default'}", work_mode="hosted", model_policy=model_policy)
    invitation = InvitationFactory(packet_version=packet.latest_version())
    actions.do_start_session(invitation)
    return invitation


@pytest.mark.parametrize("policy, how", [
    ("own", "capture model (the button, or <code>gate model</code> in the terminal) first."),
    ("provided", "ask the model in the model window (or capture model: the button, or <code>gate model</code> in "
                 "the terminal) first."),
])
def test_a_step_refused_in_the_workspace_is_said_the_workspaces_way_without_backticks(client, policy, how):
    invitation = hosted_invitation(policy)
    # the action a Capture green button takes, before the model step: refused and kept
    kept = actions.do_record_gate_step(invitation, "green", actions.GateReport("", {}, ""),
                                       captured_by=GateReceipt.CapturedBy.SERVER)
    assert not kept.accepted

    page = client.get(url("landing", invitation)).content.decode()
    listed = page.split("What the server has witnessed")[1].split("</ul>")[0]
    assert f"Green before model is a skip, not a pass: {how}" in listed
    assert "`" not in listed and "python gate.py" not in listed

    panel = render_to_string(PANEL, gate_panel_context(invitation, invitation.raw_token))
    captures = panel.split('id="captures"')[1].split("</ul>")[0]
    assert f"Green before model is a skip, not a pass: {how}" in captures and "`" not in captures

    terminal = actions.hosted_status_words(invitation)  # `gate status` in the workspace's terminal
    assert "python gate.py" not in terminal
    assert "python gate.py" not in json.dumps(client.get(url("status", invitation)).json())


def test_the_reviewers_page_shows_a_command_in_a_refusal_as_code(client, reviewer, sample_packet):
    submission = make_submission(sample_packet)
    GateReceipt.objects.create(invitation=submission.invitation, step="green", accepted=False,
                               refusal="Green before model is a skip, not a pass: run `python gate.py model` first.")
    client.force_login(reviewer)
    review = client.get(f"/review/{submission.pk}/").content.decode()
    table = review.split('class="list compact receipt-list"')[1].split("</table>")[0]
    assert "run <code>python gate.py model</code> first." in table and "`" not in table
