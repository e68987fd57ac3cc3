"""A packet version's work mode (step 10): zip, hosted or both; stored, carried by the packet form, by
export and import, and by the sample packets."""

import io
import json
import zipfile

import pytest
from django.urls import reverse

from grading.engine.spec import SAMPLE_PACKETS_DIR
from takehome.actions import PacketError, VersionContent, do_create_version, do_import_packet, sample_content
from takehome.models import Packet, PacketVersion
from takehome.packet_zip import export_zip

from .test_packet_create import form_data
from .test_packet_transfer import broken, upload, with_meta

pytestmark = pytest.mark.django_db


def exported_meta(version: PacketVersion) -> dict:
    return json.loads(zipfile.ZipFile(io.BytesIO(export_zip(version))).read("packet.json"))


@pytest.mark.parametrize("mode", ["hosted", "both"])
def test_the_mode_round_trips_through_a_packet_zip(mode):
    version = do_import_packet(upload(broken(with_meta(work_mode=mode)))).version
    assert version.work_mode == mode
    exported = export_zip(version)
    assert exported_meta(version)["work_mode"] == mode
    PacketVersion.objects.all().delete()
    Packet.objects.all().delete()
    assert do_import_packet(upload(exported)).version.work_mode == mode


def test_a_zip_only_version_exports_no_key_so_older_exports_stay_the_same(sample_packet):
    base = sample_packet.latest_version()
    slug, title, content = sample_content()
    zip_only = do_create_version(sample_packet, VersionContent(**{**content.__dict__, "work_mode": "zip"}))
    assert "work_mode" not in exported_meta(zip_only)
    assert exported_meta(base)["work_mode"] == "both"


def test_a_packet_json_without_the_key_is_zip():
    def drop(files):
        meta = json.loads(files["packet.json"])
        meta.pop("work_mode", None)
        files["packet.json"] = json.dumps(meta).encode()
    assert do_import_packet(upload(broken(drop))).version.work_mode == "zip"


@pytest.mark.parametrize("value", ["browser", ["both"], None])
def test_a_bad_mode_in_packet_json_is_refused_in_words(value):
    with pytest.raises(PacketError, match='work_mode must be "zip", "hosted" or "both"'):
        do_import_packet(upload(broken(with_meta(work_mode=value))))
    assert not Packet.objects.exists()


def test_both_sample_packets_offer_both_ways():
    folders = sorted(p for p in SAMPLE_PACKETS_DIR.iterdir() if (p / "packet.json").exists())
    assert {f.name for f in folders} >= {"refund-sum", "business-days"}
    for folder in folders:
        assert sample_content(folder)[2].work_mode == "both", folder.name


def test_the_sample_packet_loads_with_both(sample_packet):
    assert sample_packet.latest_version().work_mode == "both"


def test_the_form_saves_the_mode_and_offers_it_again_on_edit(recruiter_client):
    response = recruiter_client.post(reverse("takehome:packet-create"), form_data(work_mode="hosted"))
    assert response.status_code == 302, response.content.decode()[:3000]
    packet = Packet.objects.get(slug="adding")
    assert packet.latest_version().work_mode == "hosted"
    edit = recruiter_client.get(reverse("takehome:packet-edit", args=["adding"])).content.decode()
    assert '<option value="hosted" selected>' in edit
    page = recruiter_client.get(packet.get_absolute_url()).content.decode()
    assert "work: a hosted workspace" in page


def test_a_form_posted_without_the_field_keeps_the_zip(recruiter_client):
    data = form_data()
    data.pop("work_mode", None)
    assert recruiter_client.post(reverse("takehome:packet-create"), data).status_code == 302
    assert Packet.objects.get(slug="adding").latest_version().work_mode == "zip"


def test_a_bad_mode_in_the_form_is_refused(recruiter_client):
    response = recruiter_client.post(reverse("takehome:packet-create"), form_data(work_mode="laptop"))
    assert response.status_code == 200 and "Nothing was saved." in response.content.decode()
    assert not Packet.objects.filter(slug="adding").exists()
