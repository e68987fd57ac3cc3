"""The reviewer's desk: queue, review page, marks, debrief; and /metrics for Prometheus. HTTP only.

Reads come from grading.pages, writes go through grading.actions. The pages
that read (queue, review page, debrief, CSV) are behind ``desk_required``:
reviewers, and recruiters who read them without any form to mark
(``reads_only``). The views that write marks are behind ``marker_required``:
reviewers only, a recruiter gets a 403 that says so. Candidates have no account at all.
"""

from __future__ import annotations

import csv
import hmac
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRefresh
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from sessions_app.models import Submission
from shared import paging, stored
from shared.access import RECRUITER_GROUP, desk_required, in_group, marker_required, reads_only, recruiter_required
from shared.http import htmx_redirect
from takehome.models import Decision, Packet

from . import actions, pages
from .metrics import TakehomeCollector
from .models import CELLS_BEFORE_DIFF, Cell

QUEUE_PAGE_SIZE = 50
MY_QUEUE_SIZE = 20  # the viewer's own queue, above the rest: the oldest this many, then "more are assigned"
DEBRIEF_PAGE_SIZE = 25  # candidates; one row each, and one more per earlier upload that kept a review


class MarkForm(forms.Form):
    """One click on a rubric cell: pass or fail, and the note as it stands."""

    passed = forms.TypedChoiceField(
        choices=[("true", "Pass"), ("false", "Fail")], coerce=lambda v: v == "true", required=False, empty_value=None
    )
    note = forms.CharField(required=False, max_length=2000, strip=True)
    # When the note was typed (Review.take_note_stamp); blank from a page without the review script.
    note_stamp = forms.IntegerField(required=False, min_value=0, max_value=2**53)


def _submission(pk: int) -> Submission:
    try:
        return pages.load_submission(pk)
    except Submission.DoesNotExist:
        raise Http404("No such submission.") from None


@require_GET
@vary_on_headers("HX-Request")
@desk_required
def queue(request: HttpRequest) -> HttpResponse:
    """The reviewer's own queue (assigned to them, oldest first), then the latest submissions, newest first;
    by default those the reviewer has not yet scored (a recruiter: all, and no queue of their own)."""
    reader = reads_only(request.user)
    packet_slug = request.GET.get("packet", "")
    packets = list(Packet.objects.only("slug", "title"))
    if packet_slug and packet_slug not in {p.slug for p in packets}:
        packet_slug = ""  # an unknown packet (a stale link) filters nothing and links to no debrief
    todo = request.GET.get("show", "all" if reader else "todo") != "all"
    filters = urlencode({"packet": packet_slug, "show": "todo" if todo else "all"})
    # The viewer's own queue first (what is assigned to them), then the rest; a recruiter reading has none.
    mine_ids = [] if reader else list(pages.my_queue(request.user, packet_slug)[:MY_QUEUE_SIZE + 1])
    mine = {
        "mine": pages.queue_rows(pages.load_queue_page(mine_ids[:MY_QUEUE_SIZE]), request.user),
        "mine_more": len(mine_ids) > MY_QUEUE_SIZE,
        "mine_query": urlencode({"packet": packet_slug, "part": "mine"}),
        "reader": reader,
    }
    if request.htmx and request.GET.get("part") == "mine":
        return render(request, "grading/queue_list.html#my-queue-rows", mine)
    page = paging.keyset_page(pages.queue(request.user, packet_slug, todo, but_mine=not reader), "uploaded_at",
                              True, QUEUE_PAGE_SIZE, request.GET)
    rows = pages.queue_rows(pages.load_queue_page(page.ids), request.user)
    context = {
        **mine,
        "page": page,
        "rows": rows,
        # Rows still grading are polled on any page; the first page of a filter is always polled,
        # so a new upload comes in without a reload (every 3 s while grading, else every 10 s).
        "polling": "3s" if any(not r.submission.is_finished for r in rows) else (
            "10s" if not page.has_previous else ""),
        "poll_query": filters if not page.has_previous else request.GET.urlencode(),
        "packets": packets,
        "packet_slug": packet_slug,
        "show": "todo" if todo else "all",
        "filters": filters,
    }
    template = "grading/queue_list.html"
    if request.htmx:
        template += "#queue-rows"
    return render(request, template, context)


