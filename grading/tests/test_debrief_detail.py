"""The debrief: four cells side by side, disagreements marked, agreement figures with known answers, CSV."""

import csv
import io
import re

import pytest

from grading.tests.reviewing import make_submission, score

pytestmark = pytest.mark.django_db


def marks(red, stamp=True, refusal=True, test=True):
    return {"red_log": red, "model_waited": stamp, "refusal_specific": refusal, "test_names_bug": test}


@pytest.fixture
def scored(sample_packet, reviewer, ann):
    """Four candidates, two reviewers (ann, rob).

    red_log:       ann P P F F, rob P F F F  -> 3/4 agree; p_e = .5*.25 + .5*.75 = .5; kappa .5
    model_waited:  all pass for both          -> 100%, kappa undefined
    refusal:       ann P F P F, rob F P F P   -> 0%, kappa -1
    test_names:    ann P P F F, rob P P F F   -> 100%, kappa 1
    """
    ann_marks = [marks(True, refusal=True, test=True), marks(True, refusal=False, test=True),
                 marks(False, refusal=True, test=False), marks(False, refusal=False, test=False)]
    rob_marks = [marks(True, refusal=False, test=True), marks(False, refusal=True, test=True),
                 marks(False, refusal=False, test=False), marks(False, refusal=True, test=False)]
    subs = []
    for i, (a, r) in enumerate(zip(ann_marks, rob_marks)):
        s = make_submission(sample_packet, f"Candidate {'ABCD'[i]}")
        score(s, ann, a)
        score(s, reviewer, r, notes={"red_log": f"rob on {'ABCD'[i]}"})
        subs.append(s)
    return subs


def agreement(html: str, cell: str) -> str:
    return html.split(f'data-agreement="{cell}"')[1].split("</td>")[0]


def test_agreement_figures_have_known_answers(client, reviewer, scored, sample_packet):
    client.force_login(reviewer)
    html = client.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    red = agreement(html, "red_log")
    assert "ann &amp; rob" in red and ">75%<" in red and "0.50 (fair)" not in red and "0.50 (moderate)" in red
    assert "over 4" in red
    stamp = agreement(html, "model_waited")
    assert ">100%<" in stamp and "undefined" in stamp
    refusal = agreement(html, "refusal_specific")
    assert ">0%<" in refusal and "-1.00 (poor)" in refusal
    test = agreement(html, "test_names_bug")
    assert ">100%<" in test and "1.00 (almost perfect)" in test


def test_pairs_only_count_submissions_both_scored(client, reviewer, ann, cy, scored, sample_packet):
    # cy scores two of the four; ann and rob's figures do not move.
    score(scored[0], cy, marks(True))
    score(scored[1], cy, marks(True))
    client.force_login(reviewer)
    red = agreement(client.get(f"/review/debrief/{sample_packet.slug}/").content.decode(), "red_log")
    assert "ann &amp; rob: <strong class=\"pct\">75%</strong>" in red
    # ann/cy: P,P vs P,P -> 100%, no variation; rob/cy: P,F vs P,P -> 50%, kappa 0
    assert 'data-pair="ann+cy"' in red and "ann &amp; cy: <strong class=\"pct\">100%</strong>" in red
    rob_cy = red.split('data-pair="cy+rob"')[1].split("</p>")[0]
    assert ">50%<" in rob_cy and "0.00 (slight)" in rob_cy and "over 2" in rob_cy


def test_rows_show_each_reviewers_mark_and_mark_disagreements(client, reviewer, scored, sample_packet):
    client.force_login(reviewer)
    html = client.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    row_b = html.split(f'data-submission="{scored[1].pk}"')[1].split("</tr>")[0]
    red = row_b.split('data-cell="red_log"')[1].split("</td>")[0]
    assert 'class="debrief-cell disagree"' in row_b.split('data-cell="red_log"')[0][-60:]
    assert 'data-reviewer="ann"' in red and 'data-reviewer="rob"' in red and "rob on B" in red
    stamp = row_b.split('data-cell="model_waited"')[0][-40:]
    assert "disagree" not in stamp
    # four cells side by side, in the page's order
    assert row_b.index('data-cell="red_log"') < row_b.index('data-cell="model_waited"') \
        < row_b.index('data-cell="refusal_specific"') < row_b.index('data-cell="test_names_bug"')


def test_the_debrief_keeps_review_blind(client, cy, scored, sample_packet):
    client.force_login(cy)
    html = client.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    assert 'data-reviewer="ann"' not in html and "rob on A" not in html
    assert "2 reviews submitted; hidden until you submit your own." in html
    rows = list(csv.reader(io.StringIO(b"".join(client.get(f"/review/debrief/{sample_packet.slug}.csv").streaming_content).decode())))
    assert len(rows) == 1  # the header only


