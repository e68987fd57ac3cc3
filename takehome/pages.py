"""The read side of the recruiter's desk: what the invitations board and the packet's funnel show.

Views stay HTTP-only and call these. Each function costs a fixed number of
queries, whatever the number of candidates: rows are gathered per page with
``__in`` lookups, and the funnel is counted by the database.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q
from django.urls import reverse

from shared.paging import beyond

from . import charts
from . import funnel as tally
from .models import AuditEvent, Candidate, Decision, Invitation, Packet
from .signals import board_rows_read


@dataclass
class BoardRow:
    """One candidate's line on the invitations board: the invitation and what came back of it.

    What came back (the upload, its reviews, the refused uploads) is filled in by the rooms after the
    recruiter's, which answer ``takehome.signals.board_rows_read`` (grading.outcomes).
    """

    invitation: Invitation
    submission: Any = None  # the upload under review (a sessions_app Submission), or None
    reviews: int = 0  # submitted reviews of that upload
    disagree: bool = False  # two submitted reviews differ on at least one cell
    decision: Decision | None = None
    events: list = field(default_factory=list)  # AuditEvents, newest first
    refused_uploads: int = 0  # uploads the rules refused (kept as refused upload receipts), too-soon retries aside
    last_refusal: str = ""  # the newest one's reason
    urls: dict = field(default_factory=dict)  # where the row's forms post (resend, revoke, extend, decide); person


ROW_ACTIONS = ("resend", "revoke", "extend", "decide")


BOARD_PAGE_SIZE = 25  # candidates a page of the invitations board (each row holds its forms: as the debrief)


def board_invitations(packet: Packet):
    """Every invitation to any version of the packet: the board's list, paged by keyset on its creation time."""
    return Invitation.objects.filter(board_packet=packet)


def board_url_for(invitation: Invitation) -> str:
    """The address of the board's page that shows this invitation's row, at the row.

    The first page when the row is there; otherwise the page that starts at
    it (after the invitation just newer), so an action taken on page 40, or a
    link from elsewhere, lands on the row itself.
    """
    url = reverse("takehome:invitation-board", kwargs={"slug": invitation.packet.slug})
    newer = beyond(board_invitations(invitation.packet), "created_at", invitation.created_at, invitation.pk,
                   lower=False)
    if newer.order_by()[:BOARD_PAGE_SIZE].count() == BOARD_PAGE_SIZE:
        url += f"?after={newer.order_by('created_at', 'pk').values_list('pk', flat=True).first()}"
    return f"{url}#invitation-{invitation.pk}"


def board_rows(ids: list[int]) -> list[BoardRow]:
    """One page of the board (invitation ids in the page's order), with grading, reviews, disagreement, decision, history.

    Six queries in all, whatever the packet holds: the invitations (with
    their decision), their uploads under review, the submitted reviews counted
    per upload, the uploads whose reviewers disagree, the refused uploads (those four
    read by the desk, which answers takehome.signals.board_rows_read), and the audit events.
    """
    found = {inv.pk: inv for inv in Invitation.objects.for_board().filter(pk__in=ids).select_related(
        "decision__decided_by")}
    invitations = [found[pk] for pk in ids if pk in found]
    rows = {inv.pk: BoardRow(inv) for inv in invitations}
    for inv in invitations:
        try:
            rows[inv.pk].decision = inv.decision
        except Decision.DoesNotExist:
            pass
    board_rows_read.send(sender=BoardRow, rows=rows)
    events = defaultdict(list)
    for event in AuditEvent.objects.filter(invitation_id__in=list(rows)).order_by("-at", "-pk"):
        events[event.invitation_id].append(event)
    # why one reverse per action for the page: a row's four addresses differ only by its id, and
    # reversing each of them for each row was a tenth of the page's time.
    pattern = {name: reverse(f"takehome:invitation-{name}", args=[0]).split("/0/") for name in ROW_ACTIONS}
    person_head, person_tail = reverse("candidates:detail", args=[0]).split("/0/")
    for pk, row in rows.items():
        row.events = events[pk]
        row.urls = {name: f"{head}/{pk}/{tail}" for name, (head, tail) in pattern.items()}
        row.urls["person"] = f"{person_head}/{row.invitation.candidate_id}/{person_tail}"
    return [rows[inv.pk] for inv in invitations]


