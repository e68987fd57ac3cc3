"""The read side of the reviewer's desk: what the queue, the review page and the debrief show.

Views stay HTTP-only and call these. Every function takes the viewing
reviewer, because what a reviewer may see depends on who they are: another
reviewer's marks appear only once the viewer's own review of that submission
is submitted (blind double review).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from sessions_app.models import GateReceipt, Submission
from shared import stored
from shared.paging import beyond
from takehome import funnel
from takehome.models import Candidate, Decision, Invitation, Packet

from . import similarity
from .actions import TALLY_COUNTS, diff_unfolded, eligible_reviewers, loads, open_assignments
from .engine import diffview, display, replay, rubric
from .engine.agreement import PairAgreement, Table
from .models import AgreementTally, Evidence, LineComment, Mark, Review, clock_ms


def candidate_label(invitation: Invitation, packet: Packet, reader: bool = False) -> str:
    """The candidate's name, or a short code that reveals nothing when the packet hides names from reviewers
    (not from a recruiter reading)."""
    if packet.hide_candidate_names and not reader:
        return invitation.hidden_label()
    return display.clean_terminal_text(invitation.candidate.name)


# --- the queue ---------------------------------------------------------------------------


def queue(reviewer, packet_slug: str = "", todo: bool = True, but_mine: bool = False) -> QuerySet:
    """Ids of the latest submission of each invitation, newest first; `todo`: not yet submitted by the viewer;
    `but_mine`: without those in the viewer's own queue (``my_queue``), which the page lists first.

    Only ids, from the submission table alone: a page is then an index walk
    down ``uploaded_at`` (see shared.paging), each row's packet and review
    looked up by key, and the page's 50 rows are loaded whole by
    ``load_queue_page``.
    """
    qs = _in_packet(Submission.objects.latest_per_invitation().order_by("-uploaded_at", "-pk"), packet_slug)
    if todo:
        qs = qs.exclude(
            Exists(Review.objects.filter(submission=OuterRef("pk"), reviewer=reviewer, submitted_at__isnull=False))
        )
    if but_mine:
        qs = qs.exclude(Exists(open_assignments().filter(submission=OuterRef("pk"), reviewer=reviewer)))
    return qs.values_list("pk", flat=True)


def _in_packet(qs: QuerySet, packet_slug: str) -> QuerySet:
    if not packet_slug:
        return qs
    # why EXISTS, not IN: an IN list makes the database gather the packet's every upload
    # and sort them; a lookup per row lets it walk the queue's order and stop after one page.
    return qs.filter(Exists(
        Invitation.objects.filter(pk=OuterRef("invitation_id"), packet_version__packet__slug=packet_slug)))


def my_queue(reviewer, packet_slug: str = "") -> QuerySet:
    """Ids of the submissions assigned to the viewer that wait for their review, oldest upload first.

    Open assignments only (grading.actions.open_assignments): the upload under
    review, not yet reviewed by them. Oldest first: the longest waiting is read first.
    """
    # why IN from the reviewer's assignments: they are few, and found by the (reviewer, submission) index;
    # an EXISTS per submission would walk every upload stored
    qs = Submission.objects.filter(pk__in=open_assignments().filter(reviewer=reviewer).values("submission_id"))
    return _in_packet(qs, packet_slug).order_by("uploaded_at", "pk").values_list("pk", flat=True)


def load_queue_page(ids: list[int]) -> list[Submission]:
    """The submissions behind one page of queue ids, in the queue's order."""
    # why only the fields drawn: the packet version's prompt and JSON (and the evidence's data)
    # would otherwise be read and decoded once per row; the queue shows the evidence's tampered flag.
    found = Submission.objects.select_related(
        "invitation__candidate", "invitation__packet_version__packet", "evidence"
    ).only(
        "invitation_id", "uploaded_at", "status", "is_latest", "reject_reason", "at_deadline", "earlier_submit_at",
        "invitation__candidate__name",
        "invitation__started_at", "invitation__deadline", "invitation__packet_version__number",
        "invitation__packet_version__packet__title", "invitation__packet_version__packet__hide_candidate_names",
        "evidence__tampered",
    ).in_bulk(ids)
    return [found[pk] for pk in ids if pk in found]


def _tampered(submission: Submission) -> bool:
    try:
        return submission.evidence.tampered
    except Evidence.DoesNotExist:
        return False


