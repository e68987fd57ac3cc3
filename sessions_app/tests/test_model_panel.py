"""The model window's chat panel on the candidate's page, in each state the window can be in."""

from __future__ import annotations

import pytest
from django.utils import timezone

from sessions_app.models import ModelExchange
from takehome.models import PacketVersion

from .conftest import url

pytestmark = pytest.mark.django_db


def panel(client, invitation) -> str:
    """The #model-window section of the page, or "" when there is none."""
    html = client.get(url("landing", invitation)).content.decode()
    start = html.find('id="model-window"')
    return "" if start < 0 else html[start:html.index("</section>", start)]


def test_before_red_the_panel_is_closed_and_says_to_run_the_gate(client, upstream, started):
    section = panel(client, started)
    assert "Closed." in section and "python gate.py red" in section
    assert 'id="model-form"' not in section


def test_after_red_the_panel_has_a_labelled_prompt_box_and_a_live_reply(client, upstream, red):
    section = panel(client, red)
    assert "Closed." not in section
    assert '<label for="model-prompt">' in section and 'id="model-prompt"' in section
    assert f'data-url="/t/{red.raw_token}/model/v1/chat/completions"' in section
    assert 'role="status" aria-live="polite"' in section


def test_the_panel_script_comes_with_the_panel_which_may_open_while_the_page_is_open(client, upstream, started):
    # why before red too: the closed panel asks the server every few seconds, and opens when red is witnessed
    html = client.get(url("landing", started)).content.decode()
    assert "sessions_app/model_window.js" in html and 'hx-trigger="every 5s"' in html
    PacketVersion.objects.filter(pk=started.packet_version.pk).update(model_policy="own")
    assert "sessions_app/model_window.js" not in client.get(url("landing", started)).content.decode()


def test_after_the_deadline_and_grace_the_panel_is_closed_again(client, upstream, red):
    type(red).objects.filter(pk=red.pk).update(deadline=timezone.now() - timezone.timedelta(days=1))
    section = panel(client, red)
    assert "Closed." in section and "Time is up" in section
    assert 'id="model-form"' not in section


@pytest.mark.parametrize("policy", ["own", "none"])
def test_there_is_no_panel_when_the_model_is_not_provided_here(client, upstream, red, policy):
    PacketVersion.objects.filter(pk=red.packet_version.pk).update(model_policy=policy)
    assert panel(client, red) == ""


def test_there_is_no_panel_by_default_without_an_upstream(client, red, settings):
    settings.MODEL_URL = ""
    assert panel(client, red) == ""


def test_the_history_lists_the_exchanges_and_refreshes_alone(client, upstream, red):
    ModelExchange.objects.create(invitation=red, messages=[{"role": "user", "content": "Why <is> it wrong?"}],
                                 reply="Use Decimal.", model="packet-model", tokens_in=11, tokens_out=7)
    ModelExchange.objects.create(invitation=red, messages=[{"role": "user", "content": "And refunds?"}],
                                 model="packet-model", error="The model server did not answer in time.")
    section = panel(client, red)
    assert "Why &lt;is&gt; it wrong?" in section and "Use Decimal." in section
    assert "11 tokens in, 7 out" in section and "did not answer in time" in section
    part = client.get(url("landing", red), headers={"HX-Request": "true", "HX-Target": "model-history"})
    html = part.content.decode()
    assert "<html" not in html and html.lstrip().startswith('<div id="model-history"')
    assert html.index("Use Decimal.") < html.index("did not answer in time")


def test_the_upload_list_still_polls_on_its_own(client, upstream, red):
    part = client.get(url("landing", red), headers={"HX-Request": "true", "HX-Target": "upload-list"})
    assert part.content.decode().lstrip().startswith('<section class="card" id="upload-list"')
