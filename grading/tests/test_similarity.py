"""Similar submissions: stored when grading finishes, matched within the packet, listed on the review page only
once the viewer's four cells are marked, on the debrief and in its CSV; `manage.py rebuild_similarity`."""

from __future__ import annotations

import csv
import io
from unittest.mock import patch

import pytest
from django.core.management import call_command

from grading import pipeline, similarity
from grading.engine import similarity as measure
from grading.models import Cell, Fingerprint, SimilarityProfile, SimilarMatch
from grading.tests import corpus, similar_answers
from grading.tests.reviewing import make_submission, score
from grading.tests.test_pipeline import submit
from sessions_app.models import Submission
from takehome.models import Invitation

pytestmark = pytest.mark.django_db

PASS_ALL = {cell: True for cell in Cell.values}


def invite(packet, name: str) -> Invitation:
    from takehome.models import Candidate

    candidate = Candidate.objects.create(name=name, email=f"{name.split()[0].lower()}@example.com")
    invitation = Invitation(candidate=candidate, packet_version=packet.latest_version())
    invitation.issue_token()
    invitation.save()
    return invitation


def listed(html: str) -> set[int]:
    """The submissions the page lists as similar."""
    import re

    return {int(pk) for pk in re.findall(r'data-similar="(\d+)"', html)}


def mark_all(client, submission) -> list:
    """rob marks the four cells through the page's own requests (htmx), in the page's order."""
    return [client.post(f"/review/{submission.pk}/mark/{cell}/", {"passed": "true"}, headers={"HX-Request": "true"})
            for cell in (Cell.RED_LOG, Cell.MODEL_WAITED, Cell.REFUSAL_SPECIFIC, Cell.TEST_NAMES_BUG)]


@pytest.mark.usefixtures("use_test_sandbox")
def test_two_copies_of_a_model_answer_are_listed_as_similar_and_a_different_answer_is_not(
        sample_packet, media_root, tmp_path, rob):
    ada, bob, cy = (invite(sample_packet, n) for n in ("Ada Copy", "Bob Renamed", "Cy Honest"))
    a = submit(ada, corpus.zip_with_times(tmp_path / "a.zip", similar_answers.model_files()))
    b = submit(bob, corpus.zip_with_times(tmp_path / "b.zip", similar_answers.renamed_files()))
    c = submit(cy, corpus.zip_with_times(tmp_path / "c.zip", similar_answers.honest_files()))
    for s in (a, b, c):
        # graded in the real sandbox; the similarity is computed as grading finishes
        assert pipeline.grade_submission(s.pk) == "graded"

    assert set(SimilarMatch.objects.filter(submission=a).values_list("other_id", "channel")) == {
        (b.pk, "tests"), (b.pk, "refusal")}
    # the refusal only rewrapped: the same; the test diff holds lines the copy changed and the model's did not
    assert SimilarMatch.objects.get(submission=a, channel="refusal").score == 1.0
    assert SimilarMatch.objects.get(submission=a, channel="tests").score >= measure.THRESHOLD
    assert set(SimilarMatch.objects.filter(submission=b).values_list("other_id", flat=True)) == {a.pk}
    assert not SimilarMatch.objects.filter(submission=c).exists()
    assert not SimilarMatch.objects.filter(other=c).exists()

    # Hidden before the four cells are marked, on the page and in every response of the first three marks.
    page = rob.get(f"/review/{a.pk}/").content.decode()
    assert listed(page) == set() and "Listed once you have marked the four cells" in page
    responses = mark_all(rob, a)
    assert all(listed(r.content.decode()) == set() for r in responses[:3])
    # The fourth mark brings the list in (swapped into the page out of band), and the page keeps it.
    last = responses[3].content.decode()
    assert 'id="similar-section" aria-labelledby="similar-heading" hx-swap-oob="true"' in last
    assert listed(last) == {b.pk}
    page = rob.get(f"/review/{a.pk}/").content.decode()
    assert listed(page) == {b.pk}
    assert 'data-channel="test diff"' in page and "Bob Renamed" in page and "Cy Honest" not in page

    mark_all(rob, c)
    page = rob.get(f"/review/{c.pk}/").content.decode()
    assert listed(page) == set() and 'id="no-similar"' in page


def test_a_submission_graded_later_is_listed_on_the_earlier_ones_page(sample_packet, rob):
    a = make_submission(sample_packet, "Ada Copy", evidence=similar_answers.model_evidence())
    similarity.record(a.pk)
    assert not SimilarMatch.objects.exists()
    b = make_submission(sample_packet, "Bob Renamed", evidence=similar_answers.renamed_evidence())
    assert similarity.record(b.pk) == 1
    mark_all(rob, a)
    assert listed(rob.get(f"/review/{a.pk}/").content.decode()) == {b.pk}


def test_the_candidates_own_earlier_upload_is_never_a_match(sample_packet):
    from grading.tests.reviewing import upload_again

    a = make_submission(sample_packet, "Ada Again", evidence=similar_answers.model_evidence())
    similarity.record(a.pk)
    again = upload_again(a, evidence=similar_answers.model_evidence())
    assert similarity.record(again.pk) == 0