@dataclass
class QueueRow:
    submission: Submission
    candidate: str
    mine: str  # "submitted", "draft" or ""
    reviews_submitted: int
    phase: str  # the candidate's clock: "running", "grace" (uploads still open) or "closed" (final work)
    closes_at: datetime | None  # when uploads close: the deadline plus grace
    earlier_reviews: int = 0  # submitted reviews of this candidate's other uploads
    mine_earlier: bool = False  # the viewer submitted one of those
    tampered: bool = False  # a rerun's verdicts were changed from inside

    @property
    def none_accepted(self) -> bool:
        """The row holds a refused upload: the flag falls on one only when no upload of the candidate's
        was accepted (SubmissionQuerySet.settle_latest)."""
        return self.submission.status in Submission.REFUSED


def queue_rows(submissions: list[Submission], reviewer) -> list[QueueRow]:
    """One page of the queue: the viewer's review state, the submitted reviews, and the candidate's clock.

    One query for the reviews, whatever the page's length: those of these
    uploads, and the submitted ones of the same candidates' other uploads (a
    review stays with the upload it scored; the queue says it exists).
    """
    mine: dict[int, str] = {}
    submitted: dict[int, int] = defaultdict(int)
    earlier: dict[int, int] = defaultdict(int)
    mine_earlier: set[int] = set()
    ids = {s.pk for s in submissions}
    found = Review.objects.filter(
        submission__invitation_id__in={s.invitation_id for s in submissions}
    ).values_list("submission_id", "submission__invitation_id", "reviewer_id", "submitted_at")
    for submission_id, invitation_id, reviewer_id, submitted_at in found:
        if submission_id not in ids:
            if submitted_at is not None:
                earlier[invitation_id] += 1
                if reviewer_id == reviewer.pk:
                    mine_earlier.add(invitation_id)
            continue
        if submitted_at is not None:
            submitted[submission_id] += 1
        if reviewer_id == reviewer.pk:
            mine[submission_id] = "submitted" if submitted_at else "draft"
    now = timezone.now()
    return [
        QueueRow(
            s, candidate_label(s.invitation, s.invitation.packet), mine.get(s.pk, ""), submitted[s.pk],
            phase=s.invitation.phase_at(now), closes_at=s.invitation.upload_closes_at,
            earlier_reviews=earlier[s.invitation_id], mine_earlier=s.invitation_id in mine_earlier,
            tampered=_tampered(s),
        )
        for s in submissions
    ]


def next_in_queue(submission: Submission, reviewer) -> int | None:
    """The id of the next submission the reviewer has not yet submitted a review for.

    First the oldest in the reviewer's own queue (assigned to them, my_queue);
    then the next older one in the queue's order; when none is older, the
    newest one left (an upload that arrived while this one was read), so that
    "nothing else is waiting" is only said when it is true. Both are index
    walks that stop at the first row found, from this row and from the top.
    """
    mine = my_queue(reviewer).exclude(pk=submission.pk).first()
    if mine is not None:
        return mine
    todo = queue(reviewer, todo=True)
    older = beyond(todo, "uploaded_at", submission.uploaded_at, submission.pk, lower=True).first()
    return older if older is not None else todo.exclude(pk=submission.pk).first()


# --- the review page ---------------------------------------------------------------------


@dataclass
class CellView:
    """One rubric cell as the page draws it."""

    key: str
    section: str
    label: str
    definition: str = ""  # what passes and what fails the cell, in the packet's words
    number: int = 0
    mark: Mark | None = None
    draft_note: str = ""  # a note kept before pass or fail was chosen
    note_stamp: int = 0  # when the note shown (the mark's or the draft) was typed; 0: not known
    locked: bool = False  # the viewer's review is submitted
    folded: bool = False  # the diff cell while the three cells above are unscored
    error: str = ""
    notice: str = ""
    others: list = field(default_factory=list)  # [(reviewer name, Mark)] once the viewer has submitted


def load_submission(pk: int) -> Submission:
    # why the similarity profile: the review page says whether similar submissions were looked for
    return Submission.objects.select_related(
        "invitation__candidate", "invitation__packet_version__packet", "similarity_profile"
    ).get(pk=pk)


