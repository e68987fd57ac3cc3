"""The upload limits, from settings, are stated wherever a candidate looks: the page, README.txt, gate.py's help."""

import io
import zipfile

import pytest

from grading.pipeline import grade_options

from .conftest import url
from .helpers import run_gate, runner_python

pytestmark = pytest.mark.django_db


@pytest.fixture
def limits(settings):
    settings.UPLOAD_MAX_BYTES = 3 * 1024 * 1024
    settings.UPLOAD_MAX_FILES = 120
    settings.UPLOAD_MAX_FILE_BYTES = 2 * 1024 * 1024
    settings.UPLOAD_MAX_UNPACKED_BYTES = 7 * 1024 * 1024
    settings.UPLOAD_INTERVAL_S, settings.UPLOAD_MAX_COUNT = 10, 30
    return settings


def test_the_page_states_every_limit_next_to_the_upload_form(client, started, limits):
    form = client.get(url("landing", started)).content.decode().split('id="upload-form"')[1]
    items = form.split('id="upload-limits"')[1].split("</ul>")[0]
    assert "The zip: at most <strong>3 MB</strong>" in items
    assert "Unpacked: <strong>at most 120 files, 2 MB per file and 7 MB in all</strong>" in items
    assert "at most once every 10 seconds and 30 times in all" in items


def test_the_readme_and_the_gates_help_state_them(client, started, limits, tmp_path):
    data = client.get(url("download", started)).content
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        zf.extractall(tmp_path)
    tree = tmp_path / "refund-sum"
    readme = " ".join((tree / "README.txt").read_text().split())
    assert "Uploads are limited to 3 MB as a zip and, unpacked, to at most 120 files, 2 MB per file and 7 MB in all" \
        in readme
    if not runner_python().exists():
        pytest.fail(f"{runner_python()} is missing: run `make runner`")
    help_text = run_gate(tree, "help")
    assert help_text.returncode == 0
    said = " ".join(help_text.stdout.split())
    assert "python gate.py submit" in said
    assert ("Upload limits: at most 3 MB as a zip; unpacked, at most 120 files, 2 MB per file and 7 MB in all"
            in said)
    assert "at most once every 10 seconds and 30 times in all, until uploads close 5 minutes after" in said


def test_grading_unpacks_with_the_same_limits(limits):
    applied = grade_options().limits
    assert (applied.max_entries, applied.max_file_bytes, applied.max_total_bytes) == (
        120, 2 * 1024 * 1024, 7 * 1024 * 1024)
