"""Writes on the reviewer's side: marks and reviews, and who is assigned to review what.

Every function that marks acts for one reviewer on that reviewer's own
review; no function takes a review or mark id from outside, so there is no
way to name (let alone change) another reviewer's marks. Assignments are
made by the server when grading ends (spread by load) and changed by a
recruiter (reassign), each change in the audit trail.
"""

from __future__ import annotations

from typing import Literal

from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.db import connections, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, Value
from django.db.models.functions import Least
from django.utils import timezone

from sessions_app.models import Submission
from shared.access import REVIEWER_GROUP
from takehome import funnel
from takehome.audit import record
from takehome.models import Invitation

from .engine import diffview, display
from .engine.agreement import Table, pair_tables
from .models import CELLS_BEFORE_DIFF, AgreementTally, Assignment, Cell, Evidence, LineComment, Mark, Review
from .signals import review_submitted

TALLY_COUNTS = ("both_pass", "a_pass_b_fail", "a_fail_b_pass", "both_fail")  # Table's fields, in its order


class ReviewError(Exception):
    """A reviewer's write that cannot be done; the message says why, for the page."""


def scored_cells(review: Review | None) -> set[str]:
    if review is None:
        return set()
    return {m.cell for m in review.marks.all()}


def diff_unfolded(cells: set[str]) -> bool:
    """The diff is shown once the three cells read before it are scored."""
    return all(c in cells for c in CELLS_BEFORE_DIFF)


@transaction.atomic
def do_save_mark(submission: Submission, reviewer, cell: str, passed: bool, note: str = "",
                 stamp: int | None = None) -> Mark:
    """Record `reviewer`'s pass/fail (and note) for one cell of their own review.

    Creates the draft review on the first mark. Refuses a submitted review
    (final), a cell the diff hides while it is folded, and an unknown cell.
    ``stamp``: when the note was typed (Review.take_note_stamp); a note typed
    before the one kept is not taken, but the choice still is.
    """
    if cell not in Cell.values:
        raise ReviewError("No such rubric cell.")
    # why select_for_update: two quick clicks must not create two reviews or race on "submitted";
    # and the note's stamp is read and written under the same lock (on SQLite, the IMMEDIATE transaction).
    review, _ = Review.objects.select_for_update().get_or_create(submission=submission, reviewer=reviewer)
    if review.is_submitted:
        raise ReviewError("Your review is submitted; its marks are final.")
    if cell == Cell.TEST_NAMES_BUG and not diff_unfolded(scored_cells(review)):
        # why: the article's reading order; the diff must not colour the first three cells.
        raise ReviewError("Score the red log, the stamp and the refusal first; the diff is folded until then.")
    if not review.take_note_stamp(cell, stamp):
        # why: the note kept (on the mark, or as the draft) was typed after this one.
        kept = Mark.objects.filter(review=review, cell=cell).values_list("note", flat=True).first()
        note = review.draft_notes.get(cell, "") if kept is None else kept
    mark, _ = Mark.objects.update_or_create(
        review=review, cell=cell, defaults={"passed": passed, "note": note, "updated_at": timezone.now()}
    )
    # The note now lives on the mark; a draft would only shadow it.
    review.draft_notes.pop(cell, None)
    review.save(update_fields=["draft_notes", "note_stamps"])
    return mark


NoteKept = Literal["draft", "mark", "older"]


@transaction.atomic
def do_save_note_draft(submission: Submission, reviewer, cell: str, note: str,
                       stamp: int | None = None) -> NoteKept:
    """Keep a note typed on a cell without a choice of pass or fail: on the cell's mark, or (no mark yet) as a
    draft, so a reload does not lose it. Returns where it went, or "older" when it was not kept.

    A draft is not a mark: it scores nothing, counts for nothing, and is
    moved onto the mark when the reviewer chooses pass or fail. On a mark
    only the note changes, never the choice. ``stamp``: when the note was
    typed (Review.take_note_stamp); a note typed before the one kept is
    refused ("older"), whatever order the saves arrived in.
    """
    if cell not in Cell.values:
        raise ReviewError("No such rubric cell.")
    # why the row lock: the draft notes are one JSON value rewritten whole, and the stamps are read then
    # written; saves of two cells at once queue here (on SQLite, at the IMMEDIATE transaction's start).
    review, _ = Review.objects.select_for_update().get_or_create(submission=submission, reviewer=reviewer)
    if review.is_submitted:
        raise ReviewError("Your review is submitted; its marks are final.")
    if not review.take_note_stamp(cell, stamp):
        return "older"
    if Mark.objects.filter(review=review, cell=cell).update(note=note, updated_at=timezone.now()):
        # why: a choice saved meanwhile (a click racing the note's own save) owns the note now.
        review.save(update_fields=["note_stamps"])
        return "mark"
    if note:
        review.draft_notes[cell] = note
    else:
        review.draft_notes.pop(cell, None)
    review.save(update_fields=["draft_notes", "note_stamps"])
    return "draft"