def review_state(submission: Submission, reviewer, reader: bool = False) -> dict:
    """The viewer's review, its cells, and (once submitted) the other reviewers' marks.

    ``reader``: a recruiter reading (shared.access.reads_only), who has no
    review of their own and marks nothing: every submitted review's marks are
    shown, the diff unfolded, no form.
    """
    review = None if reader else (
        Review.objects.filter(submission=submission, reviewer=reviewer).prefetch_related("marks", "comments").first()
    )
    marks = {m.cell: m for m in review.marks.all()} if review else {}
    locked = reader or bool(review and review.is_submitted)
    drafts = review.draft_notes if review else {}
    stamps = review.note_stamps if review else {}
    cells = {}
    for c in submission.invitation.packet_version.rubric_cells():
        cells[c.key] = CellView(
            key=c.key, section=c.section, label=c.label, definition=c.definition, number=c.number,
            mark=marks.get(c.key), locked=locked, draft_note=drafts.get(c.key, "") if not locked else "",
            note_stamp=stamps.get(c.key, 0),
        )
    unfolded = reader or diff_unfolded(set(marks))
    cells[rubric.TEST_NAMES_BUG.key].folded = not unfolded
    if locked:
        # why only now: a reviewer who has not committed to their own marks must not see anyone else's.
        others = (
            Mark.objects.filter(review__submission=submission, review__submitted_at__isnull=False)
            .exclude(review__reviewer=reviewer)
            .select_related("review__reviewer")
            .order_by("review__reviewer__username")
        )
        for mark in others:
            cells[mark.cell].others.append((mark.review.reviewer.get_username(), mark))
    return {
        "review": review,
        "cells": cells,
        "unfolded": unfolded,
        "complete": len(marks) == len(rubric.KEYS),
        "locked": locked,
        "reader": reader,
        # why: the page counts its note stamps on the server's clock (static/grading/review.js)
        "clock_ms": clock_ms(),
    }


def similar_section(submission: Submission, state: dict) -> dict:
    """The similar submissions, for a viewer whose four cells are marked (or who reads, or has submitted).

    why only then: a reviewer told that two uploads share an answer before marking would mark the
    copy, not the evidence; once the cells are marked it is news for the debrief, not a bias.
    """
    shown = state["reader"] or state["complete"] or state["locked"]
    computed = shown and similarity.computed(submission)
    reader = state["reader"]
    return {
        "similar_shown": shown,
        "similar": similarity.similar_for(
            [submission.pk], lambda inv, packet: candidate_label(inv, packet, reader)).get(submission.pk, [])
        if computed else [],
        "similar_computed": computed,
    }


def upload_history(submission: Submission) -> list[Submission]:
    """Every upload of the same candidate, newest first, each with its count of submitted reviews (one query).

    The page lists them above the evidence: the upload under review, the
    refused ones with their reason, the superseded ones, and the reviews each
    older upload kept.
    """
    return list(
        Submission.objects.filter(invitation_id=submission.invitation_id)
        .annotate(reviews_submitted=Count("reviews", filter=Q(reviews__submitted_at__isnull=False)))
        .order_by("-uploaded_at", "-pk")
    )


