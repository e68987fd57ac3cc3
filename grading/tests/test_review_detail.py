"""The review page: the fixed order, cells saved as you click, the folded diff, blind double review."""

import re

import pytest

from grading.models import Mark, Review
from grading.tests.reviewing import make_submission, score
from sessions_app.models import GateReceipt, Submission

pytestmark = pytest.mark.django_db
HX = {"HX-Request": "true"}
ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


def mark(client, submission, cell, passed=None, note="", htmx=True):
    data = {"note": note}
    if passed is not None:
        data["passed"] = "true" if passed else "false"
    return client.post(f"/review/{submission.pk}/mark/{cell}/", data, headers=HX if htmx else {})


def test_the_four_sections_come_in_the_articles_order(rob, submission):
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    assert re.findall(r'data-section="([a-z-]+)"', html) == ["red-log", "stamp", "refusal", "diff"]
    for cell in ("red_log", "model_waited", "refusal_specific", "test_names_bug"):
        assert f'id="cell-{cell}"' in html


def test_the_stamp_section_draws_the_timeline_and_shows_the_candidates_words(rob, submission):
    GateReceipt.objects.create(invitation=submission.invitation, step="red")
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    stamp = html.split('data-section="stamp"')[1].split('data-section="refusal"')[0]
    assert "<svg" in stamp and 'data-event="receipt: red"' not in stamp  # receipts come from the evidence
    assert 'data-event="stamp value"' in stamp and 'data-event="red.log"' in stamp
    assert "Refunds are negative" in stamp  # prompt.txt
    assert "drop rows with negative cents" in stamp  # model.md
    assert "40 s to answer" in stamp  # notes.md
    red = html.split('data-section="red-log"')[1].split('data-section="stamp"')[0]
    assert "red accepted" in red  # the server's receipt beside the red log


def test_timeline_problems_are_marked(rob, sample_packet):
    from grading.tests.reviewing import ideal_evidence

    evidence = ideal_evidence()
    evidence["timeline"]["problems"] = ["zip times: red.log (10:00) is newer than green.log (09:55)"]
    evidence["timeline"]["events"].append({"name": "green.log", "at": "2026-11-30T14:00:00", "source": "zip", "precision": "2 s"})
    html = rob.get(f"/review/{make_submission(sample_packet, evidence=evidence).pk}/").content.decode()
    assert 'class="event kind-zip flagged" data-event="green.log"' in html
    assert "is newer than green.log" in html


def stamp_and_red_sections(html: str) -> tuple[str, str]:
    red = html.split('data-section="red-log"')[1].split('data-section="stamp"')[0]
    return red, html.split('data-section="stamp"')[1].split('data-section="refusal"')[0]


def witnessed_evidence() -> dict:
    """The ideal evidence with the server's record as the grader stores it: receipts, the gate's log, notes."""
    from grading.tests.reviewing import ideal_evidence

    evidence = ideal_evidence()
    check = lambda ok, text: {"ok": ok, "text": text}  # noqa: E731
    receipt = lambda id, step, at, **kw: {  # noqa: E731
        "id": id, "step": step, "at": f"2026-11-30T14:{at}+00:00", "accepted": True, "refusal": None,
        "local_time": f"2026-11-30T15:{at}+01:00", "after_deadline": False, "checks": [], **kw}
    evidence["timeline"].update({
        "receipts_known": True,
        "receipts": [
            receipt(11, "red", "01:00", checks=[check(False, "its log is not artifacts/red.log"),
                                                check(True, "it ran on the packet's original invoices.py (the bug)")]),
            receipt(12, "green", "02:00", accepted=False, refusal="Green before model is a skip, not a pass."),
            receipt(13, "red", "02:30", accepted=False, refusal="The red log shows no failure."),
            receipt(14, "model", "03:00", checks=[check(None, "its prompt differs from artifacts/prompt.txt")]),
            receipt(15, "green", "07:00", after_deadline=True,
                    checks=[check(False, "files changed after it: invoices.py")]),
            receipt(16, "upload", "09:00"),
        ],
        "gate_log": [
            {"line": 1, "text": "{}", "step": "red", "local_time": "2026-11-30T15:01:00+01:00", "witnessed": True,
             "why": None, "receipt": "11", "refused": False, "refusal": None, "known": True},
            {"line": 2, "text": "{}", "step": "model", "local_time": "2026-11-30T15:01:30+01:00", "witnessed": False,
             "why": "server unreachable: timed out", "receipt": None, "refused": False, "refusal": None,
             "known": None},
            {"line": 3, "text": "{}", "step": "green", "local_time": "2026-11-30T15:06:00+01:00", "witnessed": True,
             "why": None, "receipt": "999", "refused": False, "refusal": None, "known": False},
            {"line": 4, "text": "hello there", "step": None, "local_time": None, "witnessed": None, "why": None,
             "receipt": None, "refused": False, "refusal": None, "known": None},
        ],
        "gate_log_cut": 0,
        "notes": ["The server refused the 'green' step once (last at 2026-11-30 14:02:00+00:00: Green before "
                  "model is a skip), then accepted it at 2026-11-30 14:07:00+00:00."],
        "problems": ["server receipts: the 'red' step was refused once (last at 2026-11-30 14:02:30+00:00: The red "
                     "log shows no failure.) and never accepted after it",
                     "server receipts: files changed after the green receipt (2026-11-30 14:07:00+00:00): "
                     "invoices.py (changed); the passing run the server witnessed was not of the uploaded files"],
        "ok": False,
    })
    evidence["timeline"]["events"] += [
        {"name": "receipt: red", "at": "2026-11-30T14:01:00+00:00", "source": "server receipt",
         "precision": "server clock", "local_time": None},
        {"name": "receipt: red (refused)", "at": "2026-11-30T14:02:30+00:00", "source": "server receipt",
         "precision": "server clock", "local_time": None},
        {"name": "receipt: green", "at": "2026-11-30T14:07:00+00:00", "source": "server receipt",
         "precision": "server clock", "local_time": None},
    ]
    return evidence