MAX_COMMENT_CHARS = 2000


def diff_file(submission: Submission, path: str) -> dict | None:
    """The evidence's diff of one file (as stored, cleaned for display), or None when the diff has no such file."""
    data = Evidence.objects.filter(submission=submission).values_list("data", flat=True).first() or {}
    for f in (data.get("diff") or {}).get("files") or []:
        if isinstance(f, dict) and f.get("path") == path:
            return display.clean_tree(f)
    return None


@transaction.atomic
def do_save_line_comment(submission: Submission, reviewer, path: str, anchor: str, body: str) -> LineComment | None:
    """Keep ``reviewer``'s comment on one line of the diff (``anchor``: ``old:N`` or ``new:N``) with their review.

    An empty body removes the comment (None). Refused: a submitted review
    (final), the diff still folded, a file or line the diff does not have,
    or a body over MAX_COMMENT_CHARS.
    """
    body = (body or "").strip()
    if len(body) > MAX_COMMENT_CHARS:
        raise ReviewError(f"A comment is at most {MAX_COMMENT_CHARS} characters.")
    where = diffview.parse_anchor(anchor)
    found = diff_file(submission, path)
    # why from the stored evidence: the line and its text are the grader's, whatever the browser sent
    line = diffview.find_line(diffview.parse_unified(found.get("diff") or ""), anchor) if found and where else None
    if where is None or line is None:
        raise ReviewError("The diff has no such line.")
    review, _ = Review.objects.select_for_update().get_or_create(submission=submission, reviewer=reviewer)
    if review.is_submitted:
        raise ReviewError("Your review is submitted; its comments are final.")
    if not diff_unfolded(scored_cells(review)):
        raise ReviewError("Score the red log, the stamp and the refusal first; the diff is folded until then.")
    side, number = where
    if not body:
        LineComment.objects.filter(review=review, path=path, side=side, line=number).delete()
        return None
    comment, _ = LineComment.objects.update_or_create(
        review=review, path=path, side=side, line=number,
        defaults={"body": body, "snippet": line.text[:500], "updated_at": timezone.now()},
    )
    return comment


@transaction.atomic
def do_submit_review(submission: Submission, reviewer, confirmed: bool = True) -> Review:
    """Make `reviewer`'s review final; from then on they see the other reviewers' marks.

    ``confirmed``: the reviewer said they mean it (the page asks, since a
    submitted review cannot be changed).

    In the same transaction, the pairs it makes with the upload's other
    submitted reviews are added to the agreement tally.
    """
    # why every review of the upload locked, in id order: two reviewers submitting at once
    # queue here, so the second one sees the first one's review and their pair counts once.
    list(Review.objects.select_for_update().filter(submission=submission).order_by("pk").values_list("pk"))
    review = Review.objects.filter(submission=submission, reviewer=reviewer).prefetch_related("marks").first()
    if review is None:
        raise ReviewError("Score the four cells before submitting.")
    if review.is_submitted:
        return review
    scored = scored_cells(review)
    # why the version's cells: the reviewer reads the packet's wording beside each cell, not the defaults.
    version = submission.invitation.packet_version
    missing = [c.label for c in version.rubric_cells() if c.key not in scored]
    if missing:
        raise ReviewError("Still to score: " + ", ".join(missing) + ".")
    if not confirmed:
        raise ReviewError("Tick the box to confirm: once submitted, your marks are final.")
    review.submitted_at = timezone.now()
    review.save(update_fields=["submitted_at"])
    _tally_review(review)
    funnel.touch(submission.invitation_id)
    review_submitted.send(sender=Review, review_id=review.pk)
    return review


def _tally_review(review: Review) -> None:
    """Add the pairs a just-submitted review makes with the upload's other submitted reviews."""
    others = (
        Mark.objects.filter(review__submission_id=review.submission_id, review__submitted_at__isnull=False)
        .exclude(review_id=review.pk)
        .values_list("review__reviewer_id", "cell", "passed")
    )
    tables = pair_tables(review.reviewer_id, {m.cell: m.passed for m in review.marks.all()}, others)
    if not tables:
        return
    packet_id = (Invitation.objects.filter(pk=review.submission.invitation_id)
                 .values_list("packet_version__packet_id", flat=True).get())
    _add_to_tally(packet_id, tables)