def review_page(submission: Submission, reviewer, reader: bool = False,
                open_at: tuple[str, str, str] = ("", "", "")) -> dict:
    """Everything the review page draws, in the fixed order of its sections (``reader``: see review_state;
    ``open_at``: the diff line whose comment form is open, see diff_views)."""
    packet = submission.invitation.packet
    uploads = upload_history(submission)
    evidence = Evidence.objects.filter(submission=submission).first()
    raw = evidence.data if evidence else {}
    # why: every string in the evidence came from the candidate's zip; control
    # characters go before the template escapes the rest.
    data = display.clean_tree(raw)
    texts = data.get("texts") or {}
    timeline = data.get("timeline") or {}
    state = review_state(submission, reviewer, reader)
    if isinstance(timeline.get("receipts"), list):
        receipts = display.receipt_rows(timeline["receipts"])
    else:
        # Evidence from before receipts were part of it: the rows as stored, without comparisons.
        receipts = display.receipt_rows(_receipt_dicts(
            GateReceipt.objects.filter(invitation_id=submission.invitation_id).order_by("received_at", "pk")))
    runs = data.get("runs") or {}
    model = data.get("model")  # None: graded before the model window was part of the evidence
    exchanges = (model or {}).get("exchanges") or []
    receipts = display.with_witness(receipts, exchanges)
    # why every upload receipt at once: the refused ones are listed above the evidence, and the others
    # say whether the upload they received was accepted.
    upload_receipts = list(GateReceipt.objects.filter(
        invitation_id=submission.invitation_id, step=GateReceipt.Step.UPLOAD).order_by("received_at", "pk"))
    receipts = with_upload_verdicts(receipts, upload_receipts, uploads)
    version = submission.invitation.packet_version
    session = session_replay(submission)
    marks = session.recording.marker_events() if session and session.recording else []
    drawn = display.layout_timeline([*(timeline.get("events") or []), *display.exchange_events(exchanges), *marks],
                                    timeline.get("problems") or [])
    return {
        **state,
        **similar_section(submission, state),
        "submission": submission,
        "packet": packet,
        "version": submission.invitation.packet_version,
        "candidate": candidate_label(submission.invitation, packet, reader),
        "uploads": uploads,
        "under_review": next((u for u in uploads if u.is_latest), None),
        "evidence": data,
        "has_evidence": evidence is not None,
        "red_log_text": display.clean_terminal_text(texts.get("red.log")),
        "red_log_had_codes": display.had_terminal_codes((raw.get("texts") or {}).get("red.log")),
        "red_receipts": [r for r in receipts if r.get("step") == GateReceipt.Step.RED],
        "receipts": receipts,
        # why from the database, not the evidence: an upload refused after this one (at the deadline) is news too
        "refused_uploads": [r for r in upload_receipts if not r.accepted],
        # why per step: a hosted-only version's steps must be the server's own captures
        "witnesses": display.step_witnesses(
            [r for r in receipts if r.get("step") != "upload"], exchanges,
            model_step=(model or {}).get("policy") != "none", work_mode=version.work_mode),
        "gate_log": display.gate_log_rows(timeline.get("gate_log")),  # None: graded before the log was read
        "timeline": drawn,
        "no_times": display.no_times_words(
            archive_accepted=(data.get("archive") or {}).get("accepted", True) is not False,
            receipts=len(receipts), receipts_known=timeline.get("receipts_known") is not False,
            undated=len(drawn["undated"])),
        "replay": session,
        "model": model,
        "exchanges": display.exchange_rows(exchanges),
        "model_comparisons": display.comparison_rows(model),
        "texts": texts,
        "stamp_read": display.stamp_read(timeline.get("events")),
        "diff_files": diff_views(display.order_files((data.get("diff") or {}).get("files") or []),
                                 *comments_seen(submission, reviewer, state["review"], state["locked"], reader),
                                 open_at=open_at),
        "can_comment": not state["locked"] and state["unfolded"],
        "test_runs": [(name, runs[name]) for name in display.TEST_RUNS if name in runs],
        "fix_runs": [(name, runs[name]) for name in display.FIX_RUNS if name in runs],
        "decoys": runs.get("tests_vs_decoys"),
        "tampered": display.tampered_runs(runs),
        "next": None if reader else next_in_queue(submission, reviewer),
        "cells_before_diff": [state["cells"][key].label for key in rubric.BEFORE_DIFF],
    }


@dataclass(frozen=True)
class AssignedReviewer:
    """One reviewer assigned to a submission, as its review page lists them."""

    pk: int
    name: str
    state: str  # "submitted", "draft" or "" (not started)
    by: str  # who assigned them: "" for the server (by load), else the recruiter's name


def assigned_reviewers(submission: Submission) -> list[AssignedReviewer]:
    """The reviewers assigned to the submission, in the order they were assigned, each with their review's state."""
    theirs = Review.objects.filter(submission=OuterRef("submission"), reviewer=OuterRef("reviewer"))
    found = (submission.assignments.select_related("reviewer", "assigned_by")
             .annotate(started=Exists(theirs), submitted=Exists(theirs.filter(submitted_at__isnull=False))))
    return [AssignedReviewer(a.reviewer_id, a.reviewer.get_username(),
                             "submitted" if a.submitted else "draft" if a.started else "",
                             a.assigned_by.get_username() if a.assigned_by else "")
            for a in found]


def reassign_choices(assigned: list[AssignedReviewer]) -> list[tuple[int, str]]:
    """The reviewers a recruiter may give the review to (not assigned yet), each named with their open load."""
    taken = {a.pk for a in assigned}
    people = list(eligible_reviewers().exclude(pk__in=taken).order_by("username"))
    load = loads([p.pk for p in people])
    return [(p.pk, f"{p.get_username()} ({load[p.pk]} open)") for p in people]


@dataclass
class LineView:
    """A diff line as the page draws it, with the comments on it the viewer may see."""

    line: diffview.DiffLine
    mine: LineComment | None = None
    others: list = field(default_factory=list)  # [(reviewer name, LineComment)], blind until the viewer submits

    @property
    def dom_id(self) -> str:
        return self.line.anchor.replace(":", "-")


@dataclass
class FileView:
    """One changed file of the diff: its lines, unified and side by side, each with its comments."""

    index: int
    path: str
    status: str
    is_test: bool
    binary: bool
    text: str  # the stored diff, drawn as it is when it holds no hunk (a file too large, "only line endings")
    lines: list[LineView]
    split: list[tuple[LineView | None, LineView | None, str]]
    open_anchor: str = ""  # the line whose comment form is open
    open_view: str = "unified"  # in which of the two tables


