"""Saving a packet unchanged, or importing its export again, makes no new version, and says so."""

import io
import zipfile
from dataclasses import replace
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from grading.engine import rubric
from takehome.actions import do_import_packet, do_save_version
from takehome.content import VersionContent, content_of, fingerprint, same_content
from takehome.forms import PacketVersionForm
from takehome.models import PacketCheck, PacketVersion
from takehome.packet_zip import export_zip

from .factories import make_packet, mark_failed

BASE = VersionContent(
    prompt="Fix **add**.\n",
    fixture={"calc.py": b"def add(a, b):\n    return a - b\n", "test_calc.py": b"def test_x():\n    assert 0\n"},
    solution={"calc.py": b"def add(a, b):\n    return a + b\n"},
    reference_tests={"test_ref.py": b"def test_r():\n    pass\n"},
    decoys={"always-one": {"calc.py": b"def add(a, b):\n    return 1\n"}},
    test_command="python -m pytest -q",
    protected_paths=("test_calc.py",),
    forbidden_patterns={"eval": r"\beval\("},
    refusal_hints={"eval": "eval", "rows": ["drop rows", "supprimer"]},
    requirements="six==1.17.0\n",
)


@pytest.mark.parametrize("change", [
    {"prompt": "Fix **add** now.\n"},
    {"fixture": {**BASE.fixture, "calc.py": b"def add(a, b):\n    return a - b  \n"}},
    {"fixture": {**BASE.fixture, "data.csv": b""}},  # a file added, even an empty one
    {"solution": {"calc.py": b"def add(a, b):\n    return b + a\n"}},
    {"reference_tests": {}},
    {"decoys": {"always-two": {"calc.py": b"def add(a, b):\n    return 1\n"}}},  # the same file under another name
    {"test_command": "python -m pytest"},
    {"protected_paths": ()},
    {"forbidden_patterns": {"eval": r"eval\("}},
    {"refusal_hints": {"eval": "eval", "rows": ["drop rows"]}},
    {"time_limit_minutes": 60},
    {"requirements": "six==1.16.0\n"},
    {"python_version": "3.11"},
    {"model_policy": "none"},
    {"model_name": "qwen2.5-coder:7b"},
    {"work_mode": "hosted"},
    {"rubric": {"red_log": "The red run is real"}},
    {"rubric_definitions": {"refusal_specific": "Names the harm."}},
], ids=lambda change: next(iter(change)))
def test_a_change_to_what_candidates_get_or_how_they_are_graded_counts(change):
    assert fingerprint(replace(BASE, **change)) != fingerprint(BASE)


@pytest.mark.parametrize("change", [
    {"prompt": "\r\nFix **add**.\r\n\r\n"},  # a browser's line ends, an editor's blank lines
    {"test_command": "python  -m pytest   -q"},  # the same words when run
    {"requirements": "six==1.17.0"},  # the form adds the last line end, a hand-made zip may not
    {"refusal_hints": {"rows": ["drop rows", "supprimer"], "eval": ["eval"]}},  # one pattern or a list of one
    {"fixture": dict(reversed(list(BASE.fixture.items())))},  # the order files came in
    {"rubric": {c.key: c.label for c in rubric.CELLS},  # the defaults, written out
     "rubric_definitions": {c.key: c.definition for c in rubric.CELLS}},
], ids=["line-ends", "command-spacing", "requirements-last-newline", "hint-as-list", "file-order", "rubric-defaults"])
def test_what_does_not_change_the_exercise_does_not_count(change):
    assert fingerprint(replace(BASE, **change)) == fingerprint(BASE)


@pytest.mark.django_db
def test_a_stored_version_reads_back_as_the_content_it_was_written_from():
    version = make_packet(**{k: getattr(BASE, k) for k in ("prompt", "fixture", "solution", "reference_tests",
                                                          "decoys", "protected_paths", "forbidden_patterns",
                                                          "refusal_hints")}).latest_version()
    assert same_content(version, replace(BASE, requirements=""))
    assert content_of(version).decoys == BASE.decoys


@pytest.mark.django_db
def test_saving_the_latest_content_again_writes_nothing_and_returns_the_latest():
    packet = make_packet()
    latest = packet.latest_version()
    saved = do_save_version(packet, content_of(latest))
    assert saved.created is False and saved.version == latest
    assert packet.versions.count() == 1 and PacketCheck.objects.filter(version__packet=packet).count() == 1
    changed = do_save_version(packet, replace(content_of(latest), prompt="Fix it."))
    assert changed.created is True and changed.version.number == 2