def _add_to_tally(packet_id: int, tables: dict[tuple[int, int, str], Table]) -> None:
    """Add each (reviewer_a, reviewer_b, cell) table to its tally row, creating the rows missing."""
    table = AgreementTally._meta.db_table
    keys = ("packet_id", "reviewer_a_id", "reviewer_b_id", "cell")
    sums = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in TALLY_COUNTS)
    rows = ", ".join(["(" + ", ".join(["%s"] * (len(keys) + len(TALLY_COUNTS))) + ")"] * len(tables))
    # why one upsert (the same SQL on SQLite and PostgreSQL): two reviews of different uploads
    # by the same pair, submitted at once, must both land even when the row does not exist yet.
    sql = (f"INSERT INTO {table} ({', '.join(keys + TALLY_COUNTS)}) VALUES {rows} "
           f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sums}")
    params = []
    for (a, b, cell), counts in tables.items():
        params += [packet_id, a, b, cell, *(getattr(counts, c) for c in TALLY_COUNTS)]
    with connections[AgreementTally.objects.db].cursor() as cursor:
        cursor.execute(sql, params)


def do_rebuild_agreement(apps=django_apps, using: str = "default") -> int:
    """Refill the agreement tally from every pair of submitted reviews of the same upload; returns its rows.

    The migration that adds the tally runs it (with the historical models), and
    `manage.py rebuild_agreement` runs it on demand. One grouped join in the
    database, whatever the number of marks.
    """
    names = {label: apps.get_model(*label.split("."))._meta.db_table for label in (
        "grading.AgreementTally", "grading.Mark", "grading.Review", "sessions_app.Submission",
        "takehome.Invitation", "takehome.PacketVersion")}
    tally = names["grading.AgreementTally"]
    count = "SUM(CASE WHEN {} THEN 1 ELSE 0 END)"
    sql = f"""
        INSERT INTO {tally} (packet_id, reviewer_a_id, reviewer_b_id, cell, {', '.join(TALLY_COUNTS)})
        SELECT v.packet_id, r1.reviewer_id, r2.reviewer_id, m1.cell,
               {count.format("m1.passed AND m2.passed")}, {count.format("m1.passed AND NOT m2.passed")},
               {count.format("NOT m1.passed AND m2.passed")}, {count.format("NOT m1.passed AND NOT m2.passed")}
        FROM {names["grading.Mark"]} m1
        JOIN {names["grading.Review"]} r1 ON r1.id = m1.review_id
        JOIN {names["grading.Review"]} r2 ON r2.submission_id = r1.submission_id AND r2.reviewer_id > r1.reviewer_id
        JOIN {names["grading.Mark"]} m2 ON m2.review_id = r2.id AND m2.cell = m1.cell
        JOIN {names["sessions_app.Submission"]} s ON s.id = r1.submission_id
        JOIN {names["takehome.Invitation"]} i ON i.id = s.invitation_id
        JOIN {names["takehome.PacketVersion"]} v ON v.id = i.packet_version_id
        WHERE r1.submitted_at IS NOT NULL AND r2.submitted_at IS NOT NULL
        GROUP BY v.packet_id, r1.reviewer_id, r2.reviewer_id, m1.cell
    """
    connection = connections[using]
    with transaction.atomic(using=using), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # why: a review submitted during the rebuild waits for it, then adds its pairs once.
            cursor.execute(f"LOCK TABLE {tally} IN EXCLUSIVE MODE")
        cursor.execute(f"DELETE FROM {tally}")
        cursor.execute(sql)
        return cursor.rowcount


# --- assignments ---------------------------------------------------------------------------


class AssignmentError(Exception):
    """A reassignment that cannot be done; the message says why, for the page."""


def eligible_reviewers():
    """The people a submission may be assigned to: active accounts in the reviewer group.

    why the group itself, not in_group(): a superuser passes every group check but did not sign up to
    review; and every reviewer may read every packet's submissions (shared.access), so no packet narrows it.
    """
    return get_user_model().objects.filter(is_active=True, groups__name=REVIEWER_GROUP).distinct()