def comments_seen(submission: Submission, reviewer, review: Review | None, locked: bool, reader: bool):
    """The viewer's own comments by (path, anchor), and the others' they may see: blind like the marks."""
    mine = {(c.path, c.anchor): c for c in review.comments.all()} if review else {}
    others: dict[tuple[str, str], list] = defaultdict(list)
    if locked or reader:
        # why only now: a reviewer who has not submitted must not read anyone else's reading of the diff
        for c in (LineComment.objects.filter(review__submission=submission, review__submitted_at__isnull=False)
                  .exclude(review__reviewer=reviewer).select_related("review__reviewer")
                  .order_by("review__reviewer__username", "pk")):
            others[(c.path, c.anchor)].append((c.review.reviewer.get_username(), c))
    return mine, others


def diff_views(files: list, mine: dict, others: dict, open_at: tuple[str, str, str] = ("", "", "")) -> list[FileView]:
    """The diff's files for the page, each parsed into lines with their comments.

    ``open_at``: (path, anchor, view) of the line whose comment form is open.
    """
    views = []
    for index, f in enumerate(files):
        path = str(f.get("path", ""))
        by_anchor = {}
        lines = []
        for line in diffview.parse_unified(str(f.get("diff") or "")):
            view = LineView(line, mine.get((path, line.anchor)), others.get((path, line.anchor), []))
            lines.append(view)
            if line.kind != "hunk":
                by_anchor[id(line)] = view
        split = [(by_anchor.get(id(r.left)) if r.left else None, by_anchor.get(id(r.right)) if r.right else None,
                  r.hunk) for r in diffview.side_by_side([v.line for v in lines])]
        views.append(FileView(
            index, path, str(f.get("status", "")), bool(f.get("is_test")), bool(f.get("binary")),
            str(f.get("diff") or ""), lines, split,
            open_anchor=open_at[1] if open_at[0] == path else "", open_view=open_at[2] or "unified"))
    return views


def not_accepted_reason(upload: Submission) -> str:
    """Why an upload the server received and stored was not accepted; "" when it was (or nothing is known yet).

    Refused when it was unpacked (the worker's reason), or found unpackable as
    it arrived (the candidate was told so then). An upload whose grading
    failed on our side was accepted: the failure is ours.
    """
    if upload.status == Submission.Status.REJECTED:
        return upload.reject_reason or upload.unpack_refusal or "its archive was refused"
    return upload.unpack_refusal


def with_upload_verdicts(rows: list[dict], upload_receipts: list[GateReceipt], uploads: list[Submission]) -> list[dict]:
    """The receipt rows, each upload receipt with ``not_accepted``: why its upload was not accepted ("" else).

    why: an upload receipt says the server received the zip, not that it was
    accepted; a zip refused at unpack has an upload receipt all the same. The
    receipt points at its upload (GateReceipt.submission, set by sessions_app.actions.do_accept_upload).
    """
    by_pk = {u.pk: u for u in uploads}
    why = {}
    for receipt in upload_receipts:
        upload = by_pk.get(receipt.submission_id) if receipt.accepted else None
        if upload is not None:
            why[receipt.pk] = not_accepted_reason(upload)
    return [{**r, "not_accepted": why.get(r.get("id"), "") if r.get("step") == "upload" else ""} for r in rows]


def recording_name(invitation: Invitation) -> str:
    """The stored name of the hosted session's terminal recording (shared.stored), which the review page reads.

    The terminal records into the workspace's own folder, on the host that holds the workspace; that host
    copies the recording into the storage every host shares (sessions_app.hosted.workspaces.publish_recording)
    when the candidate submits, and at each of its sweeps while it grows. So the replay plays on any web
    host, whichever host the session ran on.
    """
    return stored.recording_name(invitation.pk)


def read_recording(name: str) -> replay.Recording | None:
    """The stored recording ``name``, or None when there is none; replay.UnreadableRecording when it is not
    one, or cannot be read just now.

    A recording read before and unchanged since (same size and time written) is not read again: the review
    page asks on every view, and a finished session's recording no longer changes.
    """
    try:
        found = stored.stat(name)
        return None if found is None else _read_stored(name, *found)
    except OSError as exc:
        raise replay.UnreadableRecording(f"it cannot be read just now ({exc.strerror or exc}).") from None


@functools.lru_cache(maxsize=64)
def _read_stored(name: str, size: int, written: float) -> replay.Recording | None:
    try:
        with stored.open(name) as handle:
            return replay.parse_recording(handle)
    except FileNotFoundError:
        return None


