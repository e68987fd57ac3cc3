"""Creating and editing packets through the form, with real multipart uploads."""

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from takehome.models import Packet, PacketFile

pytestmark = pytest.mark.django_db


def zip_upload(name, files):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return SimpleUploadedFile(name, buffer.getvalue(), content_type="application/zip")


def form_data(**overrides):
    data = {
        "title": "Adding",
        "slug": "adding",
        "prompt": "Make `add` add.",
        "test_command": "python -m pytest -q",
        "time_limit_minutes": "60",
        "protected_paths": "data.txt",
        "forbidden_patterns": "eval: \\beval\\(",
        "refusal_hints": "eval: eval",
        "rubric_red_log": "Red log is a real pytest failure",
        "rubric_test_names_bug": "Test names the bug",
        "rubric_model_waited": "Model waited",
        "rubric_refusal_specific": "Refusal is specific",
        "fixture_zip": zip_upload("fixture.zip", {
            "adding/calc.py": "def add(a, b):\n    return a - b\n",
            "adding/test_calc.py": "import calc\n\ndef test_add():\n    assert calc.add(1, 1) == 2\n",
            "adding/data.txt": "1\n",
            "__MACOSX/adding/._calc.py": "junk",
        }),
        "solution_zip": zip_upload("solution.zip", {"calc.py": "def add(a, b):\n    return a + b\n"}),
    }
    data.update(overrides)
    return data


def test_create_a_packet_from_zips(recruiter_client):
    response = recruiter_client.post(reverse("takehome:packet-create"), form_data())
    assert response.status_code == 302, response.content.decode()[:2000]
    packet = Packet.objects.get(slug="adding")
    version = packet.latest_version()
    assert version.number == 1 and version.time_limit_minutes == 60
    assert set(version.files_of(PacketFile.Kind.FIXTURE)) == {"calc.py", "test_calc.py", "data.txt"}
    assert version.forbidden_patterns == {"eval": "\\beval\\("}
    page = recruiter_client.get(packet.get_absolute_url() + "?kind=fixture&file=calc.py").content.decode()
    assert "return a - b" in page


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"fixture_zip": SimpleUploadedFile("f.zip", b"not a zip at all")}, "fixture zip cannot be used"),
        ({"solution_zip": zip_upload("s.zip", {"other.py": "x"})}, "must replace files of the fixture"),
        ({"forbidden_patterns": "eval: ("}, "pattern is not valid"),
        ({"forbidden_patterns": "no label here"}, "label: regular expression"),
        ({"slug": "refund-sum"}, "exists already"),
        ({"test_command": "python -m 'pytest"}, "cannot be read"),
    ],
)
def test_bad_input_is_explained_and_nothing_is_created(recruiter_client, sample_packet, overrides, message):
    response = recruiter_client.post(reverse("takehome:packet-create"), form_data(**overrides))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Packet.objects.filter(title="Adding").exists()


def test_editing_keeps_the_files_when_no_zip_is_given(recruiter_client, sample_packet):
    url = reverse("takehome:packet-edit", args=["refund-sum"])
    form = recruiter_client.get(url).context["form"]
    data = {name: value for name, value in form.initial.items()}
    data["prompt"] = "A clearer prompt."
    response = recruiter_client.post(url, data)
    assert response.status_code == 302
    v1, v2 = sample_packet.versions.order_by("number")
    assert v2.prompt == "A clearer prompt."
    assert v2.files_of(PacketFile.Kind.FIXTURE) == v1.files_of(PacketFile.Kind.FIXTURE)
    assert v2.refusal_hints == v1.refusal_hints


def test_one_submit_lists_every_problem_and_keeps_the_good_zips(recruiter_client, sample_packet):
    response = recruiter_client.post(reverse("takehome:packet-create"), form_data(
        fixture_zip=SimpleUploadedFile("f.zip", b"not a zip at all"),
        forbidden_patterns="eval: (\nno label here\nexec: exec(",
    ))
    html = response.content.decode()
    assert response.status_code == 200 and not Packet.objects.filter(slug="adding").exists()
    # The zip's problem shows beside the patterns' problems, not on a second submit.
    assert "The fixture zip cannot be used: the upload" in html
    assert "Forbidden patterns, line 1 (eval): the pattern is not valid" in html
    assert "Forbidden patterns, line 2: write it as" in html
    assert "Forbidden patterns, line 3 (exec): the pattern is not valid" in html
    assert "Nothing was saved." in html and "The zips read without a problem are kept below" in html
    assert 'name="solution_zip_kept"' in html and 'name="fixture_zip_kept"' not in html
    assert "Time limit (minutes)" in html and "Time limit minutes" not in html