def open_assignments():
    """Assignments still to be done: the upload under review, not yet reviewed (submitted) by its reviewer."""
    done = Review.objects.filter(submission=OuterRef("submission"), reviewer=OuterRef("reviewer"),
                                 submitted_at__isnull=False)
    return Assignment.objects.filter(submission__is_latest=True).exclude(Exists(done))


def loads(reviewer_ids) -> dict[int, int]:
    """Each reviewer's count of open assignments (0 for none)."""
    counted = dict(open_assignments().filter(reviewer_id__in=list(reviewer_ids))
                   .values("reviewer_id").annotate(n=Count("pk")).values_list("reviewer_id", "n"))
    return {pk: counted.get(pk, 0) for pk in reviewer_ids}


@transaction.atomic
def do_assign_reviewers(submission_id: int) -> list[Assignment]:
    """Give a graded upload under review the reviewers its packet asks for, fewest open assignments first.

    A reviewer is never assigned twice to one submission; ties go to the
    reviewer with the lower id, so the spread is the same every time. Fewer
    eligible reviewers than asked for: as many as there are (the sweep adds
    the rest when more join). Returns the assignments made.
    """
    # why the row lock: the worker that graded it and the sweep may both arrive; the second one waits,
    # then counts the first one's assignments
    submission = (Submission.objects.select_for_update().select_related("invitation__packet_version__packet")
                  .filter(pk=submission_id).first())
    if submission is None or submission.status != Submission.Status.GRADED or not submission.is_latest:
        return []
    found = Assignment.objects.filter(submission=submission).values_list("reviewer_id", "reviewer__is_active")
    assigned = {pk for pk, _ in found}
    # why only active ones count: a reviewer deactivated with reviews still open will never do them
    wanted = submission.invitation.packet_version.packet.reviewers_per_submission - sum(
        1 for _, active in found if active)
    if wanted <= 0:
        return []
    free = list(eligible_reviewers().exclude(pk__in=assigned).values_list("pk", flat=True))
    load = loads(free)
    chosen = sorted(free, key=lambda pk: (load[pk], pk))[:wanted]
    return [Assignment.objects.create(submission=submission, reviewer_id=pk) for pk in chosen]


def assign_waiting(limit: int = 500) -> int:
    """Assign the graded uploads under review still short of reviewers (the sweep); returns how many were made.

    Short: fewer assignments to active reviewers than the packet asks and
    than there are reviewers, so a packet asking for more reviewers than the
    team has is not looked at again at every sweep; an upload whose reviewer
    was deactivated before reviewing it is given someone else.
    """
    team = eligible_reviewers().count()
    if not team:
        return 0
    short = (Submission.objects.filter(status=Submission.Status.GRADED, is_latest=True)
             .annotate(n=Count("assignments", filter=Q(assignments__reviewer__is_active=True)))
             .filter(n__lt=Least(F("invitation__packet_version__packet__reviewers_per_submission"), Value(team)))
             .order_by("pk").values_list("pk", flat=True)[:limit])
    return sum(len(do_assign_reviewers(pk)) for pk in list(short))


@transaction.atomic
def do_reassign_reviewer(submission: Submission, old, new, actor) -> Assignment:
    """Give ``old``'s assignment of ``submission`` to ``new`` (``old`` None: add ``new`` as one more reviewer).

    Refused: ``old`` not assigned, or already submitted their review (it
    stays theirs); ``new`` not an active reviewer, or assigned already.
    Written to the audit trail, with who made the change.
    """
    Submission.objects.select_for_update().filter(pk=submission.pk).first()
    if new is None or not eligible_reviewers().filter(pk=new.pk).exists():
        raise AssignmentError("Choose an active reviewer to give the review to.")
    if Assignment.objects.filter(submission=submission, reviewer=new).exists():
        raise AssignmentError(f"{new.get_username()} is assigned to this submission already.")
    if old is not None:
        current = Assignment.objects.filter(submission=submission, reviewer=old).first()
        if current is None:
            raise AssignmentError(f"{old.get_username()} is not assigned to this submission.")
        if Review.objects.filter(submission=submission, reviewer=old, submitted_at__isnull=False).exists():
            raise AssignmentError(f"{old.get_username()} has submitted their review; it stays theirs.")
        current.delete()
    assignment = Assignment.objects.create(submission=submission, reviewer=new, assigned_by=actor)
    detail = (f"{old.get_username()} -> {new.get_username()}" if old is not None
              else f"added {new.get_username()}")
    record(actor, "reassign", submission, detail)
    return assignment