@dataclass(frozen=True)
class Replay:
    """The stamp section's player: the recording's markers, or why there is nothing to play."""

    recording: replay.Recording | None
    problem: str = ""

    @property
    def playable(self) -> bool:
        return self.recording is not None


def session_replay(submission: Submission) -> Replay | None:
    """The replay for a submission from a hosted session, or whose invitation has a recording; else None."""
    try:
        recording = read_recording(recording_name(submission.invitation))
    except replay.UnreadableRecording as exc:
        return Replay(None, f"The session's recording cannot be played: {exc}")
    if recording is None:
        if submission.via != "hosted":
            return None
        return Replay(None, "No recording of this session was found on the server.")
    return Replay(recording)


def _receipt_dicts(rows) -> list[dict]:
    """Stored receipts in the evidence's shape; their text came from the candidate's gate."""
    return [{"id": r.pk, "step": r.step, "at": r.received_at.isoformat(), "accepted": r.accepted,
             "refusal": display.clean_terminal_text(r.refusal) or None,
             "local_time": display.clean_terminal_text(r.local_time) or None, "after_deadline": False,
             "checks": [], "captured_by": r.captured_by} for r in rows]


# --- the debrief -------------------------------------------------------------------------


def debrief_rows(packet: Packet) -> QuerySet:
    """Per candidate: the upload under review, and every other upload that holds a submitted review.

    A review stays with the upload it scored: when a candidate uploads again
    after being reviewed, that review keeps its row (marked as not under
    review) next to the newer upload's. The upload under review comes first.
    """
    reviewed = Review.objects.filter(submission=OuterRef("pk"), submitted_at__isnull=False)
    return (
        Submission.objects.filter(invitation__packet_version__packet=packet)
        .filter(Q(is_latest=True) | Exists(reviewed))
        .select_related("invitation__candidate")
        .defer("reject_reason", "invitation__candidate__email")
        .order_by("invitation__candidate__name", "invitation__candidate_id", "invitation_id",
                  "-is_latest", "-uploaded_at", "-pk")
    )


def debrief_candidates(packet: Packet) -> QuerySet:
    """The candidates with an upload for the packet, for the debrief's pages (ordered there by name).

    Every invitation with an upload has its upload under review, so "has an
    upload" is "has a debrief row". Walked down the candidates' name index,
    each one's invitations looked up by key: a page costs the same at any depth.
    """
    invited = Invitation.objects.filter(candidate_id=OuterRef("pk"), packet_version__packet=packet).filter(
        Exists(Submission.objects.filter(invitation_id=OuterRef("pk"))))
    return Candidate.objects.filter(Exists(invited))


def debrief_candidate_count(packet: Packet) -> QuerySet:
    """The same candidates as debrief_candidates, to count: walked from the packet's invitations.

    Counting debrief_candidates walks the whole candidate table for a packet
    with few candidates; this reads only the packet's invitations that hold
    an upload (each has its upload under review), one row per candidate.
    """
    return (Invitation.objects.filter(packet_version__packet=packet)
            .filter(Exists(Submission.objects.filter(invitation_id=OuterRef("pk"), is_latest=True)))
            .values("candidate_id").distinct())


def debrief_rows_of(candidate_ids: list[int], packet: Packet) -> list[Submission]:
    """The debrief rows of one page of candidates, in the debrief's order."""
    # why the invitations first, their packet tested here: told the packet, the database may
    # walk every invitation of the packet instead of the page's few candidates' ones.
    invitations = [pk for pk, packet_id in Invitation.objects.filter(candidate_id__in=candidate_ids)
                   .values_list("pk", "packet_version__packet_id") if packet_id == packet.pk]
    return list(debrief_rows(packet).filter(invitation_id__in=invitations))


@dataclass(frozen=True)
class MarkView:
    """A submitted mark as the debrief shows it (plain values: thousands are drawn per page)."""

    passed: bool
    note: str
    submitted_at: object = None


@dataclass(frozen=True)
class CommentView:
    """A submitted review's comment on a diff line, as the debrief and the CSV show it."""

    path: str
    side: str
    line: int
    snippet: str
    body: str

    @property
    def where(self) -> str:
        """'invoices.py:12' for a line after the change, 'invoices.py:-9' for one removed (its number before)."""
        return f"{self.path}:{'-' if self.side == 'old' else ''}{self.line}"


