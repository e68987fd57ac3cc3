"""Writes on the reviewer's side: marks and reviews.

Every function here acts for one reviewer on that reviewer's own review; no
function takes a review or mark id from outside, so there is no way to name
(let alone change) another reviewer's marks.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from sessions_app.models import Submission

from .models import CELLS_BEFORE_DIFF, Cell, Mark, Review


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
    return mark


@transaction.atomic
def do_submit_review(submission: Submission, reviewer) -> Review:
    """Make `reviewer`'s review final; from then on they see the other reviewers' marks."""
    review = Review.objects.select_for_update().filter(submission=submission, reviewer=reviewer).first()
    if review is None:
        raise ReviewError("Score the four cells before submitting.")
    if review.is_submitted:
        return review
    missing = [Cell(c).label for c in Cell.values if c not in scored_cells(review)]
    if missing:
        raise ReviewError("Still to score: " + ", ".join(missing) + ".")
    review.submitted_at = timezone.now()
    review.save(update_fields=["submitted_at"])
    return review
