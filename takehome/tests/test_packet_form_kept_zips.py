"""A refused packet form keeps the zips it was given, so the next submit need not choose them again.

Real multipart posts through the test client; the zips come back from the server, named by a signed
reference in the page, never from the browser.
"""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from takehome import kept_uploads
from takehome.models import KeptUpload, Packet, PacketFile
from takehome.tasks import forget_kept_uploads

from .test_packet_create import form_data, zip_upload

pytestmark = pytest.mark.django_db

CREATE = reverse("takehome:packet-create")
DECOYS = {"always-one/calc.py": "def add(a, b):\n    return 1\n"}
HIDDEN = {"test_hidden.py": "import calc\n\ndef test_adds():\n    assert calc.add(2, 3) == 5\n"}


def kept_references(html: str) -> dict[str, str]:
    """The hidden fields a refused form carries: {"fixture_zip_kept": reference, ...}."""
    return dict(re.findall(r'name="(\w+_zip_kept)" value="([^"]+)"', html))


def without_files(data: dict) -> dict:
    return {k: v for k, v in data.items() if not k.endswith("_zip")}


def refused_with_every_zip(client) -> tuple[dict, dict]:
    """A new packet's form refused for a bad pattern, four good zips chosen; (the data, the references)."""
    data = form_data(forbidden_patterns="eval: (", reference_tests_zip=zip_upload("hidden.zip", HIDDEN),
                     decoys_zip=zip_upload("decoys.zip", DECOYS))
    response = client.post(CREATE, data)
    assert response.status_code == 200 and not Packet.objects.exists()
    return data, kept_references(response.content.decode())


def test_a_refused_form_keeps_every_good_zip_and_the_next_submit_needs_none(recruiter_client, recruiter):
    data, references = refused_with_every_zip(recruiter_client)
    assert set(references) == {"fixture_zip_kept", "solution_zip_kept", "reference_tests_zip_kept",
                               "decoys_zip_kept"}
    assert KeptUpload.objects.filter(owner=recruiter).count() == 4
    page = recruiter_client.get(CREATE)  # (a fresh form shows none)
    assert not kept_references(page.content.decode())

    response = recruiter_client.post(CREATE, {**without_files(data), "forbidden_patterns": r"eval: \beval\(",
                                              **references})
    assert response.status_code == 302, response.content.decode()[:3000]
    version = Packet.objects.get(slug="adding").latest_version()
    assert set(version.files_of(PacketFile.Kind.FIXTURE)) == {"calc.py", "test_calc.py", "data.txt"}
    assert version.files_of(PacketFile.Kind.SOLUTION) == {"calc.py": b"def add(a, b):\n    return a + b\n"}
    assert set(version.files_of(PacketFile.Kind.REFERENCE_TEST)) == {"test_hidden.py"}
    assert set(version.to_spec().decoys) == {"always-one"}
    assert not KeptUpload.objects.exists()  # used, so gone


def test_the_page_names_each_kept_zip_and_no_longer_requires_a_file(recruiter_client):
    html = recruiter_client.post(CREATE, form_data(forbidden_patterns="eval: (")).content.decode()
    assert "Kept from your last try: <strong>fixture.zip</strong> (" in html
    assert "The zips read without a problem are kept below" in html
    fixture_input = re.search(r'<input type="file" name="fixture_zip"[^>]*>', html).group(0)
    assert "required" not in fixture_input
    # A fresh form still asks for the zips the browser must send.
    fresh = recruiter_client.get(CREATE).content.decode()
    assert "required" in re.search(r'<input type="file" name="fixture_zip"[^>]*>', fresh).group(0)


def test_a_zip_with_a_problem_is_not_kept_and_the_good_one_is(recruiter_client):
    data = form_data(fixture_zip=SimpleUploadedFile("f.zip", b"not a zip at all"))
    response = recruiter_client.post(CREATE, data)
    html = response.content.decode()
    references = kept_references(html)
    assert set(references) == {"solution_zip_kept"}
    assert "The fixture zip cannot be used" in html
    fixed = {**without_files(data), **references, "fixture_zip": form_data()["fixture_zip"]}
    response = recruiter_client.post(CREATE, fixed)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Packet.objects.get(slug="adding").latest_version().files_of(PacketFile.Kind.SOLUTION)