def test_csv_export(client, reviewer, scored, sample_packet):
    client.force_login(reviewer)
    response = client.get(f"/review/debrief/{sample_packet.slug}.csv")
    assert response["Content-Type"].startswith("text/csv")
    assert f"debrief-{sample_packet.slug}.csv" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 8
    b_rob = next(r for r in rows if r["candidate"] == "Candidate B" and r["reviewer"] == "rob")
    assert (b_rob["red_log"], b_rob["red_log_note"], b_rob["model_waited"]) == ("fail", "rob on B", "pass")
    assert b_rob["disagreement"] == "red_log refusal_specific"
    assert not any(k in rows[0] for k in ("total", "score", "average"))


def test_csv_fields_cannot_run_as_formulas(client, reviewer, sample_packet):
    s = make_submission(sample_packet, "=HYPERLINK(\"http://x\")")
    score(s, reviewer, marks(True), notes={"red_log": "+1 cmd"})
    client.force_login(reviewer)
    text = b"".join(client.get(f"/review/debrief/{sample_packet.slug}.csv").streaming_content).decode()
    assert "'=HYPERLINK" in text and "'+1 cmd" in text


def test_hidden_names_in_the_debrief_and_csv(client, reviewer, scored, sample_packet):
    sample_packet.hide_candidate_names = True
    sample_packet.save()
    client.force_login(reviewer)
    html = client.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    text = b"".join(client.get(f"/review/debrief/{sample_packet.slug}.csv").streaming_content).decode()
    for out in (html, text):
        # the codes are random letters, so "Candidate AE4MXQ" may begin like a name
        assert not re.search(r"Candidate [A-D]\b", out), out
        assert scored[0].invitation.hidden_label() in out and "Candidate #" not in out


def test_debrief_paginates_with_a_fixed_number_of_queries(client, reviewer, ann, sample_packet,
                                                          django_assert_max_num_queries):
    for i in range(60):
        s = make_submission(sample_packet, f"Cand {i:02d}")
        score(s, reviewer, marks(i % 2 == 0))
        score(s, ann, marks(True))
    client.force_login(reviewer)
    # A fixed number, whatever the row count: session, user, groups (twice, for the nav),
    # packet, the page's candidates, the count, their invitations, rows, their marks, the latest
    # version's rubric labels, the agreement tally with the pair's names.
    with django_assert_max_num_queries(13):
        html = client.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    assert html.count('class="debrief-cell') == 25 * 4 and "60 candidates" in html
    assert ">50%<" in agreement(html, "red_log")


def test_unknown_packet_is_404(client, reviewer):
    client.force_login(reviewer)
    assert client.get("/review/debrief/nope/").status_code == 404
    assert client.get("/review/debrief/nope.csv").status_code == 404


def test_reviews_of_an_older_upload_stay_marked_a_newer_upload_exists(client, reviewer, ann, sample_packet):
    from datetime import timedelta

    from django.utils import timezone

    from grading.tests.reviewing import upload_again

    first = make_submission(sample_packet, "Ada", uploaded_at=timezone.now() - timedelta(hours=1))
    score(first, ann, marks(True), notes={"red_log": "ann on the first upload"})
    score(first, reviewer, marks(False))
    newer = upload_again(first)
    client.force_login(reviewer)
    html = client.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    old_row = html.split(f'data-submission="{first.pk}"')[1].split("</tr>")[0]
    new_row = html.split(f'data-submission="{newer.pk}"')[1].split("</tr>")[0]
    assert html.index(f'data-submission="{newer.pk}"') < html.index(f'data-submission="{first.pk}"')
    assert "a newer upload exists" in old_row and f'href="/review/{newer.pk}/"' in old_row
    assert "ann on the first upload" in old_row and 'class="debrief-cell disagree"' in old_row
    assert "Not reviewed yet." in new_row and "a newer upload exists" not in new_row
    # The two reviewers' figures still count the upload they both scored.
    assert "over 1" in agreement(html, "red_log") and ">0%<" in agreement(html, "red_log")

    rows = list(csv.DictReader(io.StringIO(
        b"".join(client.get(f"/review/debrief/{sample_packet.slug}.csv").streaming_content).decode())))
    assert {(r["submission"], r["reviewer"], r["under_review"]) for r in rows} == {
        (str(first.pk), "ann", "no"), (str(first.pk), "rob", "no")}


def test_an_unreviewed_older_upload_adds_no_row(client, reviewer, sample_packet):
    from datetime import timedelta

    from django.utils import timezone

    from grading.tests.reviewing import upload_again

    first = make_submission(sample_packet, "Ada", uploaded_at=timezone.now() - timedelta(hours=1))
    newer = upload_again(first)
    client.force_login(reviewer)
    html = client.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    assert f'data-submission="{newer.pk}"' in html and f'data-submission="{first.pk}"' not in html


def test_an_upload_inside_the_grace_period_is_marked_late_in_the_debrief(client, reviewer, sample_packet):
    from datetime import timedelta

    from takehome.models import Invitation

    submission = make_submission(sample_packet, "Late Lou")
    late = submission.uploaded_at - timedelta(seconds=30)
    Invitation.objects.filter(pk=submission.invitation_id).update(deadline=late)
    client.force_login(reviewer)
    html = client.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    assert "late by 1 min, within grace" in html.split(f'data-submission="{submission.pk}"')[1].split("</tr>")[0]