@require_GET
@vary_on_headers("HX-Request")
@desk_required
def review_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The evidence in the article's order (red log, stamp, refusal, then the diff), a cell beside each."""
    submission = _submission(pk)
    if request.htmx:
        # The status poll: once grading has finished, reload the page to show the evidence.
        if submission.is_finished:
            return HttpResponseClientRefresh()
        return render(request, "grading/review_detail.html#grading-status", {"submission": submission})
    context = pages.review_page(submission, request.user, reads_only(request.user))
    return _page(request, context)


def _page(request: HttpRequest, context: dict, reassign_error: str = "") -> HttpResponse:
    """The whole review page; with a recording to play, a policy that lets its player run."""
    assigned = pages.assigned_reviewers(context["submission"])
    context["assigned"] = assigned
    context["wanted_reviewers"] = context["packet"].reviewers_per_submission
    # why the recruiter group (not reads_only): who runs the team may also review, and still reassigns
    if in_group(request.user, RECRUITER_GROUP):
        context["can_reassign"] = True
        context["reassign_choices"] = pages.reassign_choices(assigned)
        context["reassign_error"] = reassign_error
    response = render(request, "grading/review_detail.html", context)
    if context["replay"] and context["replay"].playable:
        # why: the player's terminal runs as WebAssembly, which script-src 'self' alone forbids; only this page
        # and only with a recording to play gets it (still no inline script and no eval of JavaScript).
        response._csp_update = {"script-src": ["'wasm-unsafe-eval'"]}
    return response


@require_GET
@desk_required
def session_cast(request: HttpRequest, pk: int) -> HttpResponse:
    """The hosted session's recording (asciicast v2) for the review page's player; 404 when it has none."""
    submission = _submission(pk)
    try:
        handle = stored.open(pages.recording_name(submission.invitation))
    except FileNotFoundError:
        raise Http404("No recording of this session.") from None
    response = FileResponse(handle, content_type="application/x-asciicast")
    response["Cache-Control"] = "private, no-store"
    return response


def _cell_response(request, submission, cell: str, error: str = "", note: str | None = None,
                   notice: str = "", chose: bool = True) -> HttpResponse:
    """The cell again, plus the submit bar and (when it unfolds) the diff, swapped out of band.

    ``chose``: pass or fail was chosen. A note alone unfolds nothing, so the diff is not sent again:
    swapping it would replace a note box there that the reviewer is still typing in.
    """
    if not request.htmx:
        if error or notice:
            context = pages.review_page(submission, request.user)
            context["cells"][cell].error = error
            context["cells"][cell].notice = notice
            return _page(request, context)
        return htmx_redirect(request, "grading:review-detail", pk=submission.pk)
    state = pages.review_state(submission, request.user)
    c = state["cells"][cell]
    c.error, c.notice = error, notice
    context = {"submission": submission, **state, "c": c, "note_draft": note}
    html = render_to_string("grading/review_detail.html#rubric-cell", context, request)
    html += render_to_string("grading/review_detail.html#review-submit", {**context, "oob": True}, request)
    if chose and cell in CELLS_BEFORE_DIFF and state["unfolded"] and not error:
        full = pages.review_page(submission, request.user)
        html += render_to_string("grading/review_detail.html#diff-section", {**full, "oob": True}, request)
    if chose and not error:
        # why on every choice: the list shows once the fourth cell is marked, whichever cell that is
        html += render_to_string("grading/review_detail.html#similar-section",
                                 {**context, **pages.similar_section(submission, state), "oob": True}, request)
    return HttpResponse(html)