def test_a_new_file_replaces_the_kept_one(recruiter_client):
    data, references = refused_with_every_zip(recruiter_client)
    other = zip_upload("solution2.zip", {"calc.py": "def add(a, b):\n    return b + a\n"})
    response = recruiter_client.post(CREATE, {**without_files(data), "forbidden_patterns": "", **references,
                                              "solution_zip": other})
    assert response.status_code == 302, response.content.decode()[:3000]
    solution = Packet.objects.get(slug="adding").latest_version().files_of(PacketFile.Kind.SOLUTION)
    assert solution == {"calc.py": b"def add(a, b):\n    return b + a\n"}


def test_another_persons_reference_is_refused(recruiter_client, groups):
    data, references = refused_with_every_zip(recruiter_client)
    other = User.objects.create_user("ora", password="pw-ora")
    other.groups.add(groups["recruiter"])
    recruiter_client.force_login(other)
    response = recruiter_client.post(CREATE, {**without_files(data), "forbidden_patterns": "", **references})
    html = response.content.decode()
    assert response.status_code == 200 and not Packet.objects.exists()
    assert html.count("The zip kept from your last try cannot be used any more") == 4
    assert not kept_references(html)  # nothing of the other person's is shown back
    assert "fixture.zip" not in html


@pytest.mark.parametrize("spoil", [
    lambda ref: ref[:-2] + ("AA" if not ref.endswith("AA") else "BB"),  # the signature changed
    lambda ref: "x" + ref,
    lambda ref: "",  # no reference at all: the file is simply missing
], ids=["signature", "garbled", "empty"])
def test_a_reference_changed_by_hand_finds_nothing(recruiter_client, spoil):
    data, references = refused_with_every_zip(recruiter_client)
    spoiled = {**references, "fixture_zip_kept": spoil(references["fixture_zip_kept"])}
    response = recruiter_client.post(CREATE, {**without_files(data), "forbidden_patterns": "", **spoiled})
    assert response.status_code == 200 and not Packet.objects.exists()
    assert 'name="solution_zip_kept"' in response.content.decode()  # the others are still kept


def test_an_old_reference_no_longer_works_and_old_zips_are_deleted(recruiter_client, monkeypatch):
    data, references = refused_with_every_zip(recruiter_client)
    monkeypatch.setattr(kept_uploads, "KEPT_FOR", timedelta(seconds=-1))
    response = recruiter_client.post(CREATE, {**without_files(data), "forbidden_patterns": "", **references})
    assert "cannot be used any more" in response.content.decode() and not Packet.objects.exists()
    monkeypatch.undo()
    KeptUpload.objects.update(kept_at=timezone.now() - kept_uploads.KEPT_FOR - timedelta(minutes=1))
    fresh = KeptUpload.objects.create(owner=KeptUpload.objects.first().owner, sha256="f" * 64, name="new.zip",
                                      size=1, content=b"x")
    assert forget_kept_uploads() == 4
    assert list(KeptUpload.objects.all()) == [fresh]


def test_do_not_use_it_drops_the_kept_zip(recruiter_client):
    data, references = refused_with_every_zip(recruiter_client)
    response = recruiter_client.post(CREATE, {**without_files(data), "forbidden_patterns": "", **references,
                                              "decoys_zip_forget": "on"})
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Packet.objects.get(slug="adding").latest_version().to_spec().decoys == {}


def test_an_edit_refused_keeps_its_new_zip_and_the_next_save_uses_it(recruiter_client, sample_packet):
    url = reverse("takehome:packet-edit", args=["refund-sum"])
    data = {k: v for k, v in recruiter_client.get(url).context["form"].initial.items() if v is not None}
    solution = zip_upload("solution.zip", {"invoices.py": "# fixed\n"})
    response = recruiter_client.post(url, {**data, "forbidden_patterns": "eval: (", "solution_zip": solution})
    references = kept_references(response.content.decode())
    assert set(references) == {"solution_zip_kept"} and sample_packet.versions.count() == 1
    response = recruiter_client.post(url, {**data, **references})
    assert response.status_code == 302, response.content.decode()[:3000]
    latest = sample_packet.latest_version()
    assert latest.number == 2 and latest.files_of(PacketFile.Kind.SOLUTION) == {"invoices.py": b"# fixed\n"}