def test_every_receipt_the_gates_log_and_the_problems_are_shown(rob, sample_packet):
    submission = make_submission(sample_packet, evidence=witnessed_evidence())
    GateReceipt.objects.create(invitation=submission.invitation, step="red", refusal="from the database")
    red, stamp = stamp_and_red_sections(rob.get(f"/review/{submission.pk}/").content.decode())
    # The list: every receipt, in order, refused ones with their reason, and what each was held against.
    rows = re.findall(r'<tr data-step="(\w+)" data-accepted="(\w+)">', stamp)
    assert rows == [("red", "true"), ("green", "false"), ("red", "false"), ("model", "true"), ("green", "true"),
                    ("upload", "true")]
    assert "refused</span>: Green before model is a skip, not a pass." in stamp
    assert "2026-11-30 14:07:00" in stamp and "after the deadline" in stamp
    assert '<li class="bad">✗ files changed after it: invoices.py</li>' in stamp
    assert '<li class="muted">· its prompt differs from artifacts/prompt.txt</li>' in stamp
    assert "from the database" not in stamp  # the evidence's own record, as graded
    # The gate's log: the line that was not witnessed is marked as such.
    assert '<tr data-witnessed="false">' in stamp
    assert '<strong class="unwitnessed">not witnessed</strong>: server unreachable: timed out' in stamp
    assert "✗ the server holds no such receipt" in stamp and "✓ the server holds it" in stamp
    assert "not a line the gate writes:</span> <code>hello there</code>" in stamp
    # Problems and notes, and the refused receipt drawn and flagged on the timeline.
    assert "⚠ server receipts: the &#x27;red&#x27; step was refused once" in stamp
    assert "ℹ The server refused the &#x27;green&#x27; step once" in stamp
    assert 'class="event kind-refused flagged" data-event="receipt: red (refused)"' in stamp
    assert 'class="event kind-receipt flagged" data-event="receipt: green"' in stamp
    assert 'class="event kind-receipt" data-event="receipt: red"' in stamp
    assert "Nothing runs backwards" not in stamp
    # The red-log section keeps its red receipts, the refused one too, with the comparisons.
    assert "red accepted" in red and "red <span class=\"bad\">refused</span>: The red log shows no failure." in red
    assert "✗ its log is not artifacts/red.log" in red and "green" not in red.split("red receipts")[1].split("</ul>")[0]


def test_graded_without_the_servers_record_says_so(rob, sample_packet):
    evidence = witnessed_evidence()
    evidence["timeline"].update(receipts_known=False, receipts=[], gate_log=[], problems=[], notes=[], ok=True)
    _, stamp = stamp_and_red_sections(
        rob.get(f"/review/{make_submission(sample_packet, evidence=evidence).pk}/").content.decode())
    assert "Graded without the server's receipts" in stamp
    assert "No <code>artifacts/receipts.jsonl</code> in the zip" in stamp
    assert "Nothing runs backwards." in stamp


