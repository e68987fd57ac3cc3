"""A recruiter in headless Chromium exports a packet and imports it where the packet is not (another installation's
empty database, here the same database emptied), then again where it is (unchanged: nothing; changed: a version);
a file that is not a zip is refused."""

import zipfile

import pytest

from conftest import screenshot
from takehome.models import Packet, PacketVersion

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def import_file(page, path):
    page.get_by_role("link", name="Import", exact=True).click()
    page.get_by_label("Packet zip").set_input_files(str(path))
    page.get_by_role("button", name="Import").click()
    page.wait_for_load_state("load")


def test_export_then_import_into_an_empty_database_then_again_as_a_new_version(live_server, page, recruiter,
                                                                               sample_packet, tmp_path):
    page.goto(live_server.url + "/")
    page.fill("#id_username", "rita")
    page.fill("#id_password", "pw-rita")
    page.click("button[type=submit]")
    page.get_by_role("link", name="Refunds in the invoice total").click()
    with page.expect_download() as download:
        page.get_by_role("link", name="Export", exact=True).click()
    exported = tmp_path / download.value.suggested_filename
    download.value.save_as(exported)
    assert exported.name == "refund-sum-v1.zip"
    names = zipfile.ZipFile(exported).namelist()
    assert {"packet.json", "prompt.md", "fixture/invoices.py", "solution/invoices.py"} <= set(names)

    PacketVersion.objects.all().delete()  # the other installation: no such packet
    Packet.objects.all().delete()
    page.goto(live_server.url + "/packets/")
    import_file(page, exported)
    page.get_by_text("Imported as a new packet.").wait_for()
    assert page.locator("h1").first.inner_text().startswith("Refunds in the invoice total")
    packet = Packet.objects.get(slug="refund-sum")
    assert packet.versions.count() == 1 and packet.latest_version().files.count() > 0
    screenshot(page, "recruiter-packet-imported")

    # The same zip again: the packet's latest version holds it already, so nothing is written.
    import_file(page, exported)
    page.get_by_text("Nothing imported: version 1 of refund-sum holds this zip already").wait_for()
    assert [v.number for v in packet.versions.order_by("number")] == [1]

    # A changed one: the slug exists, so a new version, never an overwrite.
    first = packet.latest_version()
    changed = tmp_path / "changed.zip"
    with zipfile.ZipFile(exported) as source, zipfile.ZipFile(changed, "w") as zf:
        for name in source.namelist():
            zf.writestr(name, source.read(name) + (b"\nOne more line.\n" if name == "prompt.md" else b""))
    import_file(page, changed)
    page.get_by_text("This installation had refund-sum already: imported as version 2.").wait_for()
    assert [v.number for v in packet.versions.order_by("number")] == [1, 2]
    assert PacketVersion.objects.get(pk=first.pk).prompt == first.prompt

    # Not a zip: the reason on the form, next to the field, and nothing stored.
    junk = tmp_path / "notes.zip"
    junk.write_bytes(b"these are notes, not a zip")
    import_file(page, junk)
    error = page.locator(".errors, .error").filter(has_text="not a zip")
    error.first.wait_for()
    assert PacketVersion.objects.count() == 2