@pytest.mark.django_db
def test_going_back_to_an_earlier_version_is_a_change():
    packet = make_packet()
    first = content_of(packet.latest_version())
    do_save_version(packet, replace(first, prompt="Fix it."))
    saved = do_save_version(packet, first)
    assert saved.created is True and saved.version.number == 3


# --- the form, through the page -------------------------------------------------------------


def edit_data(packet) -> dict:
    form = PacketVersionForm(base=packet.latest_version())
    return {name: value for name, value in form.initial.items() if value is not None}


@pytest.mark.django_db
def test_saving_the_form_unchanged_makes_no_version_and_says_so(recruiter_client, sample_packet):
    url = reverse("takehome:packet-edit", args=[sample_packet.slug])
    response = recruiter_client.post(url, edit_data(sample_packet), follow=True)
    assert sample_packet.versions.count() == 1
    page = response.content.decode()
    assert "Nothing changed since version 1, so no new version was made." in page
    assert "Saved as version" not in page
    data = {**edit_data(sample_packet), "time_limit_minutes": "45"}
    recruiter_client.post(url, data)
    assert sample_packet.latest_version().number == 2


@pytest.mark.django_db
def test_saving_a_draft_unchanged_says_how_to_check_it_again(recruiter_client):
    packet = make_packet()
    mark_failed(packet.latest_version())
    url = reverse("takehome:packet-edit", args=[packet.slug])
    page = recruiter_client.post(url, edit_data(packet), follow=True).content.decode()
    assert "no new version was made" in page and "Version 1 is still a draft" in page
    assert packet.versions.count() == 1


# --- the import: the page and the command ---------------------------------------------------


def upload(data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile("packet.zip", data, content_type="application/zip")


@pytest.mark.django_db
def test_importing_an_export_again_makes_no_version(sample_packet):
    exported = export_zip(sample_packet.latest_version())
    imported = do_import_packet(upload(exported))
    assert imported.unchanged and imported.version == sample_packet.latest_version()
    assert sample_packet.versions.count() == 1


@pytest.mark.django_db
def test_the_import_page_says_nothing_was_imported(recruiter_client, sample_packet):
    exported = export_zip(sample_packet.latest_version())
    response = recruiter_client.post(reverse("takehome:packet-import"), {"archive": upload(exported)}, follow=True)
    page = response.content.decode()
    assert "Nothing imported: version 1 of refund-sum holds this zip already" in page
    assert sample_packet.versions.count() == 1


@pytest.mark.django_db
def test_the_import_command_says_nothing_was_imported_and_the_versions_state(sample_packet, tmp_path):
    out = tmp_path / "refund-sum.zip"
    out.write_bytes(export_zip(sample_packet.latest_version()))
    result = StringIO()
    call_command("import_packet", str(out), stdout=result)
    lines = result.getvalue().splitlines()
    assert lines[0] == ("Nothing imported: refund-sum v1 holds this zip already (the same prompt, files and "
                        "settings); no new version was made.")
    assert lines[-1] == "refund-sum v1 is published: it can be invited to."
    assert sample_packet.versions.count() == 1
    assert not PacketCheck.objects.filter(status=PacketCheck.Status.QUEUED).exists()  # no check was queued


@pytest.mark.django_db
def test_the_import_command_fails_on_an_unchanged_draft_unless_told_not_to_check(tmp_path):
    packet = make_packet()
    mark_failed(packet.latest_version())
    out = tmp_path / "tiny.zip"
    out.write_bytes(export_zip(packet.latest_version()))
    with pytest.raises(CommandError, match="is a draft"):
        call_command("import_packet", str(out), stdout=StringIO())
    result = StringIO()
    call_command("import_packet", str(out), "--no-check", stdout=result)
    assert "Nothing imported" in result.getvalue()
    assert packet.versions.count() == 1


@pytest.mark.django_db
def test_a_zip_whose_time_stamps_alone_differ_is_the_same(sample_packet):
    exported = export_zip(sample_packet.latest_version())
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(exported)) as source, zipfile.ZipFile(buffer, "w") as zf:
        for info in source.infolist():
            zf.writestr(zipfile.ZipInfo(info.filename, date_time=(2001, 2, 3, 4, 5, 6)), source.read(info))
    assert do_import_packet(upload(buffer.getvalue())).unchanged
    assert PacketVersion.objects.filter(packet=sample_packet).count() == 1
