"""A frozen workspace never gets a shell again through the terminal (its uid may be another candidate's now), unless
its deadline is extended (test_reopen_after_extension.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import grading.engine.sandbox.shell
from sessions_app.hosted import consumers
from sessions_app.models import Workspace
from sessions_app.tests.test_terminal import closed_with, run, socket

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.mark.parametrize("frozen", ["frozen", "closed"])
def test_a_frozen_or_closed_workspace_refuses_the_terminal_without_starting_a_shell(invitation, monkeypatch,
                                                                                    frozen, settings):
    from sessions_app.actions import do_start_session

    do_start_session(invitation)
    # the deadline passed between the link's check (which let the terminal through) and the opening
    type(invitation).objects.filter(pk=invitation.pk).update(
        deadline=timezone.now() - timedelta(seconds=settings.UPLOAD_GRACE_S + 1))
    monkeypatch.setattr(consumers, "refusal_for", lambda invitation: None)
    Workspace.objects.create(invitation=invitation, uid=63999, closed=frozen == "closed",
                             frozen_at=timezone.now() if frozen == "frozen" else None)
    opened = []
    monkeypatch.setattr(grading.engine.sandbox.shell, "spawn_client", lambda *a: opened.append(a))
    monkeypatch.setattr(grading.engine.sandbox.shell, "start_shell", lambda *a: opened.append(a))

    async def scenario():
        message = await closed_with(socket(invitation))
        assert message["code"] == 4403
        assert "closed and read-only" in message["reason"]

    run(scenario)
    assert opened == []
