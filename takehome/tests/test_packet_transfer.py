"""export_packet and import_packet (and the page's buttons): a packet moves between installations."""

import io
import json
import zipfile
from io import StringIO
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from grading.engine.spec import SAMPLE_PACKET_DIR, read_tree
from grading.tests.zips import make_zip, write_raw_zip, zeros_entry
from takehome.actions import PacketError, do_import_packet, do_load_sample_packet
from takehome.models import Packet, PacketCheck, PacketFile, PacketVersion
from takehome.packet_zip import export_zip

pytestmark = pytest.mark.django_db


def sample_files() -> dict[str, bytes]:
    """The sample packet's folder, as an author would zip it by hand."""
    return read_tree(SAMPLE_PACKET_DIR)


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return buffer.getvalue()


def upload(data: bytes, name: str = "packet.zip") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/zip")


def test_export_is_laid_out_like_the_sample_packet(sample_packet, tmp_path):
    out = tmp_path / "refund-sum.zip"
    call_command("export_packet", "refund-sum", "-o", str(out), stdout=StringIO())
    with zipfile.ZipFile(out) as zf:
        exported = {name: zf.read(name) for name in zf.namelist()}
    disk = sample_files()
    assert set(exported) == set(disk)
    for path in disk:
        if path != "packet.json":
            assert exported[path] == disk[path], path
    meta = json.loads(exported["packet.json"])
    assert meta["slug"] == "refund-sum" and meta["protected_paths"] == ["sample.csv"]
    assert meta["refusal_hints"] == json.loads(disk["packet.json"])["refusal_hints"]


def test_export_then_import_into_an_empty_database_round_trips(sample_packet, tmp_path):
    latest = sample_packet.latest_version()
    # the packet's own wording of the rubric, and a hint of several patterns, travel too
    PacketVersion.objects.filter(pk=latest.pk).update(  # why update: a stored version is otherwise immutable
        rubric={**latest.rubric, "red_log": "The red run is real"},
        rubric_definitions={**latest.rubric_definitions, "refusal_specific": "Names the harm in one line."},
        refusal_hints={**latest.refusal_hints, "abs": [r"\babs\b", "valeur absolue"]})
    latest.refresh_from_db()
    before = latest.to_spec()
    prompt = latest.prompt
    cells = latest.rubric_cells()
    out = tmp_path / "refund-sum.zip"
    call_command("export_packet", "refund-sum", "-o", str(out), stdout=StringIO())
    PacketVersion.objects.all().delete()
    Packet.objects.all().delete()
    result = StringIO()
    call_command("import_packet", str(out), stdout=result)
    assert "Created packet refund-sum" in result.getvalue()
    version = Packet.objects.get(slug="refund-sum").latest_version()
    after = version.to_spec()
    for field in ("fixture", "solution", "reference_tests", "decoys", "protected_paths", "forbidden_patterns",
                  "refusal_hints", "test_command", "time_limit_minutes"):
        assert getattr(after, field) == getattr(before, field), field
    assert version.prompt == prompt
    assert version.rubric_cells() == cells
    assert version.state == PacketVersion.PUBLISHED  # the import ran the self-check


def test_importing_a_slug_that_exists_adds_a_version_and_changes_nothing_else(sample_packet):
    first = sample_packet.latest_version()
    files = sample_files()
    files["prompt.md"] = b"A new prompt."
    imported = do_import_packet(upload(zip_bytes(files)))
    assert not imported.new_packet and imported.version.number == 2
    assert imported.version.prompt == "A new prompt."
    first.refresh_from_db()
    assert first.prompt != "A new prompt." and first.files.count() == imported.version.files.count()
    assert imported.version.checks.get().status == PacketCheck.Status.QUEUED


def test_a_hand_made_zip_in_a_wrapping_folder_with_its_environment_imports_and_exports_the_same():
    files = sample_files()
    meta = json.loads(files["packet.json"])
    meta["python_version"] = "3.11"
    files["packet.json"] = json.dumps(meta).encode()
    files["requirements.txt"] = b"six==1.17.0\r\n"
    imported = do_import_packet(upload(zip_bytes({f"refund-sum/{p}": d for p, d in files.items()})))
    version = imported.version
    assert imported.new_packet and version.files.filter(kind=PacketFile.Kind.DECOY).count() == 3
    assert (version.python_version, version.requirements) == ("3.11", "six==1.17.0\n")
    spec = version.to_spec()
    assert (spec.python, spec.requirements) == ("3.11", "six==1.17.0\n")
    again = zipfile.ZipFile(io.BytesIO(export_zip(version)))
    assert again.read("requirements.txt") == b"six==1.17.0\n"
    assert json.loads(again.read("packet.json"))["python_version"] == "3.11"