def submitted_comments(submission_ids) -> dict[int, list[tuple[str, CommentView]]]:
    """The diff comments of the submitted reviews of these uploads, by upload, by reviewer name then place."""
    found: dict[int, list[tuple[str, CommentView]]] = defaultdict(list)
    rows = (LineComment.objects.filter(review__submission_id__in=list(submission_ids),
                                       review__submitted_at__isnull=False)
            .values_list("review__submission_id", "review__reviewer__username", "path", "side", "line", "snippet",
                         "body")
            .order_by("review__reviewer__username", "path", "line", "side"))
    for submission_id, name, path, side, line, snippet, body in rows:
        found[submission_id].append((name, CommentView(path, side, line, snippet, body)))
    return found


@dataclass
class DebriefRow:
    submission: Submission
    candidate: str
    visible: bool  # the viewer has submitted their own review of it
    reviews: int
    cells: list = field(default_factory=list)  # [(cell, [(reviewer, MarkView)], disagree)]
    under_review: Submission | None = None  # set when this row is not the upload under review
    comments: list = field(default_factory=list)  # [(reviewer, CommentView)] of the submitted reviews
    similar: list = field(default_factory=list)  # [similarity.SimilarRow], once visible

    @property
    def newer_upload_exists(self) -> bool:
        return self.under_review is not None and (
            (self.under_review.uploaded_at, self.under_review.pk) > (self.submission.uploaded_at, self.submission.pk))


def debrief_page_rows(
    submissions: list[Submission], packet: Packet, reviewer, reader: bool = False
) -> list[DebriefRow]:
    """The marks of the submitted reviews for one page of debrief rows, blind where needed.

    ``reader``: a recruiter reading, who reviews nothing, so sees every submitted review.
    """
    ids = [s.pk for s in submissions]
    by_submission: dict[int, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    reviewers_of: dict[int, set] = defaultdict(set)
    found = (
        Mark.objects.filter(review__submission_id__in=ids, review__submitted_at__isnull=False)
        .values_list("review__submission_id", "review__reviewer_id", "review__reviewer__username",
                     "review__submitted_at", "cell", "passed", "note")
        .order_by("review__reviewer__username")
    )
    for submission_id, reviewer_id, name, submitted_at, cell, passed, note in found:
        by_submission[submission_id][cell].append((name, MarkView(passed, note, submitted_at)))
        reviewers_of[submission_id].add(reviewer_id)
    under_review: dict[int, Submission] = {}
    older = {s.invitation_id for s in submissions if not s.is_latest}
    if older:
        # why is_latest tested here: in the query, the database may walk the flag's index (every row).
        under_review = {
            u.invitation_id: u for u in Submission.objects.filter(invitation_id__in=older)
            .only("pk", "invitation_id", "uploaded_at", "status", "is_latest") if u.is_latest
        }
    rows = []
    comments = submitted_comments(ids)
    for s in submissions:
        # why: the debrief is no back door around blind review.
        visible = reader or reviewer.pk in reviewers_of[s.pk]
        row = DebriefRow(s, candidate_label(s.invitation, packet, reader), visible, len(reviewers_of[s.pk]),
                         under_review=None if s.is_latest else under_review.get(s.invitation_id))
        if visible:
            row.comments = comments.get(s.pk, [])
            for key in rubric.KEYS:
                marks_here = by_submission[s.pk][key]
                disagree = len({m.passed for _, m in marks_here}) > 1
                row.cells.append((key, marks_here, disagree))
        rows.append(row)
    # why only the visible rows: as on the review page, a reviewer learns of a copy after their own marks
    similar = similarity.similar_for([r.submission.pk for r in rows if r.visible],
                                     lambda inv, p: candidate_label(inv, p, reader))
    for row in rows:
        row.similar = similar.get(row.submission.pk, [])
    return rows


def decisions_for(submissions: list[Submission]) -> dict[int, Decision]:
    """The hiring decisions of these uploads' candidates, by invitation id (one query)."""
    return {d.invitation_id: d for d in Decision.objects.filter(
        invitation_id__in={s.invitation_id for s in submissions}).select_related("decided_by")}


def debrief_index() -> list[Packet]:
    """Every packet with its counts of invitations and of candidates who uploaded, for the debriefs' index.

    Read from each packet's funnel tally (one query a packet), not counted over its invitations.
    """
    packets = list(Packet.objects.only("slug", "title").order_by("title"))
    for packet in packets:
        counts = funnel.counts(packet)
        packet.invited, packet.uploaded = counts["invited"], counts["submitted"]
    return packets


def pair_agreements(packet: Packet) -> dict[str, list[PairAgreement]]:
    """Per cell, each pair of reviewers' agreement over the packet's uploads both scored.

    Every upload counts, not only those under review: a review stays with the
    upload it scored, and the debrief shows it. Read from the tally that
    submitting a review keeps (one row per pair and cell), so the cost does
    not grow with the number of reviews.
    """
    name = get_user_model().USERNAME_FIELD
    found = AgreementTally.objects.filter(packet=packet).values_list(
        f"reviewer_a__{name}", f"reviewer_b__{name}", "cell", *TALLY_COUNTS)
    result: dict[str, list[PairAgreement]] = {key: [] for key in rubric.KEYS}
    for a, b, cell, *counts in found:
        table = Table(*counts)
        if a > b:  # name each pair alphabetically; the figures are symmetric
            a, b = b, a
            table = Table(table.both_pass, table.a_fail_b_pass, table.a_pass_b_fail, table.both_fail)
        result[cell].append(PairAgreement(a, b, cell, table))
    for pairs in result.values():
        pairs.sort(key=lambda p: (p.reviewer_a, p.reviewer_b))
    return result


def packet_cells(packet: Packet) -> tuple[rubric.RubricCell, ...]:
    """The packet's rubric in its latest version's words (the defaults for a packet with no version)."""
    version = packet.latest_version()
    return version.rubric_cells() if version else rubric.cells()


def packet_labels(packet: Packet) -> list[tuple[str, str]]:
    return [(c.key, c.label) for c in packet_cells(packet)]


CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value) -> str:
    """A CSV field a spreadsheet will not run as a formula."""
    text = "" if value is None else display.clean_terminal_text(str(value))
    # why: names and notes come from people; "=HYPERLINK(...)" must stay text.
    return "'" + text if text.startswith(CSV_FORMULA_START) else text