def test_a_hosted_submission_is_not_asked_for_the_gates_log(rob, sample_packet):
    evidence = witnessed_evidence()
    evidence["timeline"].update(gate_log=[])
    submission = make_submission(sample_packet, evidence=evidence)
    Submission.objects.filter(pk=submission.pk).update(via="hosted")
    _, stamp = stamp_and_red_sections(rob.get(f"/review/{submission.pk}/").content.decode())
    assert "in the zip" not in stamp
    assert "the server witnessed each step itself" in stamp


def test_the_diff_is_folded_until_the_three_cells_above_are_scored(rob, submission):
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    diff = html.split('data-section="diff"')[1]
    assert "Folded until" in diff and "tests_vs_original" not in diff and "invoices.py" not in diff
    assert mark(rob, submission, "test_names_bug", True).status_code == 200
    assert not Mark.objects.filter(cell="test_names_bug").exists()

    mark(rob, submission, "red_log", True)
    mark(rob, submission, "model_waited", True)
    response = mark(rob, submission, "refusal_specific", False)
    oob = response.content.decode()
    assert 'id="diff-section" hx-swap-oob="true"' in oob  # the diff unfolds in place
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    diff = html.split('data-section="diff"')[1]
    assert "tests_vs_original" in diff and "reference_vs_submitted" in diff
    # test files first
    assert diff.index("<code>test_invoices.py</code>") < diff.index("<code>invoices.py</code>")
    assert 'class="gi"' in diff  # Pygments highlighting


def test_a_note_saved_while_typing_does_not_send_the_diff_again(rob, submission):
    """The diff holds a note box of its own: swapping it out while a note is typed above would replace it."""
    for cell in ("red_log", "model_waited", "refusal_specific"):
        mark(rob, submission, cell, True)
    html = mark(rob, submission, "red_log", None, note="typed, then a pause").content.decode()
    assert Mark.objects.get(cell="red_log").note == "typed, then a pause"
    assert 'id="cell-status-red_log"' in html and "Saved: pass, with the note" in html
    assert 'id="diff-section"' not in html


def test_a_click_saves_the_mark_and_returns_only_the_cell(rob, reviewer, submission):
    response = mark(rob, submission, "red_log", True, note="  real FAILURES section  ")
    assert response.status_code == 200
    assert b"<html" not in response.content
    assert b'id="cell-red_log"' in response.content and b'data-passed="true"' in response.content
    saved = Mark.objects.get()
    assert (saved.review.reviewer, saved.cell, saved.passed, saved.note) == (reviewer, "red_log", True, "real FAILURES section")
    mark(rob, submission, "red_log", False)
    assert Mark.objects.get().passed is False


def test_a_note_alone_keeps_the_choice(rob, submission):
    mark(rob, submission, "red_log", False)
    mark(rob, submission, "red_log", None, note="no closing line")
    saved = Mark.objects.get()
    assert (saved.passed, saved.note) == (False, "no closing line")


@pytest.mark.parametrize(
    "data, message",
    [({"passed": "maybe"}, b"Select a valid choice"),
     ({"passed": "true", "note": "x" * 2001}, b"at most 2000 characters")],
)
def test_invalid_input_re_renders_the_cell_with_200(rob, submission, data, message):
    response = rob.post(f"/review/{submission.pk}/mark/red_log/", data, headers=HX)
    assert response.status_code == 200 and message in response.content
    assert b'role="alert"' in response.content and b"<html" not in response.content
    assert not Mark.objects.exists()


def test_an_unknown_cell_is_404(rob, submission):
    assert rob.post(f"/review/{submission.pk}/mark/average/", {"passed": "true"}).status_code == 404


def test_without_htmx_a_mark_redirects_back_to_the_page(rob, submission):
    response = mark(rob, submission, "red_log", True, htmx=False)
    assert response.status_code == 302 and response["Location"] == f"/review/{submission.pk}/"


def test_submit_needs_all_four_cells(rob, reviewer, submission):
    response = rob.post(f"/review/{submission.pk}/submit/", headers=HX)
    assert response.status_code == 200 and b"Score the four cells" in response.content
    score(submission, reviewer, {"red_log": True, "model_waited": True}, submit=False)
    response = rob.post(f"/review/{submission.pk}/submit/", headers=HX)
    assert b"Still to score: Refusal is specific, Test names the bug." in response.content
    assert Review.objects.get().submitted_at is None