def test_a_packet_without_an_environment_exports_none():
    names = zipfile.ZipFile(io.BytesIO(export_zip(do_load_sample_packet(send_check=False)[0].latest_version())))
    assert "requirements.txt" not in names.namelist()
    assert "python_version" not in json.loads(names.read("packet.json"))


def broken(change) -> bytes:
    files = sample_files()
    change(files)
    return zip_bytes(files)


def with_meta(**changes):
    def change(files):
        meta = json.loads(files["packet.json"])
        meta.update(changes)
        files["packet.json"] = json.dumps(meta).encode()
    return change


@pytest.mark.parametrize("data, message", [
    (b"this is not a zip", "not a zip"),
    (broken(lambda f: f.update({"notes.txt": b"x"})), "Unknown files at the top of the packet: notes.txt"),
    (broken(lambda f: f.update({"tests/test_x.py": b"x"})), "Unknown files at the top of the packet: tests/"),
    (broken(lambda f: f.pop("packet.json")), "no packet.json"),
    (broken(lambda f: f.pop("prompt.md")), "no prompt.md"),
    (broken(lambda f: f.update({"packet.json": b"{\"slug\": "})), "packet.json is not valid JSON"),
    (broken(lambda f: f.update({"packet.json": b"[1, 2]"})), "one JSON object"),
    (broken(with_meta(tittle="typo")), "keys this installation does not know: tittle"),
    (broken(with_meta(python_version="2.7")), "Python 2.7 is not on this server"),
    (broken(lambda f: f.update({"requirements.txt": b"requests @ https://example.com/r.whl\n"})), "Line 1: requests @ https://example.com/r.whl is a URL"),
    (broken(lambda f: f.update({"requirements.txt": b"\xff\xfe"})), "requirements.txt must be UTF-8 text"),
    (broken(with_meta(slug="no spaces allowed")), "slug is required"),
    (broken(with_meta(time_limit_minutes="ninety")), "time_limit_minutes must be a whole number"),
    (broken(with_meta(refusal_hints={"x": "(unclosed"})), "not a valid regular expression"),
    (broken(lambda f: f.update({"decoys/loose.py": b"x"})), "Each decoy is a folder"),
    (broken(lambda f: f.update({"solution/other.py": b"x"})), "must replace files of the fixture"),
])
def test_a_bad_packet_zip_is_refused_with_a_reason_and_nothing_is_stored(data, message):
    with pytest.raises(PacketError, match=message):
        do_import_packet(upload(data))
    assert not Packet.objects.exists() and not PacketVersion.objects.exists()


@pytest.mark.parametrize("entries, symlinks", [
    ({"/etc/packet.json": b"{}"}, None),
    ({"../packet.json": b"{}"}, None),
    ({"fixture/../../x.py": b"x"}, None),
    ({"packet.json": b"{}"}, {"fixture/link.py": "/etc/passwd"}),
])
def test_unsafe_entries_are_refused(tmp_path, entries, symlinks):
    path = make_zip(tmp_path, entries, symlinks=symlinks)
    with pytest.raises(PacketError, match="packet zip cannot be used"):
        do_import_packet(upload(Path(path).read_bytes()))
    assert not Packet.objects.exists()


def test_a_zip_bomb_is_refused(tmp_path):
    path = write_raw_zip(tmp_path, [zeros_entry("fixture/big.bin", 50 << 20, declared=100)])
    with pytest.raises(PacketError, match="packet zip cannot be used"):
        do_import_packet(upload(Path(path).read_bytes()))
    assert not Packet.objects.exists()


def test_import_command_refuses_bad_input_with_a_message(tmp_path):
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"nope")
    with pytest.raises(CommandError, match="was not imported: .*not a zip"):
        call_command("import_packet", str(bad), stdout=StringIO())
    with pytest.raises(CommandError, match="No file at"):
        call_command("import_packet", str(tmp_path / "missing.zip"), stdout=StringIO())
    with pytest.raises(CommandError, match="No packet with slug 'nope'"):
        call_command("export_packet", "nope", "-o", str(tmp_path / "x.zip"), stdout=StringIO())
    assert not Packet.objects.exists()


def test_import_command_exits_non_zero_for_a_packet_that_fails_its_check(tmp_path):
    files = sample_files()
    files["fixture/test_invoices.py"] = b"def test_nothing():\n    pass\n"
    path = tmp_path / "green.zip"
    path.write_bytes(zip_bytes(files))
    out = StringIO()
    with pytest.raises(CommandError, match="is a draft"):
        call_command("import_packet", str(path), stdout=out)
    assert "FAIL  The fixture's own tests fail" in out.getvalue()
    assert Packet.objects.get().latest_version().state == PacketVersion.DRAFT