# --- candidates across packets ------------------------------------------------------------

CANDIDATE_PAGE_SIZE = 25  # people a page of the candidate search
PERSON_PAGE_SIZE = 25  # invitations a page of one person's page (each row as the board's)
SEARCH_MAX = 200  # characters of a search that are read


def candidate_search(text: str):
    """The candidates whose name or email holds every word of ``text`` (any case); everyone when it is empty.

    Every packet counts: the recruiter's side has no packet a recruiter may
    not see. Paged by keyset on the name index (shared.paging), so a page of
    the directory costs the same at any depth.
    """
    found = Candidate.objects.all()
    for word in text[:SEARCH_MAX].split():
        found = found.filter(Q(name__icontains=word) | Q(email__icontains=word))
    return found


@dataclass
class CandidateRow:
    """One person in the search: who, and their invitations, newest first."""

    candidate: Candidate
    invitations: list[Invitation] = field(default_factory=list)


def candidate_rows(ids: list[int]) -> list[CandidateRow]:
    """One page of the search (candidate ids in the page's order) with each one's invitations; two queries."""
    found = Candidate.objects.in_bulk(ids)
    rows = {pk: CandidateRow(found[pk]) for pk in ids if pk in found}
    for invitation in Invitation.objects.for_board().filter(candidate_id__in=list(rows)):
        rows[invitation.candidate_id].invitations.append(invitation)
    return list(rows.values())


def person_invitations(candidate: Candidate):
    """Every invitation of one person, to any packet: their page's list, paged by keyset on creation time."""
    return Invitation.objects.filter(candidate=candidate)


# --- the funnel ---------------------------------------------------------------------------

FUNNEL_STEPS = (
    ("invited", "Invited"),
    ("opened", "Opened the link"),
    ("started", "Started the clock"),
    ("red", "Red run witnessed"),
    ("submitted", "Submitted"),
    ("graded", "Graded"),
    ("reviewed", "Reviewed"),
    ("decided", "Decided"),
)
def funnel(packet: Packet) -> dict:
    """The packet's funnel, time distributions and model window use, read from its tally (takehome.funnel).

    Every candidate invited to any version of the packet counts, revoked ones
    included (they were invited). "Red run witnessed" is an accepted red
    receipt from the gate; "graded" an upload under review that was graded;
    "reviewed" one with at least one submitted review; "decided" a recorded
    advance or decline. Time to red runs from Start to the first accepted red
    receipt; time on task from Start to the latest upload. The model window:
    how many candidates sent at least one request through it, the requests
    (failed ones too) and the tokens in and out.
    """
    counts = tally.counts(packet)
    model = {"candidates": counts["model_candidates"], "requests": counts["model_requests"],
             "tokens_in": counts["model_tokens_in"], "tokens_out": counts["model_tokens_out"]}
    steps = [(key, label, counts[key]) for key, label in FUNNEL_STEPS]
    to_red = charts.histogram(charts.buckets(
        tally.TIME_TO_RED_EDGES, [counts[f"red_le_{e}"] for e in tally.TIME_TO_RED_EDGES], counts["red_timed"]))
    on_task = charts.histogram(charts.buckets(
        tally.TIME_ON_TASK_EDGES, [counts[f"task_le_{e}"] for e in tally.TIME_ON_TASK_EDGES], counts["task_timed"]))
    return {
        "invited": counts["invited"],
        "steps": steps,
        "funnel_chart": charts.funnel_chart(steps),
        # (id, title, chart, what is measured)
        "times": [
            ("time-to-red", "Time to red", to_red,
             "From pressing Start to the gate's first accepted red run, in minutes."),
            ("time-on-task", "Time on task", on_task, "From pressing Start to the latest upload, in minutes."),
        ],
        "model": model,
    }