def similar_text(rows: list[similarity.SimilarRow]) -> str:
    """The CSV's similar_to field: 'submission 12 (test diff 1.00, refuse.md 0.93); submission 15 (...)'."""
    return "; ".join(f"submission {r.other.pk} ({r.summary()})" for r in rows)


def debrief_csv_rows(packet: Packet, reviewer, chunk: int = 500, reader: bool = False):
    """The debrief as CSV rows: one row per candidate and reviewer, the four cells side by side.

    Then come the hiring decision a person recorded (takehome.Decision),
    never derived from the cells, and the packet's other submissions near-identical
    to this one (grading.similarity), as on the debrief. A recruiter reading also gets one line for a
    candidate no reviewer has scored yet, so every decision is exported.
    """
    labels = packet_labels(packet)
    header = ["submission", "candidate", "uploaded_at", "reviewer", "submitted_at"]
    for key, _ in labels:
        header += [key, f"{key}_note"]
    header += ["diff_comments", "disagreement", "under_review", "decision", "decision_note", "decided_by",
               "decided_at", "similar_to"]
    yield header
    rows = debrief_rows(packet)
    last = 0
    while True:
        batch = list(rows.filter(pk__gt=last).order_by("pk")[:chunk])
        if not batch:
            return
        last = batch[-1].pk
        decisions = decisions_for(batch)
        for row in debrief_page_rows(batch, packet, reviewer, reader):
            if not row.visible:
                continue
            d = decisions.get(row.submission.invitation_id)
            decided = [d.choice, d.note, d.decided_by.get_username() if d.decided_by else "",
                       d.decided_at.isoformat()] if d else ["", "", "", ""]
            decided.append(similar_text(row.similar))
            per_reviewer: dict[str, dict] = defaultdict(dict)
            disagree = []
            for cell, marks, disagreement in row.cells:
                for name, mark in marks:
                    per_reviewer[name][cell] = mark
                if disagreement:
                    disagree.append(cell)
            for name in sorted(per_reviewer):
                marks = per_reviewer[name]
                any_mark = next(iter(marks.values()))
                line = [row.submission.pk, row.candidate, row.submission.uploaded_at.isoformat(), name,
                        any_mark.submitted_at.isoformat()]
                for key, _ in labels:
                    m = marks.get(key)
                    line += [("pass" if m.passed else "fail") if m else "", m.note if m else ""]
                # one comment a line of the field: where, the line as it stood, what the reviewer said
                said = [f"{c.where} `{c.snippet.strip()}`: {c.body}" for who, c in row.comments if who == name]
                line += ["\n".join(said), " ".join(disagree), "yes" if row.submission.is_latest else "no", *decided]
                yield [csv_safe(v) for v in line]
            if not per_reviewer and reader:
                line = [row.submission.pk, row.candidate, row.submission.uploaded_at.isoformat(), "", ""]
                line += ["", ""] * len(labels)
                line += ["", "", "yes" if row.submission.is_latest else "no", *decided]
                yield [csv_safe(v) for v in line]