def test_a_recruiter_reads_the_list_without_marking(sample_packet, recruiter_client):
    a = make_submission(sample_packet, "Ada Copy", evidence=similar_answers.model_evidence())
    b = make_submission(sample_packet, "Bob Renamed", evidence=similar_answers.renamed_evidence())
    for s in (a, b):
        similarity.record(s.pk)
    assert listed(recruiter_client.get(f"/review/{a.pk}/").content.decode()) == {b.pk}


def test_hidden_names_stay_hidden_in_the_list(sample_packet, rob):
    sample_packet.hide_candidate_names = True
    sample_packet.save()
    a = make_submission(sample_packet, "Ada Copy", evidence=similar_answers.model_evidence())
    b = make_submission(sample_packet, "Bob Renamed", evidence=similar_answers.renamed_evidence())
    for s in (a, b):
        similarity.record(s.pk)
    mark_all(rob, a)
    page = rob.get(f"/review/{a.pk}/").content.decode()
    assert listed(page) == {b.pk} and "Bob Renamed" not in page and b.invitation.hidden_label() in page


def csv_rows(client, packet) -> dict[int, dict]:
    text = b"".join(client.get(f"/review/debrief/{packet.slug}.csv").streaming_content).decode()
    return {int(r["submission"]): r for r in csv.DictReader(io.StringIO(text))}


def test_the_debrief_and_its_csv_list_the_similar_ones_once_the_row_is_visible(sample_packet, rob, reviewer, ann):
    a = make_submission(sample_packet, "Ada Copy", evidence=similar_answers.model_evidence())
    b = make_submission(sample_packet, "Bob Renamed", evidence=similar_answers.renamed_evidence())
    c = make_submission(sample_packet, "Cy Honest", evidence=similar_answers.honest_evidence())
    for s in (a, b, c):
        similarity.record(s.pk)
        score(s, ann, PASS_ALL)

    # rob has reviewed none: the rows are blind, and so is what they are similar to
    html = rob.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    assert f'data-similar-of="{a.pk}"><span class="muted">after your review' in html
    assert listed(html) == set()
    assert csv_rows(rob, sample_packet) == {}

    for s in (a, c):
        score(s, reviewer, PASS_ALL)
    html = rob.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    assert listed(html) == {b.pk}  # on a's row; b's row is still blind, c's similar to none
    assert f'data-similar-of="{c.pk}"><span class="muted">—' in html
    rows = csv_rows(rob, sample_packet)
    assert set(rows) == {a.pk, c.pk}
    assert rows[a.pk]["similar_to"] == f"submission {b.pk} (test diff 1.00, refuse.md 1.00)"
    assert rows[c.pk]["similar_to"] == ""


def test_refused_on_regrading_forgets_its_fingerprints(sample_packet):
    a = make_submission(sample_packet, "Ada Copy", evidence=similar_answers.model_evidence())
    b = make_submission(sample_packet, "Bob Renamed", evidence=similar_answers.renamed_evidence())
    for s in (a, b):
        similarity.record(s.pk)
    assert SimilarMatch.objects.count() == 4  # two channels, both ways round
    Submission.objects.filter(pk=b.pk).update(status=Submission.Status.REJECTED)
    similarity.record(b.pk)
    assert not SimilarMatch.objects.exists()
    assert not Fingerprint.objects.filter(submission=b).exists()


def test_rebuild_similarity_computes_them_for_submissions_graded_before(sample_packet):
    a = make_submission(sample_packet, "Ada Copy", evidence=similar_answers.model_evidence())
    b = make_submission(sample_packet, "Bob Renamed", evidence=similar_answers.renamed_evidence())
    make_submission(sample_packet, "Cy Honest", evidence=similar_answers.honest_evidence())
    out = io.StringIO()
    call_command("rebuild_similarity", stdout=out)
    assert "Fingerprinted 3 graded submissions" in out.getvalue()
    assert SimilarityProfile.objects.count() == 3
    assert set(SimilarMatch.objects.values_list("submission_id", "other_id").distinct()) == {
        (a.pk, b.pk), (b.pk, a.pk)}
    call_command("rebuild_similarity", sample_packet.slug, stdout=out)  # again: the same rows, no doubles
    assert SimilarMatch.objects.count() == 4


def test_rebuild_similarity_names_an_unknown_packet(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No packet named nope"):
        call_command("rebuild_similarity", "nope")


def test_a_failure_to_match_never_fails_the_grading(invitation, media_root, tmp_path, use_test_sandbox, caplog):
    s = submit(invitation, corpus.zip_with_times(tmp_path / "s.zip", corpus.honest_files()))
    with patch.object(similarity, "record", side_effect=RuntimeError("index gone")):
        assert pipeline.grade_submission(s.pk) == "graded"
    assert "rebuild_similarity" in caplog.text