# What the cell says after a note is saved without a choice (by where actions.do_save_note_draft kept it).
NOTE_NOTICES = {
    "draft": "Note kept. Choose pass or fail to score the cell.",
    "mark": "",
    # why not an error: the same page's save overtaken by its own later one ends here too, harmlessly.
    "older": "A note typed later is kept; this one was not saved.",
}


@require_POST
@marker_required
def mark_update(request: HttpRequest, pk: int, cell: str) -> HttpResponse:
    """Save the viewer's own mark for one cell (htmx: re-render the cell; invalid: 200 with the reason)."""
    submission = _submission(pk)
    if cell not in Cell.values:
        raise Http404("No such rubric cell.")
    form = MarkForm(request.POST)
    if not form.is_valid():
        return _cell_response(request, submission, cell, "; ".join(e for errs in form.errors.values() for e in errs))
    passed = form.cleaned_data["passed"]
    note, stamp = form.cleaned_data["note"], form.cleaned_data["note_stamp"]
    if passed is None:
        # A note alone: onto the mark (the choice stays as it is) or, with no choice yet, kept as a draft.
        try:
            kept = actions.do_save_note_draft(submission, request.user, cell, note, stamp)
        except actions.ReviewError as exc:
            return _cell_response(request, submission, cell, str(exc), note)
        return _cell_response(request, submission, cell, chose=False, notice=NOTE_NOTICES[kept])
    try:
        # why request.user: a reviewer only ever writes their own review; there is no id to forge.
        saved = actions.do_save_mark(submission, request.user, cell, passed, note, stamp)
    except actions.ReviewError as exc:
        return _cell_response(request, submission, cell, str(exc), note)
    return _cell_response(request, submission, cell, notice=NOTE_NOTICES["older"] if saved.note != note else "")


@require_POST
@marker_required
def review_submit(request: HttpRequest, pk: int) -> HttpResponse:
    """Make the viewer's review final; then the page shows the other reviewers' marks."""
    submission = _submission(pk)
    try:
        actions.do_submit_review(submission, request.user, confirmed=request.POST.get("confirm") == "yes")
    except actions.ReviewError as exc:
        context = {**pages.review_page(submission, request.user), "submit_error": str(exc)}
        template = "grading/review_detail.html"
        if request.htmx:
            template += "#review-submit"
        return render(request, template, context)
    return htmx_redirect(request, "grading:review-detail", pk=submission.pk)


def _open_at(data) -> tuple[str, str, str]:
    """(path, line anchor, view) of the comment form asked for; view is "unified" or "split"."""
    return data.get("path", ""), data.get("at", ""), "split" if data.get("view") == "split" else "unified"


def _diff_file(request: HttpRequest, submission: Submission, open_at: tuple[str, str, str], error: str = "",
               draft: str | None = None, focus: str = "") -> HttpResponse:
    """One file of the diff again (htmx), or the whole page (else), with the comment form open at ``open_at``."""
    context = pages.review_page(submission, request.user, open_at=open_at)
    context.update(comment_error=error, comment_draft=draft, focus_anchor=focus)
    if not request.htmx:
        return _page(request, context)
    f = next((f for f in context["diff_files"] if f.path == open_at[0]), None)
    if f is None:
        raise Http404("No such file in the diff.")
    return render(request, "grading/review_detail.html#diff-file", {**context, "f": f})


@require_GET
@vary_on_headers("HX-Request")
@marker_required
def comment_form(request: HttpRequest, pk: int) -> HttpResponse:
    """Open the comment box under one line of the diff: the file again for htmx, the whole page without it."""
    return _diff_file(request, _submission(pk), _open_at(request.GET))


