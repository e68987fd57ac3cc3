"""Comments on diff lines: kept with the review, blind like the cells until one's own submit, final with it,
in the debrief and the CSV; and the diff drawn unified and side by side, as tables with headers."""

import csv
import io
import re

import pytest

from grading.actions import ReviewError, do_save_line_comment
from grading.models import LineComment, Review
from grading.tests.reviewing import make_submission, score

pytestmark = pytest.mark.django_db
HX = {"HX-Request": "true"}
FIRST_THREE = {"red_log": True, "model_waited": True, "refusal_specific": True}
ALL_PASS = {**FIRST_THREE, "test_names_bug": True}
FIX_LINE = '            n += int(row["cents"])'  # invoices.py, line 9 after the change, in the ideal evidence


def comment(client, submission, body, path="invoices.py", at="new:9", view="unified", htmx=True):
    return client.post(f"/review/{submission.pk}/comment/save/", {"path": path, "at": at, "body": body, "view": view},
                       headers=HX if htmx else {})


def diff_part(html: str) -> str:
    return html.split('data-section="diff"')[1]


def test_a_comment_is_kept_with_the_review_and_quotes_the_line_from_the_evidence(rob, reviewer, submission):
    score(submission, reviewer, FIRST_THREE, submit=False)
    opened = rob.get(f"/review/{submission.pk}/comment/?path=invoices.py&at=new:9", headers=HX).content.decode()
    assert "<html" not in opened and 'id="diff-file-1"' in opened
    assert '<textarea id="comment-body" name="body"' in opened and "Your comment on added line 9 of" in opened
    saved = comment(rob, submission, "why drop abs? <b>").content.decode()
    c = LineComment.objects.get()
    assert (c.review.reviewer, c.path, c.side, c.line, c.snippet, c.body) == (
        reviewer, "invoices.py", "new", 9, FIX_LINE, "why drop abs? <b>")
    assert 'data-by="you"' in saved and "why drop abs? &lt;b&gt;" in saved and "<b>" not in saved
    assert 'id="comment-link-unified-1-new-9"' in saved and "autofocus" in saved.split('id="comment-link-unified-1-new-9"')[1][:600]
    comment(rob, submission, "changed my mind")
    assert LineComment.objects.get().body == "changed my mind"
    comment(rob, submission, "  ")  # emptied: removed
    assert not LineComment.objects.exists()


def test_without_htmx_the_form_opens_in_the_page_and_a_save_goes_back_to_it(rob, reviewer, submission):
    score(submission, reviewer, FIRST_THREE, submit=False)
    page = rob.get(f"/review/{submission.pk}/comment/?path=invoices.py&at=old:9").content.decode()
    assert "<html" in page and "Your comment on removed line 9 of" in page
    response = comment(rob, submission, "abs() hid the refunds", at="old:9", htmx=False)
    assert response.status_code == 302 and response["Location"].endswith("#diff-section")
    assert LineComment.objects.get().snippet == '            n += abs(int(row["cents"]))'


@pytest.mark.parametrize("path, at", [("nope.py", "new:9"), ("invoices.py", "new:99"), ("invoices.py", "mid:9"),
                                      ("invoices.py", "old:10")])
def test_a_line_the_diff_does_not_have_is_refused(reviewer, submission, path, at):
    score(submission, reviewer, FIRST_THREE, submit=False)
    with pytest.raises(ReviewError, match="no such line"):
        do_save_line_comment(submission, reviewer, path, at, "x")
    assert not LineComment.objects.exists()


def test_no_comment_while_the_diff_is_folded_nor_once_submitted(rob, reviewer, submission):
    score(submission, reviewer, {"red_log": True}, submit=False)
    html = comment(rob, submission, "too early").content.decode()
    assert "the diff is folded until then" in html and not LineComment.objects.exists()
    assert not Review.objects.get().marks.filter(cell="model_waited").exists()
    score(submission, reviewer, ALL_PASS)
    with pytest.raises(ReviewError, match="its comments are final"):
        do_save_line_comment(submission, reviewer, "invoices.py", "new:9", "late")
    assert "comment-link" not in diff_part(rob.get(f"/review/{submission.pk}/").content.decode())


def test_a_recruiter_cannot_comment(recruiter_client, submission):
    assert comment(recruiter_client, submission, "x").status_code == 403


