"""Writes on the reviewer's side: marks and reviews.

Every function here acts for one reviewer on that reviewer's own review; no
function takes a review or mark id from outside, so there is no way to name
(let alone change) another reviewer's marks.
"""

from __future__ import annotations

from django.apps import apps as django_apps
from django.db import connections, transaction
from django.utils import timezone

from sessions_app.models import Submission
from takehome import funnel
from takehome.models import Invitation

from .engine.agreement import Table, pair_tables
from .models import CELLS_BEFORE_DIFF, AgreementTally, Cell, Mark, Review
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
def do_save_mark(submission: Submission, reviewer, cell: str, passed: bool, note: str = "") -> Mark:
    """Record `reviewer`'s pass/fail (and note) for one cell of their own review.

    Creates the draft review on the first mark. Refuses a submitted review
    (final), a cell the diff hides while it is folded, and an unknown cell.
    """
    if cell not in Cell.values:
        raise ReviewError("No such rubric cell.")
    # why select_for_update: two quick clicks must not create two reviews or race on "submitted".
    review, _ = Review.objects.select_for_update().get_or_create(submission=submission, reviewer=reviewer)
    if review.is_submitted:
        raise ReviewError("Your review is submitted; its marks are final.")
    if cell == Cell.TEST_NAMES_BUG and not diff_unfolded(scored_cells(review)):
        # why: the article's reading order; the diff must not colour the first three cells.
        raise ReviewError("Score the red log, the stamp and the refusal first; the diff is folded until then.")
    mark, _ = Mark.objects.update_or_create(
        review=review, cell=cell, defaults={"passed": passed, "note": note, "updated_at": timezone.now()}
    )
    if cell in review.draft_notes:
        # The note now lives on the mark; the draft would only shadow it.
        review.draft_notes.pop(cell)
        review.save(update_fields=["draft_notes"])
    return mark


@transaction.atomic
def do_save_note_draft(submission: Submission, reviewer, cell: str, note: str) -> Review:
    """Keep a note typed on a cell before pass or fail was chosen, so a reload does not lose it.

    The draft is not a mark: it scores nothing, counts for nothing, and is
    moved onto the mark when the reviewer chooses pass or fail.
    """
    if cell not in Cell.values:
        raise ReviewError("No such rubric cell.")
    review, _ = Review.objects.select_for_update().get_or_create(submission=submission, reviewer=reviewer)
    if review.is_submitted:
        raise ReviewError("Your review is submitted; its marks are final.")
    if Mark.objects.filter(review=review, cell=cell).update(note=note, updated_at=timezone.now()):
        # why: a choice saved meanwhile (a click racing the note's own save) owns the note now.
        return review
    if note:
        review.draft_notes[cell] = note
    else:
        review.draft_notes.pop(cell, None)
    review.save(update_fields=["draft_notes"])
    return review


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
