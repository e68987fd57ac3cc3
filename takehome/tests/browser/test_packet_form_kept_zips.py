"""A recruiter in headless Chromium chooses four zips, has the form refused for a typo, fixes the typo and
saves without choosing any zip again; one zip replaced, one dropped, on the way."""

import io
import zipfile

import pytest

from conftest import log_in, screenshot
from takehome.models import KeptUpload, Packet, PacketFile
from takehome.tests.test_self_check import BUG, FIX, HIDDEN, OWN_TEST, SPECIAL_CASE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def zip_of(name: str, files: dict[str, bytes]) -> dict:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return {"name": name, "mimeType": "application/zip", "buffer": buffer.getvalue()}


def test_a_refused_form_keeps_the_chosen_zips(live_server, page, recruiter):
    log_in(page, live_server.url, "rita")
    page.goto(live_server.url + "/packets/new/")
    page.fill("#id_title", "The adder")
    page.fill("#id_slug", "adder")
    page.fill("#id_prompt", "Fix add.")
    page.set_input_files("#id_fixture_zip", files=[zip_of("fixture.zip", {"calc.py": BUG, "test_calc.py": OWN_TEST})])
    page.set_input_files("#id_solution_zip", files=[zip_of("first-solution.zip", {"calc.py": BUG})])
    page.set_input_files("#id_reference_tests_zip", files=[zip_of("hidden.zip", {"test_hidden_calc.py": HIDDEN})])
    page.set_input_files("#id_decoys_zip", files=[zip_of("decoys.zip", {"special-case/calc.py": SPECIAL_CASE})])
    page.fill("#id_forbidden_patterns", "eval: (")  # the typo
    page.get_by_role("button", name="Create packet").click()

    page.locator("#form-problems").wait_for()
    kept = page.locator("p.kept")
    assert kept.count() == 4
    assert "Kept from your last try: fixture.zip" in kept.nth(0).inner_text()
    assert page.locator("#id_fixture_zip").evaluate("input => input.files.length") == 0  # the browser's own: empty
    screenshot(page, "packet-form-kept-zips")

    page.fill("#id_forbidden_patterns", r"eval: \beval\(")
    page.set_input_files("#id_solution_zip", files=[zip_of("solution.zip", {"calc.py": FIX})])  # replace one
    page.get_by_label("Do not use it").nth(3).check()  # the decoys: drop them
    page.get_by_role("button", name="Create packet").click()
    page.wait_for_url("**/packets/adder/")

    version = Packet.objects.get(slug="adder").latest_version()
    assert version.files_of(PacketFile.Kind.FIXTURE) == {"calc.py": BUG, "test_calc.py": OWN_TEST}
    assert version.files_of(PacketFile.Kind.SOLUTION) == {"calc.py": FIX}
    assert version.files_of(PacketFile.Kind.REFERENCE_TEST) == {"test_hidden_calc.py": HIDDEN}
    assert version.to_spec().decoys == {}
    assert not KeptUpload.objects.exists()  # used, replaced or dropped: each is gone once the packet is saved
