"""A recruiter in headless Chromium creates a packet whose self-check fails, sees why, and fixes it."""

import io
import zipfile

import pytest

from conftest import screenshot
from takehome.models import Packet, PacketVersion
from takehome.tests.test_self_check import BUG, FIX, HIDDEN, OWN_TEST

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def zip_of(files: dict[str, bytes]) -> dict:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return {"name": "tree.zip", "mimeType": "application/zip", "buffer": buffer.getvalue()}


def test_a_failing_packet_is_a_draft_until_a_new_version_fixes_it(live_server, page, recruiter, celery_worker_proc):
    page.goto(live_server.url + "/")
    page.fill("#id_username", "rita")
    page.fill("#id_password", "pw-rita")
    page.click("button[type=submit]")
    page.get_by_role("link", name="New packet").click()


    page.fill("#id_slug", "adder")
    page.fill("#id_title", "The adder")
    page.fill("#id_prompt", "Fix add.")
    # The fixture's own test passes on the bug: there is nothing red to start from.
    green_test = b"import calc\n\ndef test_runs():\n    calc.add(1, 1)\n"
    page.set_input_files("#id_fixture_zip", files=[zip_of({"calc.py": BUG, "test_calc.py": green_test})])
    page.set_input_files("#id_solution_zip", files=[zip_of({"calc.py": FIX})])
    page.set_input_files("#id_reference_tests_zip", files=[zip_of({"test_hidden_calc.py": HIDDEN})])
    page.get_by_role("button", name="Create packet").click()

    # The page updates itself when the worker has run the check.
    page.get_by_text("Draft: not invitable").wait_for(timeout=90_000)
    failed = page.locator("li.check.bad")
    assert failed.count() == 1
    assert "Failed: The fixture's own tests fail" in failed.inner_text()
    assert "1 passed" in failed.locator("pre").inner_text()  # the run's own log, open beside it
    screenshot(page, "packet-self-check-failed")

    page.get_by_role("link", name="Invite candidates").click()
    page.locator("#invite-refused").wait_for()
    assert "is a draft" in page.locator("#invite-refused").inner_text()

    page.go_back()
    page.get_by_role("link", name="Edit (new version)").click()
    page.set_input_files("#id_fixture_zip", files=[zip_of({"calc.py": BUG, "test_calc.py": OWN_TEST})])
    page.get_by_role("button", name="Save as a new version").click()
    page.get_by_text("Published").wait_for(timeout=90_000)
    assert page.locator("li.check.ok").count() == 5  # the environment, then the four checks
    packet = Packet.objects.get(slug="adder")
    assert [v.state for v in packet.versions.order_by("number")] == [PacketVersion.DRAFT, PacketVersion.PUBLISHED]

    page.get_by_role("link", name="Invite candidates").click()
    page.wait_for_url("**/invite/")
    assert page.locator("#invite-refused").count() == 0