def test_the_page_buttons_export_and_import(recruiter_client, sample_packet):
    page = recruiter_client.get(sample_packet.get_absolute_url()).content.decode()
    assert reverse("takehome:packet-export", args=["refund-sum"]) in page
    assert reverse("takehome:packet-import") in page
    response = recruiter_client.get(reverse("takehome:packet-export", args=["refund-sum"]) + "?v=1")
    assert response["Content-Disposition"] == 'attachment; filename="refund-sum-v1.zip"'
    with zipfile.ZipFile(io.BytesIO(response.content)) as zf:
        files = {name: zf.read(name) for name in zf.namelist()}
    files["prompt.md"] += b"\nOne more line.\n"
    response = recruiter_client.post(reverse("takehome:packet-import"), {"archive": upload(zip_bytes(files))})
    assert response.status_code == 302
    assert sample_packet.versions.count() == 2
    response = recruiter_client.post(reverse("takehome:packet-import"), {"archive": upload(b"junk")})
    assert response.status_code == 200
    assert "not a zip" in response.content.decode()
    assert sample_packet.versions.count() == 2


def test_only_recruiters_import_and_export(client, reviewer, sample_packet):
    client.force_login(reviewer)
    assert client.get(reverse("takehome:packet-import")).status_code == 403
    assert client.get(reverse("takehome:packet-export", args=["refund-sum"])).status_code == 403


def test_history_follows_under_versions_and_is_recreated_in_an_empty_database(sample_packet, tmp_path):
    files = sample_files()
    files["prompt.md"] = b"The second prompt."
    do_import_packet(upload(zip_bytes(files)))
    out = tmp_path / "all.zip"
    call_command("export_packet", "refund-sum", "-o", str(out), "--history", stdout=StringIO())
    with zipfile.ZipFile(out) as zf:
        names = set(zf.namelist())
        assert zf.read("prompt.md") == b"The second prompt."
        assert zf.read("versions/1/prompt.md") == sample_files()["prompt.md"]
    assert "versions/1/fixture/invoices.py" in names and "versions/2/packet.json" not in names
    PacketVersion.objects.all().delete()
    Packet.objects.all().delete()
    result = StringIO()
    call_command("import_packet", str(out), stdout=result)
    assert "Recreated 1 earlier version" in result.getvalue()
    versions = list(Packet.objects.get().versions.order_by("number"))
    assert [v.prompt for v in versions] == [sample_files()["prompt.md"].decode(), "The second prompt."]
    assert [v.state for v in versions] == [PacketVersion.PUBLISHED, PacketVersion.PUBLISHED]
    # into an installation that has the packet: only the top level, as one new version when it is new here
    with zipfile.ZipFile(out) as zf:
        changed = {name: zf.read(name) for name in zf.namelist()}
    changed["prompt.md"] = b"The third prompt."
    out.write_bytes(zip_bytes(changed))
    result = StringIO()
    call_command("import_packet", str(out), "--no-check", stdout=result)
    assert "Left out the 1 earlier version" in result.getvalue()
    assert Packet.objects.get().versions.count() == 3


@pytest.mark.parametrize("extra, message", [
    ({"versions/one/packet.json": b"{}"}, "numbered folders"),
    ({"versions/1/packet.json": b"{\"slug\": \"other\", \"title\": \"Other\"}", "versions/1/prompt.md": b"x",
      "versions/1/fixture/a.py": b"x"}, "names the packet 'other'"),
    ({"versions/1/packet.json": b"{\"slug\": \"refund-sum\", \"title\": \"T\"}"}, "versions/1/: The packet has no prompt.md"),
])
def test_a_bad_history_is_refused_and_nothing_is_stored(extra, message):
    with pytest.raises(PacketError, match=message):
        do_import_packet(upload(zip_bytes({**sample_files(), **extra})))
    assert not Packet.objects.exists()


def test_the_page_offers_an_export_with_the_versions_before_it(recruiter_client, sample_packet):
    do_import_packet(upload(zip_bytes({**sample_files(), "prompt.md": b"The second prompt."})))
    page = recruiter_client.get(sample_packet.get_absolute_url()).content.decode()
    link = reverse("takehome:packet-export", args=["refund-sum"]) + "?v=2&amp;history=1"
    assert link in page
    response = recruiter_client.get(link.replace("&amp;", "&"))
    with zipfile.ZipFile(io.BytesIO(response.content)) as zf:
        assert "versions/1/packet.json" in zf.namelist()