@require_POST
@marker_required
def comment_save(request: HttpRequest, pk: int) -> HttpResponse:
    """Keep the viewer's comment on one diff line with their review (an empty comment removes it)."""
    submission = _submission(pk)
    path, at, view = _open_at(request.POST)
    body = request.POST.get("body", "")
    try:
        # why request.user: a reviewer only ever writes their own review's comments; there is no id to forge.
        actions.do_save_line_comment(submission, request.user, path, at, body)
    except actions.ReviewError as exc:
        return _diff_file(request, submission, (path, at, view), str(exc), draft=body)
    if not request.htmx:
        return redirect(reverse("grading:review-detail", args=[submission.pk]) + "#diff-section")
    return _diff_file(request, submission, (path, "", view), focus=at)


@require_POST
@recruiter_required
def assignment_update(request: HttpRequest, pk: int) -> HttpResponse:
    """A recruiter gives an assigned reviewer's review to someone else, or adds a reviewer (audited)."""
    submission = _submission(pk)
    def user(field: str):
        value = request.POST.get(field, "")
        return get_user_model().objects.filter(pk=int(value)).first() if value.isdigit() else None

    old = user("from")
    if request.POST.get("from") and old is None:
        return _page(request, pages.review_page(submission, request.user, reads_only(request.user)),
                     "That reviewer no longer exists; reload the page.")
    try:
        actions.do_reassign_reviewer(submission, old, user("to"), request.user)
    except actions.AssignmentError as exc:
        return _page(request, pages.review_page(submission, request.user, reads_only(request.user)), str(exc))
    return htmx_redirect(request, "grading:review-detail", pk=submission.pk)


@require_GET
@desk_required
def debrief_list(request: HttpRequest) -> HttpResponse:
    """Every packet's debrief, one line each with its count of candidates who uploaded."""
    return render(request, "grading/debrief_list.html", {"packets": pages.debrief_index()})


@require_GET
@desk_required
def debrief(request: HttpRequest, slug: str) -> HttpResponse:
    """Per packet: one row per candidate, the four cells side by side, and the reviewers' agreement."""
    packet = get_object_or_404(Packet, slug=slug)
    cells = pages.packet_cells(packet)
    reader = reads_only(request.user)
    page = paging.keyset_page(pages.debrief_candidates(packet), "name", False, DEBRIEF_PAGE_SIZE, request.GET,
                              counted=pages.debrief_candidate_count(packet))
    rows = pages.debrief_page_rows(pages.debrief_rows_of(page.ids, packet), packet, request.user, reader)
    return render(
        request,
        "grading/debrief_detail.html",
        {
            "packet": packet,
            "page": page,
            "rows": rows,
            "labels": [(c.key, c.label) for c in cells],
            "rubric": cells,
            "agreements": pages.pair_agreements(packet),
            "reader": reader,
            "decisions": pages.decisions_for([r.submission for r in rows]) if reader else {},
            "decision_choices": Decision.Choice.choices,
        },
    )


class _Echo:
    def write(self, value: str) -> str:
        return value


@require_GET
@desk_required
def debrief_csv(request: HttpRequest, slug: str) -> StreamingHttpResponse:
    """The debrief as CSV, streamed: one line per candidate and reviewer (blind rows left out)."""
    packet = get_object_or_404(Packet, slug=slug)
    writer = csv.writer(_Echo())
    response = StreamingHttpResponse(
        (writer.writerow(row) for row in pages.debrief_csv_rows(packet, request.user, reader=reads_only(request.user))),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="debrief-{packet.slug}.csv"'
    return response


@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus' scrape (grading.metrics), for a request bearing TAKEHOME_METRICS_TOKEN; 404 when none is set.

    why 404 without a token: the endpoint does not exist until an operator
    turns it on, and says nothing of the site to anyone until then.
    """
    token = settings.METRICS_TOKEN
    if not token:
        raise Http404
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # why compare_digest: a plain == returns sooner the earlier the first wrong character, which a
    # patient client could time to find the token character by character.
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        response = HttpResponse("This needs the metrics token: Authorization: Bearer <token>.\n", status=401,
                                content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(TakehomeCollector()), content_type=CONTENT_TYPE_LATEST)

