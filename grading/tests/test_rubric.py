"""The rubric in one place: one order, the packet's own words and definitions, read by every page."""

import dataclasses
import importlib
import json

import pytest
from django.apps import apps

from grading.engine import rubric
from grading.engine.spec import SAMPLE_PACKET_DIR
from grading.models import CELLS_BEFORE_DIFF, Cell
from grading.tests.reviewing import make_submission, score
from takehome.actions import do_create_version, sample_content
from takehome.models import PacketVersion

HX = {"HX-Request": "true"}
ORDER = ["red_log", "model_waited", "refusal_specific", "test_names_bug"]
WORDS = {
    "red_log": "Saw it fail first",
    "model_waited": "Asked the model only after",
    "refusal_specific": "Turned down a bad patch",
    "test_names_bug": "The test says refunds",
}
DEFINITIONS = {key: f"Pass when {key} is right; fail when it is not ({n})." for n, key in enumerate(ORDER)}


def test_one_order_everywhere_red_log_stamp_refusal_then_the_diff():
    assert list(rubric.KEYS) == ORDER
    assert [c.section for c in rubric.CELLS] == ["red-log", "stamp", "refusal", "diff"]
    assert Cell.values == ORDER  # the database choices follow the same order
    assert list(CELLS_BEFORE_DIFF) == ORDER[:3]


def test_every_cell_has_a_label_and_a_pass_fail_definition_by_default():
    for c in rubric.cells():
        assert c.label and "Pass:" in c.definition and "Fail:" in c.definition
    assert [c.number for c in rubric.cells()] == [1, 2, 3, 4]


def test_a_packets_words_replace_the_defaults_and_blanks_fall_back():
    cells = rubric.cells({"red_log": "Mine", "model_waited": ""}, {"test_names_bug": "Custom."})
    assert [c.label for c in cells][:2] == ["Mine", rubric.MODEL_WAITED.label]
    assert cells[3].definition == "Custom." and cells[0].definition == rubric.RED_LOG.definition


@pytest.fixture
def worded_packet(sample_packet):
    """The sample packet with a second version in its own words."""
    _, _, content = sample_content()
    do_create_version(sample_packet, dataclasses.replace(content, rubric=WORDS, rubric_definitions=DEFINITIONS))
    return sample_packet


@pytest.mark.django_db
def test_a_new_version_stores_its_whole_rubric(sample_packet):
    version = sample_packet.latest_version()
    own = json.loads((SAMPLE_PACKET_DIR / "packet.json").read_text())["rubric_definitions"]
    assert set(own) == {"refusal_specific", "test_names_bug"}  # refund-sum's own words for two cells
    assert version.rubric == rubric.DEFAULT_LABELS
    assert version.rubric_definitions == {**rubric.DEFAULT_DEFINITIONS, **own}
    assert "refund" not in " ".join(rubric.DEFAULT_DEFINITIONS.values())  # the defaults name no sample


@pytest.mark.django_db
def test_the_review_page_shows_the_packets_words_and_definitions_in_order(rob, worded_packet):
    submission = make_submission(worded_packet)
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    positions = [html.index(f'id="cell-{key}"') for key in ORDER]
    assert positions == sorted(positions)
    for key in ORDER:
        cell = html.split(f'id="cell-{key}"')[1].split("</aside>")[0]
        assert WORDS[key] in cell and DEFINITIONS[key] in cell  # the definition beside its cell
    # The folded diff names the three cells to score first in the packet's words, not the defaults.
    folded = html.split('id="diff-section"')[1].split("</section>")[0]
    assert all(WORDS[key] in folded for key in ORDER[:3]) and rubric.RED_LOG.label not in folded


@pytest.mark.django_db
def test_still_to_score_uses_the_packets_words(rob, reviewer, worded_packet):
    submission = make_submission(worded_packet)
    score(submission, reviewer, {"red_log": True, "model_waited": True}, submit=False)
    response = rob.post(f"/review/{submission.pk}/submit/", {"confirm": "yes"}, headers=HX)
    assert f"Still to score: {WORDS['refusal_specific']}, {WORDS['test_names_bug']}.".encode() in response.content


@pytest.mark.django_db
def test_the_debrief_and_its_csv_follow_the_one_order_and_the_packets_words(client, reviewer, worded_packet):
    submission = make_submission(worded_packet)
    score(submission, reviewer, {key: True for key in ORDER})
    client.force_login(reviewer)
    html = client.get(f"/review/debrief/{worded_packet.slug}/").content.decode()
    head = html.split('<table class="list debrief">')[1].split("</thead>")[0]
    positions = [head.index(WORDS[key]) for key in ORDER]
    assert positions == sorted(positions)
    assert all(DEFINITIONS[key] in html for key in ORDER)
    csv = b"".join(client.get(f"/review/debrief/{worded_packet.slug}.csv").streaming_content).decode()
    header = csv.splitlines()[0].split(",")
    assert [h for h in header if h in ORDER] == ORDER


@pytest.mark.django_db
def test_the_packet_page_lists_the_rubric_in_the_one_order_with_definitions(recruiter_client, worded_packet):
    html = recruiter_client.get(worded_packet.get_absolute_url()).content.decode()
    ol = html.split('<ol class="rubric">')[1].split("</ol>")[0]
    positions = [ol.index(WORDS[key]) for key in ORDER]
    assert positions == sorted(positions) and all(DEFINITIONS[key] in ol for key in ORDER)


@pytest.mark.django_db
def test_the_migration_fills_the_defaults_and_keeps_a_versions_own_words(sample_packet):
    version = sample_packet.latest_version()
    PacketVersion.objects.filter(pk=version.pk).update(rubric={"red_log": "Kept", "model_waited": ""},
                                                       rubric_definitions={})
    migration = importlib.import_module("takehome.migrations.0006_rubric_definitions")
    migration.fill_rubric(apps, None)
    version = PacketVersion.objects.get(pk=version.pk)
    assert version.rubric == {**rubric.DEFAULT_LABELS, "red_log": "Kept"}
    assert version.rubric_definitions == migration.DEFINITIONS  # the words of its day, frozen in the migration


@pytest.mark.django_db
@pytest.mark.parametrize("words, label", [
    ({}, "The patch waited for red"),
    ({"model_waited": rubric.MODEL_WAITED.label}, "The patch waited for red"),  # the form's untouched default
    ({"model_waited": "Fixed only after the failure"}, "Fixed only after the failure"),
])
def test_a_version_without_a_model_reads_its_second_cell_as_the_patch_waiting_for_red(sample_packet, words, label):
    before = list(PacketVersion.objects.values_list("pk", "rubric"))
    content = dataclasses.replace(sample_content()[2], model_policy="none", rubric=words, rubric_definitions={})
    version = do_create_version(sample_packet, content)
    cell = version.rubric_cells()[1]
    assert (cell.key, cell.label) == ("model_waited", label)
    assert "green.log comes after the red log" in cell.definition
    assert list(PacketVersion.objects.exclude(pk=version.pk).values_list("pk", "rubric")) == before  # unchanged
