"""The hosted session's gate panel and `gate status` say what happened, in the words that fit."""

import pytest
from django.template.loader import render_to_string

from sessions_app import actions
from sessions_app.hosted.views import PANEL, gate_panel_context
from sessions_app.models import GateReceipt

pytestmark = pytest.mark.django_db
SERVER = GateReceipt.CapturedBy.SERVER


@pytest.fixture
def started(invitation):
    actions.do_start_session(invitation)
    return invitation


def panel(invitation, **extra) -> str:
    return render_to_string(PANEL, {**gate_panel_context(invitation, invitation.raw_token), **extra})


def receipt(invitation, step, accepted=True, refusal=""):
    return GateReceipt.objects.create(invitation=invitation, step=step, accepted=accepted, refusal=refusal,
                                      captured_by=SERVER)


def test_the_panel_names_every_terminal_command_of_the_packet(started):
    html = panel(started)
    for command in ("red", "model", "green", "submit", "status"):
        assert f"<code>gate {command}</code>" in html


def test_backticks_in_capture_words_are_code_not_literal(started):
    red = receipt(started, "red")
    words = actions.capture_words(red, "python -m pytest -q")
    refused = receipt(started, "green", accepted=False,
                      refusal="Green before model is a skip, not a pass: run `python gate.py model` first.")
    html = panel(started, outcome=words, outcome_ok=True)
    assert "<code>python -m pytest -q</code>" in html
    assert "<code>gate model</code> in the terminal" in html  # the refusal, said for the hosted session
    assert "`" not in html, refused


def test_red_is_offered_again_only_until_the_model_step_or_green(started):
    receipt(started, "red")
    assert "Capture red again" in panel(started)
    receipt(started, "model")
    html = panel(started)
    assert 'id="capture-red"' not in html and 'id="capture-green"' in html


def test_gate_status_does_not_call_a_refused_step_captured(started):
    receipt(started, "red", accepted=False, refusal="The red log shows no failure.")
    receipt(started, "red")
    lines = actions.hosted_status_words(started).splitlines()
    refused = next(line for line in lines if "refused" in line)
    accepted = next(line for line in lines if "accepted" in line)
    assert "captured" not in refused and "asked of the server" in refused
    assert "(captured by the server)" in accepted