def test_blind_double_review(client, reviewer, ann, submission):
    # Rob scores and submits first.
    score(submission, reviewer, ALL_PASS, notes={"red_log": "rob's note"})
    # Ann, before submitting her own review, sees nothing of Rob's.
    client.force_login(ann)
    html = client.get(f"/review/{submission.pk}/").content.decode()
    assert "rob" not in html.replace("Log out ann", "") and "rob's note" not in html
    for cell, passed in {"red_log": False, "model_waited": True, "refusal_specific": True}.items():
        response = mark(client, submission, cell, passed)
        assert b"rob" not in response.content
    mark(client, submission, "test_names_bug", False)
    html = client.get(f"/review/{submission.pk}/").content.decode()
    assert "rob&#x27;s note" not in html and 'data-reviewer="rob"' not in html
    # Submitting reveals Rob's marks, cell by cell.
    response = client.post(f"/review/{submission.pk}/submit/", {"confirm": "yes"}, headers=HX)
    assert response.status_code == 200 and response["HX-Redirect"] == f"/review/{submission.pk}/"
    html = client.get(f"/review/{submission.pk}/").content.decode()
    cell = html.split('id="cell-red_log"')[1].split("</aside>")[0]
    assert 'data-reviewer="you"' in cell and "fail" in cell
    assert 'data-reviewer="rob"' in cell and "rob&#x27;s note" in cell
    # Rob's marks are untouched, Ann's are her own.
    assert list(Mark.objects.filter(review__reviewer=reviewer).values_list("passed", flat=True)) == [True] * 4
    assert Mark.objects.get(review__reviewer=ann, cell="red_log").passed is False


def test_a_reviewers_drafts_stay_hidden_even_after_others_submit(client, reviewer, ann, submission):
    score(submission, ann, {"red_log": False}, submit=False)
    score(submission, reviewer, ALL_PASS)
    client.force_login(reviewer)
    html = client.get(f"/review/{submission.pk}/").content.decode()
    assert 'data-reviewer="ann"' not in html and "No other review submitted yet" in html


def test_a_reviewer_cannot_change_another_reviewers_marks(client, reviewer, ann, submission):
    score(submission, reviewer, ALL_PASS)
    client.force_login(ann)
    # There is no id to aim at: every write goes to the requester's own review.
    mark(client, submission, "red_log", False)
    assert Mark.objects.get(review__reviewer=reviewer, cell="red_log").passed is True
    assert Mark.objects.get(review__reviewer=ann, cell="red_log").passed is False


def test_a_submitted_review_is_final(rob, reviewer, submission):
    score(submission, reviewer, ALL_PASS)
    response = mark(rob, submission, "red_log", False)
    assert response.status_code == 200 and b"final" in response.content
    assert Mark.objects.get(cell="red_log").passed is True
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    assert "Your review is submitted" in html and 'name="passed"' not in html


def test_no_total_average_or_percentage_of_marks(rob, reviewer, ann, submission):
    score(submission, reviewer, {**ALL_PASS, "refusal_specific": False})
    score(submission, ann, ALL_PASS)
    for url in (f"/review/{submission.pk}/", f"/review/debrief/{submission.invitation.packet.slug}/", "/review/?show=all"):
        html = rob.get(url).content.decode()
        # Our own words only: drop the agreement card (it describes reviewers), the
        # candidate's texts (<pre>, the diff's tables) and the packet's title ("... invoice total").
        html = re.sub(r'<section class="card agreement">.*?</section>', "", html, flags=re.S)
        html = re.sub(r"<pre.*?</pre>|<code>.*?</code>|<div class=\"markdown refusal-text\">.*?</div>"
                      r"|<table class=\"diff-table.*?</table>", "", html, flags=re.S)
        html = html.replace(submission.invitation.packet.title, "")
        text = re.sub(r"<[^>]+>", " ", html)
        assert not re.search(r"\b(total|average|sum|score:|\d+ ?/ ?4|\d of 4)\b", text, re.I), url
        assert not re.search(r"\d\s*%", text), url


def test_hidden_names_on_the_review_page(rob, submission):
    packet = submission.invitation.packet
    packet.hide_candidate_names = True
    packet.save()
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    label = submission.invitation.hidden_label()
    assert "Ada Lovelace" not in html and label in html and "Candidate #" not in html


def test_the_page_polls_while_grading_and_reloads_when_done(rob, sample_packet):
    submission = make_submission(sample_packet, status=Submission.Status.GRADING)
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    assert 'id="grading-status"' in html and 'hx-trigger="every 2s"' in html and "No evidence yet" in html
    partial = rob.get(f"/review/{submission.pk}/", headers=HX)
    assert b"<html" not in partial.content and b"Grading" in partial.content
    Submission.objects.filter(pk=submission.pk).update(status="graded")
    assert rob.get(f"/review/{submission.pk}/", headers=HX)["HX-Refresh"] == "true"