def test_comments_are_blind_until_ones_own_review_is_submitted(client, reviewer, ann, recruiter, submission):
    score(submission, ann, FIRST_THREE, submit=False)
    do_save_line_comment(submission, ann, "invoices.py", "new:9", "ann's secret reading")
    score(submission, reviewer, FIRST_THREE, submit=False)
    client.force_login(reviewer)
    assert "ann's secret reading" not in client.get(f"/review/{submission.pk}/").content.decode()
    score(submission, ann, ALL_PASS)  # ann submits: still hidden from rob, who has not
    page = client.get(f"/review/{submission.pk}/").content.decode()
    assert "ann's secret reading" not in page
    assert "ann&#x27;s secret reading" not in page
    score(submission, reviewer, {"test_names_bug": False})  # rob submits: now he reads ann's
    shown = diff_part(client.get(f"/review/{submission.pk}/").content.decode())
    assert 'data-by="ann"' in shown and "ann&#x27;s secret reading" in shown
    # a recruiter reading sees every submitted review's comments
    client.force_login(recruiter)
    assert "ann&#x27;s secret reading" in client.get(f"/review/{submission.pk}/").content.decode()


def test_the_debrief_and_the_csv_carry_the_comments_blind_like_the_marks(client, reviewer, ann, cy, sample_packet):
    submission = make_submission(sample_packet, "Ada")
    for who, body in ((ann, "=cmd|' /C calc'!A0"), (reviewer, "the fix is right")):
        score(submission, who, FIRST_THREE, submit=False)
        do_save_line_comment(submission, who, "invoices.py", "new:9", body)
        score(submission, who, {"test_names_bug": True})
    client.force_login(cy)  # cy has not reviewed: sees none of them
    assert "the fix is right" not in client.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    client.force_login(reviewer)
    html = client.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    row = html.split(f'data-comments-for="{submission.pk}"')[1].split("</tr>")[0]
    assert re.search(r'data-by="rob"><strong>rob</strong> on <code>invoices.py:9</code>', row)
    assert "the fix is right" in row and 'int(row[&quot;cents&quot;])' in row
    rows = list(csv.DictReader(io.StringIO(
        b"".join(client.get(f"/review/debrief/{sample_packet.slug}.csv").streaming_content).decode())))
    by = {r["reviewer"]: r for r in rows}
    assert by["rob"]["diff_comments"] == f"invoices.py:9 `{FIX_LINE.strip()}`: the fix is right"
    assert by["ann"]["diff_comments"].startswith("invoices.py:9 ") and "=cmd" in by["ann"]["diff_comments"]
    assert list(rows[0]).index("diff_comments") == list(rows[0]).index("test_names_bug_note") + 1


def test_the_diff_is_drawn_unified_and_side_by_side_as_tables_with_headers(rob, reviewer, submission):
    score(submission, reviewer, FIRST_THREE, submit=False)
    diff = diff_part(rob.get(f"/review/{submission.pk}/").content.decode())
    assert 'id="diff-view-switch"' in diff and 'data-diff-view-choice="split"' in diff
    invoices = diff.split('id="diff-file-1"')[1].split("</details>")[0]
    unified, split = invoices.split('data-diff-view="split"')
    assert "<caption" in unified and '<th scope="col">Before</th><th scope="col">After</th>' in unified
    assert '<th scope="col">Line before</th><th scope="col">Before</th><th scope="col">Line after</th>' in split
    assert split.startswith(" hidden>")  # without a script, only the unified view shows
    # the removed line beside the added one, each said in words, not only in colour
    pair = split.split('data-anchor="old:9"')[1].split("</tr>")[0]
    assert "removed: </span>" in pair and 'abs(int(row[&quot;cents&quot;]))' in pair
    assert 'data-anchor="new:9"' in pair and "added: </span>" in pair
    assert '<span class="visually-hidden">added</span>' in unified
    # the file the comment form opens in the side-by-side view is drawn there, not in the unified one
    opened = rob.get(f"/review/{submission.pk}/comment/?path=invoices.py&at=old:9&view=split", headers=HX)
    unified, split = opened.content.decode().split('data-diff-view="split"')
    assert 'id="comment-body"' in split and 'id="comment-body"' not in unified
    assert 'name="view" value="split"' in split
