"""A packet version's model policy and model name (step 9): stored, carried by export and import and by
the packet form, and worked out by effective_policy()."""

import io
import json
import zipfile

import pytest
from django.urls import reverse

from takehome.actions import PacketError, do_import_packet
from takehome.models import Packet, PacketVersion, effective_policy
from takehome.packet_zip import export_zip

from .test_packet_create import form_data
from .test_packet_transfer import broken, upload, with_meta

pytestmark = pytest.mark.django_db


def test_policy_and_model_name_round_trip_through_a_packet_zip():
    data = broken(with_meta(model_policy="provided", model_name="qwen2.5-coder:7b"))
    version = do_import_packet(upload(data)).version
    assert (version.model_policy, version.model_name) == ("provided", "qwen2.5-coder:7b")
    meta = json.loads(zipfile.ZipFile(io.BytesIO(export_zip(version))).read("packet.json"))
    assert (meta["model_policy"], meta["model_name"]) == ("provided", "qwen2.5-coder:7b")


def test_a_packet_without_a_policy_exports_neither_key(sample_packet):
    meta = json.loads(zipfile.ZipFile(io.BytesIO(export_zip(sample_packet.latest_version()))).read("packet.json"))
    assert "model_policy" not in meta and "model_name" not in meta


@pytest.mark.parametrize("meta, message", [
    ({"model_policy": "maybe"}, 'model_policy must be "provided", "own" or "none"'),
    ({"model_policy": ["own"]}, 'model_policy must be "provided", "own" or "none"'),
    ({"model_name": 7}, "model_name must be a model name"),
])
def test_a_bad_policy_in_packet_json_is_refused_in_words(meta, message):
    with pytest.raises(PacketError, match=message):
        do_import_packet(upload(broken(with_meta(**meta))))
    assert not Packet.objects.exists()


def test_the_form_saves_the_policy_and_offers_it_again_on_edit(recruiter_client):
    response = recruiter_client.post(reverse("takehome:packet-create"),
                                     form_data(model_policy="none", model_name="llama3"))
    assert response.status_code == 302, response.content.decode()[:3000]
    version = Packet.objects.get(slug="adding").latest_version()
    assert (version.model_policy, version.model_name) == ("none", "llama3")
    edit = recruiter_client.get(reverse("takehome:packet-edit", args=["adding"])).content.decode()
    assert '<option value="none" selected>' in edit and 'value="llama3"' in edit


@pytest.mark.parametrize("policy, url, expected", [
    ("", "http://127.0.0.1:11434/v1", "provided"),
    ("", "", "own"),
    ("own", "http://127.0.0.1:11434/v1", "own"),
    ("none", "http://127.0.0.1:11434/v1", "none"),
    ("provided", "", "provided"),
])
def test_effective_policy_fills_in_the_default_from_the_setting(settings, policy, url, expected):
    settings.MODEL_URL = url
    assert effective_policy(PacketVersion(model_policy=policy)) == expected


def test_the_packet_page_says_how_candidates_get_a_model(recruiter_client, sample_packet, settings):
    settings.MODEL_URL, settings.MODEL_NAME = "", ""
    page = recruiter_client.get(sample_packet.get_absolute_url()).content.decode()
    assert "model: the candidate&#x27;s own (unset: no model configured here)" in page
    settings.MODEL_URL, settings.MODEL_NAME = "http://127.0.0.1:9/v1", "fake-coder"
    page = recruiter_client.get(sample_packet.get_absolute_url()).content.decode()
    assert "model: provided by this server, fake-coder (unset: the server has a model)" in page