def test_a_refused_archive_says_why(rob, sample_packet):
    from grading.engine.core import empty_evidence

    submission = make_submission(sample_packet, evidence=empty_evidence("the zip holds a symlink"),
                                 status=Submission.Status.REJECTED)
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    assert "The archive was refused" in html and "the zip holds a symlink" in html
    assert "No <code>artifacts/red.log</code>" in html


def test_a_zip_refused_at_unpack_is_received_not_accepted_and_the_timeline_says_what_is_missing(
        rob, invitation, media_root, tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    from grading import pipeline
    from grading.engine.core import empty_evidence
    from grading.tests.zips import make_zip
    from sessions_app.actions import do_start_session

    do_start_session(invitation)
    data = make_zip(tmp_path / "bad.zip", {"refund-sum/invoices.py": b"x = 1\n"},
                    symlinks={"refund-sum/link": "/etc/passwd"}).read_bytes()
    answer = Client().post(f"/t/{invitation.raw_token}/upload", {"archive": SimpleUploadedFile("w.zip", data)},
                           headers={"X-Takehome-Client": "gate"})
    bad = Submission.objects.get(pk=answer.json()["submission"])
    assert bad.unpack_refusal and GateReceipt.objects.get(step="upload").accepted  # received, as receipts say
    pipeline.record_evidence(pipeline.claim(bad.pk), empty_evidence(bad.unpack_refusal), 0.1)
    _, stamp = stamp_and_red_sections(rob.get(f"/review/{bad.pk}/").content.decode())
    assert re.findall(r'<tr data-step="(\w+)" data-accepted="(\w+)">', stamp) == [("upload", "false")]
    row = stamp.split('<tr data-step="upload"')[1].split("</tr>")[0]
    assert 'received, <span class="bad">not accepted</span>: The archive holds a symbolic link' in row
    assert ">accepted<" not in row and "No times at all" not in stamp
    assert ("Nothing to draw: the archive was refused, so no artifact or stamp was read from it; the server&#x27;s "
            "receipts (1) are listed below.") in stamp

    # "No times at all" is kept for when there is nothing at all
    from grading.tests.reviewing import ideal_evidence

    evidence = ideal_evidence()
    evidence["timeline"].update(events=[], receipts=[], receipts_known=True, problems=[])
    evidence["model"] = None
    _, stamp = stamp_and_red_sections(
        rob.get(f"/review/{make_submission(invitation.packet, evidence=evidence).pk}/").content.decode())
    assert "No times at all: no artifacts, no stamp, no receipts." in stamp


# --- the candidate's other uploads, above the evidence ------------------------------------------


def test_refused_uploads_are_listed_with_their_reason_above_the_four_sections(rob, sample_packet):
    from datetime import timedelta

    from django.utils import timezone

    from grading.engine.core import empty_evidence
    from grading.tests.reviewing import upload_again

    good = make_submission(sample_packet, uploaded_at=timezone.now() - timedelta(minutes=10))
    reason = "The archive holds a symbolic link (refund-sum/<link>); replace it with a copy of the file."
    bad = upload_again(good, status=Submission.Status.REJECTED, evidence=empty_evidence(reason), reason=reason)
    assert Submission.objects.get(pk=good.pk).is_latest and not bad.is_latest

    html = rob.get(f"/review/{good.pk}/").content.decode()
    history = html.split('id="upload-history"')[1].split("</section>")[0]
    assert html.index('id="upload-history"') < html.index('data-section="red-log"')
    refused = history.split(f'data-upload="{bad.pk}"')[1].split("</tr>")[0]
    assert "refused: The archive holds a symbolic link (refund-sum/&lt;link&gt;)" in refused
    assert f'href="/review/{bad.pk}/"' in refused
    current = history.split(f'data-upload="{good.pk}"')[1].split("</tr>")[0]
    assert "(this page)" in current and "under review" in current
    assert 'id="not-under-review"' not in html and "The archive was refused" not in html


def test_an_older_upload_says_a_newer_one_exists_and_keeps_its_reviews(rob, reviewer, sample_packet):
    from datetime import timedelta

    from django.utils import timezone

    from grading.tests.reviewing import upload_again

    first = make_submission(sample_packet, uploaded_at=timezone.now() - timedelta(minutes=10))
    score(first, reviewer, ALL_PASS)
    newer = upload_again(first)
    html = rob.get(f"/review/{first.pk}/").content.decode()
    banner = html.split('id="not-under-review"')[1].split("</section>")[0]
    assert "A newer upload exists." in banner and f'href="/review/{newer.pk}/"' in banner
    assert html.index('id="not-under-review"') < html.index('data-section="red-log"')
    assert "Your review is submitted" in html  # the review stays with the upload it scored
    history = html.split('id="upload-history"')[1].split("</section>")[0]
    assert history.split(f'data-upload="{first.pk}"')[1].split("</tr>")[0].rstrip().endswith("<td>1</td>")
    # The newer upload's page carries no banner; its history shows the older one's review.
    assert 'id="not-under-review"' not in rob.get(f"/review/{newer.pk}/").content.decode()


def test_a_superseded_upload_says_it_was_not_graded(rob, sample_packet):
    from datetime import timedelta

    from django.utils import timezone

    from grading.tests.reviewing import upload_again

    old = make_submission(sample_packet, status=Submission.Status.QUEUED,
                          uploaded_at=timezone.now() - timedelta(minutes=1))
    from grading import lifecycle

    lifecycle.supersede_waiting(old.invitation)
    upload_again(old, status=Submission.Status.QUEUED)
    html = rob.get(f"/review/{old.pk}/").content.decode()
    assert "Not graded: a newer upload arrived before grading started" in html
    assert "reloads itself" not in html and 'hx-trigger="every 2s"' not in html
    assert "replaced by a newer upload before grading; not graded" in html


def test_missing_submission_is_404(rob, db):
    assert rob.get("/review/999999/").status_code == 404


def test_the_page_costs_a_fixed_number_of_queries(rob, reviewer, ann, submission, django_assert_max_num_queries):
    score(submission, reviewer, ALL_PASS)
    score(submission, ann, ALL_PASS)
    # 14, and since reviewers are assigned and comment on the diff: the viewer's own queue (for "next"),
    # the assigned reviewers, the viewer's comments (and, once submitted, the others')
    with django_assert_max_num_queries(18):
        assert rob.get(f"/review/{submission.pk}/").status_code == 200


def test_the_folded_diff_says_why_in_the_reviewers_words(rob, submission):
    diff = rob.get(f"/review/{submission.pk}/").content.decode().split('data-section="diff"')[1]
    assert "Folded until you have scored the three cells above" in diff
    assert "the diff comes last" in diff and "article" not in diff


def test_after_the_last_review_the_page_leads_back_to_the_queue(rob, reviewer, submission):
    score(submission, reviewer, ALL_PASS)
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    bar = html.split('id="review-submit"')[1]
    assert "Nothing else is waiting for you." in bar and 'href="/review/"' in bar
    assert f'href="/review/debrief/{submission.invitation.packet.slug}/"' in bar
    # A late click on a locked cell still answers with the cell (no packet in that context).
    response = mark(rob, submission, "red_log", False)
    assert response.status_code == 200 and b"final" in response.content


def section(html: str, name: str) -> str:
    start = html.index(f'data-section="{name}"')
    end = html.find('data-section="', start + 20)
    return html[start:end if end > 0 else len(html)]


def tampered_evidence() -> dict:
    from grading.tests.reviewing import ideal_evidence

    evidence = ideal_evidence()
    submitted = evidence["runs"]["submitted"]
    submitted["outcome"], submitted["as_expected"] = "tampered", False
    submitted["integrity"]["tampered"] = ["1 of the 3 planted canary tests passed (test_invoices.py::test_rows_zero); "
                                          "a canary cannot pass unless pytest's verdicts were changed"]
    submitted["notes"] = ["tampered: " + submitted["integrity"]["tampered"][0]]
    return evidence


def test_a_tampered_run_shows_in_red_while_the_diff_is_folded(rob, sample_packet):
    submission = make_submission(sample_packet, evidence=tampered_evidence())
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    diff, red = section(html, "diff"), section(html, "red-log")
    assert "Folded until" in diff
    for part in (diff, red):
        assert 'class="tampered" role="alert"' in part and "<code>submitted</code>" in part
    assert "planted canary tests passed" in diff  # the reasons, once, where the runs are
    assert "planted canary tests passed" not in red and "top of the diff section" in red
    assert 'data-run="submitted"' not in diff  # the runs themselves stay folded


def test_an_honest_page_has_no_tampered_banner(rob, submission):
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    assert 'class="tampered"' not in html


def test_the_unfolded_diff_keeps_the_test_apart_from_the_fix(rob, reviewer, submission):
    score(submission, reviewer, {k: v for k, v in ALL_PASS.items() if k != "test_names_bug"}, submit=False)
    diff = section(rob.get(f"/review/{submission.pk}/").content.decode(), "diff")
    test_part, fix_part = diff.split("The fix: the tree as uploaded")
    assert 'data-run="tests_vs_original"' in test_part and 'data-run="tests_vs_solution"' in test_part
    assert 'data-run="submitted"' in fix_part and 'data-run="reference_vs_submitted"' in fix_part
    assert 'data-decoys-caught="1" data-decoys-total="3"' in test_part
    assert "reject <strong>1 of the 3</strong> wrong fixes" in test_part
    assert test_part.count('data-decoy="') == 3
    assert re.search(r'data-decoy="drop-refund-rows".*?✓ rejected', test_part, re.S)
    assert re.search(r'data-decoy="abs-of-the-total".*?✗ got through', test_part, re.S)


def test_next_in_queue_also_offers_a_newer_upload_when_none_is_older(rob, reviewer, sample_packet):
    older = make_submission(sample_packet, name="First Fay")
    newer = make_submission(sample_packet, name="Second Sam")
    score(older, reviewer, ALL_PASS)
    html = rob.get(f"/review/{older.pk}/").content.decode()
    assert f'href="/review/{newer.pk}/" id="next-in-queue"' in html
    assert "Nothing else is waiting" not in html
    score(newer, reviewer, ALL_PASS)
    assert "Nothing else is waiting" in rob.get(f"/review/{newer.pk}/").content.decode()


def test_tampered_decoy_runs_claim_nothing_about_the_test(rob, reviewer, sample_packet):
    from grading.tests.reviewing import ideal_evidence

    evidence = ideal_evidence()
    decoys = evidence["runs"]["tests_vs_decoys"]
    decoys["outcome"] = "tampered"
    for d in decoys["decoys"]:
        d["outcome"], d["caught"] = "tampered", False
    submission = make_submission(sample_packet, evidence=evidence)
    score(submission, reviewer, {k: v for k, v in ALL_PASS.items() if k != "test_names_bug"}, submit=False)
    diff = section(rob.get(f"/review/{submission.pk}/").content.decode(), "diff")
    assert "tampered with: they say nothing about the test" in diff
    assert "wrong fixes." not in diff.split("tampered with")[0]
    assert diff.count("✗ tampered") == 3


def test_a_note_typed_before_pass_or_fail_is_kept_across_a_reload(rob, reviewer, submission):
    response = mark(rob, submission, "refusal_specific", note="names abs, but why?")
    assert response.status_code == 200 and b"Note kept" in response.content
    assert b"names abs, but why?</textarea>" in response.content
    assert not Mark.objects.exists()  # a draft note scores nothing
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    cell = html.split('id="cell-refusal_specific"')[1].split("</aside>")[0]
    assert "names abs, but why?</textarea>" in cell
    # Choosing fail (the form sends the note along) moves the note onto the mark.
    mark(rob, submission, "refusal_specific", False, note="names abs, but why?")
    saved = Mark.objects.get()
    assert (saved.passed, saved.note) == (False, "names abs, but why?")
    assert Review.objects.get().draft_notes == {}


def test_clearing_a_draft_note_forgets_it(rob, submission):
    mark(rob, submission, "red_log", note="first thought")
    mark(rob, submission, "red_log", note="")
    assert Review.objects.get().draft_notes == {}
    assert "first thought" not in rob.get(f"/review/{submission.pk}/").content.decode()


def test_no_draft_note_on_a_submitted_review(rob, reviewer, submission):
    score(submission, reviewer, ALL_PASS)
    response = mark(rob, submission, "red_log", note="too late")
    assert b"marks are final" in response.content
    assert Review.objects.get().draft_notes == {}


def test_submitting_asks_for_a_confirmation_that_works_without_javascript(rob, reviewer, submission):
    score(submission, reviewer, ALL_PASS, submit=False)
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    bar = html.split('id="review-submit"')[1].split("</form>")[0]
    assert 'type="checkbox" name="confirm" value="yes"' in bar and "required" in bar and "onclick" not in bar
    for headers in (HX, {}):
        response = rob.post(f"/review/{submission.pk}/submit/", headers=headers)
        assert response.status_code == 200 and b"Tick the box to confirm" in response.content
        assert Review.objects.get().submitted_at is None
    response = rob.post(f"/review/{submission.pk}/submit/", {"confirm": "yes"})
    assert response.status_code == 302 and Review.objects.get().submitted_at is not None


def test_the_refusal_is_shown_in_full_beside_a_hint_that_says_it_is_no_verdict(rob, sample_packet):
    from grading.tests.reviewing import ideal_evidence

    evidence = ideal_evidence()
    long_refusal = "Refused: drop the refund rows. " + "It changes revenue, not the sum. " * 40 + "THE END."
    evidence["texts"]["refuse.md"] = long_refusal
    evidence["refusal"] = {"present": True, "specific": True, "mentions": ["dropping rows"]}
    submission = make_submission(sample_packet, evidence=evidence)
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    section = html.split('id="section-refusal"')[1].split("</section>")[0]
    full, hint = section.split('class="refusal-full"')[1].split('id="refusal-hint"')
    assert "THE END." in full and full.count("It changes revenue, not the sum.") == 40
    assert "A hint, not a verdict" in hint and "<code>dropping rows</code>" in hint
    assert "another language" in hint


def test_an_upload_after_the_deadline_within_grace_is_marked_late(rob, sample_packet):
    from datetime import timedelta

    from django.utils import timezone

    from takehome.models import Invitation

    submission = make_submission(sample_packet)
    Invitation.objects.filter(pk=submission.invitation_id).update(
        deadline=submission.uploaded_at - timedelta(minutes=2, seconds=10),
        started_at=timezone.now() - timedelta(hours=2))
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    assert "late by 3 min, within grace" in html.split('class="pagehead"')[1].split("</div>")[0]


def test_an_upload_on_time_is_not_marked_late(rob, sample_packet):
    from datetime import timedelta

    from takehome.models import Invitation

    submission = make_submission(sample_packet)
    on_time = submission.uploaded_at + timedelta(seconds=1)
    Invitation.objects.filter(pk=submission.invitation_id).update(deadline=on_time)
    assert "within grace" not in rob.get(f"/review/{submission.pk}/").content.decode()


def test_a_hidden_name_is_a_stable_code_that_reveals_no_invitation_id(sample_packet):
    codes = [make_submission(sample_packet, f"Cand {i}").invitation for i in range(20)]
    labels = [inv.hidden_label() for inv in codes]
    assert all(re.fullmatch(r"Candidate [A-Z2-7]{6}", label) for label in labels)
    assert len(set(labels)) == len(labels)
    assert labels[0] == type(codes[0]).objects.get(pk=codes[0].pk).hidden_label()  # stable
    # Consecutive invitations get unrelated codes: no order or gap can be read from them.
    assert labels != sorted(labels)


def test_a_draft_note_arriving_after_the_choice_goes_onto_the_mark(reviewer, submission):
    from grading.actions import do_save_mark, do_save_note_draft

    do_save_mark(submission, reviewer, "red_log", True, "")
    do_save_note_draft(submission, reviewer, "red_log", "late note")
    assert Mark.objects.get().note == "late note" and Review.objects.get().draft_notes == {}


def test_the_stamp_file_is_shown_with_the_time_read_in_it(rob, sample_packet):
    from grading.tests.reviewing import ideal_evidence

    _, stamp = stamp_and_red_sections(rob.get(f"/review/{make_submission(sample_packet).pk}/").content.decode())
    assert "1796047729.8974054" in stamp  # the file as written
    assert re.search(r'Read as <time datetime="2026-11-30T14:08:49\+00:00"[^>]*>2026-11-30 14:08:49 UTC</time>\.',
                     stamp), stamp
    evidence = ideal_evidence()
    evidence["texts"]["model_allowed.at"] = "soon"
    evidence["timeline"]["events"] = [e for e in evidence["timeline"]["events"] if e["name"] != "stamp value"]
    _, stamp = stamp_and_red_sections(
        rob.get(f"/review/{make_submission(sample_packet, evidence=evidence).pk}/").content.decode())
    assert "Not a time the grader could read." in stamp and "Read as" not in stamp
    evidence["timeline"]["events"].append({"name": "stamp value", "at": "2026-11-30T15:08:49.5", "source":
                                           "model_allowed.at (candidate's local time, zone unknown)"})
    _, stamp = stamp_and_red_sections(
        rob.get(f"/review/{make_submission(sample_packet, evidence=evidence).pk}/").content.decode())
    assert "Read as 2026-11-30 15:08:49, the candidate's local time (its zone unknown)." in stamp, stamp


def test_the_hidden_tests_seed_is_shown_so_a_grading_can_be_reproduced(rob, sample_packet):
    from grading.tests.reviewing import ideal_evidence

    evidence = ideal_evidence()
    evidence["runs"]["reference_vs_submitted"].update(hidden_seed=4242, call_limit_s=2.0)
    submission = make_submission(sample_packet, evidence=evidence)
    for cell in ("red_log", "model_waited", "refusal_specific"):  # the runs unfold once these are scored
        mark(rob, submission, cell, True)
    html = rob.get(f"/review/{submission.pk}/").content.decode()
    seed = html.split('id="hidden-seed"')[1].split("</p>")[0]
    assert "seed <code>4242</code>" in seed and "each call limited to 2.0 s" in seed and "--seed 4242" in seed