@pytest.mark.parametrize("files, expected", [
    ({"always-one/calc.py": "def add(a, b):\n    return 1\n", "left/calc.py": "def add(a, b):\n    return a\n"},
     {"always-one", "left"}),
    ({"decoys/always-one/calc.py": "def add(a, b):\n    return 1\n"}, {"always-one"}),
    ({"always-one/calc.py": "def add(a, b):\n    return 1\n"}, {"always-one"}),
], ids=["two-folders", "wrapped", "one-folder"])
def test_decoys_come_from_a_zip_with_a_folder_per_decoy(recruiter_client, files, expected):
    data = form_data(decoys_zip=zip_upload("decoys.zip", files))
    response = recruiter_client.post(reverse("takehome:packet-create"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    spec = Packet.objects.get(slug="adding").latest_version().to_spec()
    assert set(spec.decoys) == expected
    assert all(set(files) == {"calc.py"} for files in spec.decoys.values())
    page = recruiter_client.get(Packet.objects.get(slug="adding").get_absolute_url()).content.decode()
    assert "Decoy (a plausible wrong fix" in page


@pytest.mark.parametrize("files, message", [
    ({"calc.py": "x = 1\n", "other.py": "y = 2\n"}, "one folder per decoy"),
    ({"wrong/nothere.py": "x = 1\n", "also/calc.py": "x = 1\n"}, "files that are not in it: nothere.py"),
], ids=["loose-files", "not-a-fixture-file"])
def test_a_decoys_zip_that_cannot_be_used_says_why(recruiter_client, files, message):
    data = form_data(decoys_zip=zip_upload("decoys.zip", files))
    response = recruiter_client.post(reverse("takehome:packet-create"), data)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Packet.objects.filter(slug="adding").exists()


def test_an_edit_without_a_decoys_zip_keeps_the_decoys(recruiter_client):
    data = form_data(decoys_zip=zip_upload("decoys.zip", {"always-one/calc.py": "def add(a, b):\n    return 1\n"}))
    recruiter_client.post(reverse("takehome:packet-create"), data)
    packet = Packet.objects.get(slug="adding")
    edit = {k: v for k, v in form_data().items() if not k.endswith("_zip") and k not in ("title", "slug")}
    response = recruiter_client.post(reverse("takehome:packet-edit", args=[packet.slug]), {**edit, "prompt": "New."})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert packet.latest_version().number == 2
    assert set(packet.latest_version().to_spec().decoys) == {"always-one"}


def test_the_sample_packet_ships_three_decoys(db):
    from takehome.actions import do_load_sample_packet

    packet, _ = do_load_sample_packet()
    decoys = packet.latest_version().to_spec().decoys
    assert set(decoys) == {"drop-refund-rows", "abs-of-the-total", "special-case-the-sample"}
    assert do_load_sample_packet()[1] is False  # loading again writes nothing


def test_a_refusal_hint_written_on_several_lines_keeps_every_pattern(recruiter_client):
    hints = "dropping rows: \\bdrop rows\\b\neval: eval\ndropping rows: supprimer les lignes"
    response = recruiter_client.post(reverse("takehome:packet-create"), form_data(refusal_hints=hints))
    assert response.status_code == 302
    version = Packet.objects.get(slug="adding").latest_version()
    assert version.refusal_hints == {"dropping rows": ["\\bdrop rows\\b", "supprimer les lignes"], "eval": "eval"}
    assert version.to_spec().refusal_hints["dropping rows"] == ["\\bdrop rows\\b", "supprimer les lignes"]
    # The edit form writes one line per pattern, so saving it again keeps them all
    # (in any order of labels: PostgreSQL's jsonb does not keep the keys' order).
    form = recruiter_client.get(reverse("takehome:packet-edit", args=["adding"])).context["form"]
    assert sorted(form.initial["refusal_hints"].splitlines()) == [
        "dropping rows: \\bdrop rows\\b", "dropping rows: supprimer les lignes", "eval: eval"]


def test_a_bad_pattern_among_several_is_named_and_nothing_is_created(recruiter_client):
    hints = "dropping rows: drop rows\ndropping rows: (unclosed"
    response = recruiter_client.post(reverse("takehome:packet-create"), form_data(refusal_hints=hints))
    html = response.content.decode()
    assert response.status_code == 200 and "line 2 (dropping rows): the pattern is not valid" in html
    assert not Packet.objects.filter(slug="adding").exists()


def test_the_rubric_wording_and_definitions_are_edited_in_the_packet_form(recruiter_client, sample_packet):
    url = reverse("takehome:packet-edit", args=["refund-sum"])
    form = recruiter_client.get(url).context["form"]
    names = [name for name in form.fields if name.startswith("rubric_")]
    # The one order: red log, stamp, refusal, test; each cell's label, then what passes and fails it.
    assert names == ["rubric_red_log", "rubric_red_log_definition", "rubric_model_waited",
                     "rubric_model_waited_definition", "rubric_refusal_specific", "rubric_refusal_specific_definition",
                     "rubric_test_names_bug", "rubric_test_names_bug_definition"]
    data = dict(form.initial)
    data["rubric_model_waited_definition"] = "Pass: stamp after red. Fail: no stamp."
    data["rubric_refusal_specific_definition"] = ""  # empty: the default wording
    assert recruiter_client.post(url, data).status_code == 302
    version = sample_packet.latest_version()
    assert version.number == 2
    assert version.rubric_definitions["model_waited"] == "Pass: stamp after red. Fail: no stamp."
    from grading.engine.rubric import REFUSAL_SPECIFIC
    assert version.rubric_definitions["refusal_specific"] == REFUSAL_SPECIFIC.definition


def test_a_rubric_definition_too_long_is_refused_and_nothing_is_saved(recruiter_client, sample_packet):
    url = reverse("takehome:packet-edit", args=["refund-sum"])
    data = dict(recruiter_client.get(url).context["form"].initial)
    data["rubric_red_log_definition"] = "x" * 1001
    response = recruiter_client.post(url, data)
    assert response.status_code == 200 and "at most 1000 characters" in response.content.decode()
    assert sample_packet.versions.count() == 1


def test_a_packet_without_a_model_gets_the_red_then_green_rubric_cell_from_the_form(recruiter_client):
    response = recruiter_client.post(reverse("takehome:packet-create"), form_data(model_policy="none"))
    assert response.status_code == 302, response.content.decode()[:2000]
    version = Packet.objects.get(slug="adding").latest_version()
    assert version.rubric["model_waited"] == "The patch waited for red"
    assert version.rubric["red_log"] == "Red log is a real pytest failure"
