"""Recruiter pages: packets, versions, invitations. HTTP only; writes go through actions."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.db.models import Prefetch
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.static import static
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from grading.engine.requirements import requirement_names
from shared import paging
from shared.access import RECRUITER_GROUP, REVIEWER_GROUP, in_group, manages_team, recruiter_required
from shared.http import htmx_redirect
from shared.models import WorkerHeartbeat
from shared.words import counted

from . import actions, pages
from .forms import DecisionForm, ExtendDeadlineForm, ImportPacketForm, InviteForm, NewPacketForm, PacketVersionForm
from .models import (
    MAX_REVIEWERS_PER_SUBMISSION,
    Candidate,
    Decision,
    Invitation,
    Packet,
    PacketFile,
    PacketVersion,
    effective_policy,
)
from .packet_zip import export_zip
from .reminders import ReminderError, do_set_reminders
from .team.pages import team_admin_names

BOARD_PAGE_SIZE = pages.BOARD_PAGE_SIZE


def home(request: HttpRequest) -> HttpResponse:
    """Send each person to their desk."""
    if not request.user.is_authenticated:
        return redirect("login")
    if in_group(request.user, RECRUITER_GROUP):
        return redirect("takehome:packet-list")
    if in_group(request.user, REVIEWER_GROUP):
        return redirect("grading:queue")
    if manages_team(request.user):
        return redirect("team:list")
    # A person with no role (one who signed on for the first time, say): who to ask, and how roles are given.
    return render(request, "takehome/no_role.html", {"team_admins": team_admin_names(),
                                                     "roles_claim": settings.OIDC_ROLES_CLAIM}, status=403)


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever the page says: send them to the icon in static/."""
    # why not permanent: the static name carries a content hash in production, which changes.
    return redirect(static("takehome/favicon.svg"))


def worker_status() -> dict:
    """How long since a worker last reported in (None: never), and its sandbox's caps."""
    beat = WorkerHeartbeat.objects.order_by("-seen_at").first()
    if beat is None:
        return {"seen": None, "alive": False, "caps": ""}
    age = timezone.now() - beat.seen_at
    return {"seen": beat.seen_at, "alive": age < timedelta(minutes=2), "caps": beat.caps}


@require_GET
@recruiter_required
def packet_list(request: HttpRequest) -> HttpResponse:
    packets = Packet.objects.prefetch_related(
        Prefetch("versions", queryset=PacketVersion.objects.order_by("-number"))
    )
    return render(
        request, "takehome/packet_list.html", {"packets": packets, "worker": worker_status()}
    )


def _version(packet: Packet, request: HttpRequest) -> PacketVersion:
    number = request.GET.get("v")
    versions = packet.versions.all()
    if number:
        if not number.isdigit():
            raise Http404("No such version.")
        return get_object_or_404(versions, number=int(number))
    version = versions.order_by("-number").first()
    if version is None:
        raise Http404("This packet has no version yet.")
    return version


@require_GET
@vary_on_headers("HX-Request")
@recruiter_required
def packet_detail(request: HttpRequest, slug: str) -> HttpResponse:
    packet = get_object_or_404(Packet, slug=slug)
    version = _version(packet, request)
    check, state = version.last_check_and_state()
    if request.htmx and request.GET.get("part") == "check":
        return render(request, "takehome/packet_detail.html#packet-check",
                      {"packet": packet, "version": version, "check": check, "state": state})
    files = list(version.files.all())
    shown = None
    path = request.GET.get("file")
    kind = request.GET.get("kind", PacketFile.Kind.FIXTURE)
    if path:
        shown = next((f for f in files if f.path == path and f.kind == kind), None)
        if shown is None:
            raise Http404("No such file in this version.")
    groups = [
        (label, [f for f in files if f.kind == kind_value])
        for kind_value, label in PacketFile.Kind.choices
    ]
    return render(
        request,
        "takehome/packet_detail.html",
        {
            "packet": packet,
            "version": version,
            "versions": packet.versions.order_by("-number"),
            "groups": groups,
            "shown": shown,
            "check": check,
            "state": state,
            "funnel": pages.funnel(packet),
            "requirement_count": len(requirement_names(version.requirements)),
            "model_policy_words": model_policy_words(version),
            "max_reviewers": MAX_REVIEWERS_PER_SUBMISSION,
        },
    )


def model_policy_words(version: PacketVersion) -> str:
    """How the version's candidates get a model, in a few words (the packet page's header line)."""
    policy = effective_policy(version)
    if policy == PacketVersion.ModelPolicy.PROVIDED:
        chosen = "" if version.model_policy else " (unset: the server has a model)"
        return f"provided by this server, {version.model_in_use}{chosen}"
    if policy == PacketVersion.ModelPolicy.NONE:
        return "none (no model step)"
    return "the candidate's own" + ("" if version.model_policy else " (unset: no model configured here)")


@require_POST
@recruiter_required
def packet_check(request: HttpRequest, slug: str) -> HttpResponse:
    """Run a version's self-check again (a worker runs it; the page shows it as it goes)."""
    packet = get_object_or_404(Packet, slug=slug)
    version = _version(packet, request)
    actions.do_queue_packet_check(version, request.user)
    messages.success(request, f"The self-check of version {version.number} is queued; this page updates when it ends.")
    return htmx_redirect(request, f"{packet.get_absolute_url()}?v={version.number}")


@require_GET
@recruiter_required
def packet_export(request: HttpRequest, slug: str) -> HttpResponse:
    """The version as a zip an author can read, edit and import elsewhere."""
    packet = get_object_or_404(Packet, slug=slug)
    version = _version(packet, request)
    history = request.GET.get("history") == "1"
    response = HttpResponse(export_zip(version, history=history), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{packet.slug}-v{version.number}.zip"'
    return response


@require_http_methods(["GET", "POST"])
@recruiter_required
def packet_import(request: HttpRequest) -> HttpResponse:
    form = ImportPacketForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            imported = actions.do_import_packet(form.cleaned_data["archive"], request.user)
        except actions.PacketError as exc:
            form.add_error("archive", str(exc))
        else:
            if imported.unchanged:
                messages.info(request, f"Nothing imported: version {imported.version.number} of "
                                       f"{imported.packet.slug} holds this zip already (the same prompt, files and "
                                       "settings), so no new version was made.")
                return redirect(imported.packet)
            what = "Imported as a new packet" if imported.new_packet else (
                f"This installation had {imported.packet.slug} already: imported as version {imported.version.number}")
            messages.success(request, f"{what}. Its self-check is running; it can be invited to once every check passes.")
            return redirect(imported.packet)
    return render(request, "takehome/packet_import.html", {"form": form})


@require_POST
@recruiter_required
def packet_reminders(request: HttpRequest, slug: str) -> HttpResponse:
    """Set the hours after the link at which candidates who have not started are reminded."""
    packet = get_object_or_404(Packet, slug=slug)
    try:
        hours = do_set_reminders(packet, request.POST.get("reminder_hours", ""), request.user)
    except ReminderError as exc:
        messages.error(request, f"{exc} The reminders were not changed.")
    else:
        messages.success(request, "Candidates who have not started are reminded "
                         f"{', '.join(map(str, hours))} hours after their link was sent." if hours
                         else "No reminders are sent for this packet.")
    return htmx_redirect(request, "takehome:packet-detail", slug=packet.slug)


@require_POST
@recruiter_required
def packet_reviewers(request: HttpRequest, slug: str) -> HttpResponse:
    """Set how many reviewers each graded submission of the packet is assigned."""
    packet = get_object_or_404(Packet, slug=slug)
    try:
        count = int(request.POST.get("reviewers_per_submission", ""))
        actions.do_set_reviewers_per_submission(packet, count, request.user)
    except (ValueError, actions.PacketError):
        messages.error(request, f"Reviewers per submission is a whole number from 1 to "
                                f"{MAX_REVIEWERS_PER_SUBMISSION}; nothing was changed.")
    else:
        messages.success(request, f"Each graded submission is assigned {counted(count, 'reviewer')}.")
    return htmx_redirect(request, "takehome:packet-detail", slug=packet.slug)


@require_POST
@recruiter_required
def packet_candidate_names(request: HttpRequest, slug: str) -> HttpResponse:
    """Show or hide candidate names from reviewers, for one packet."""
    packet = get_object_or_404(Packet, slug=slug)
    hidden = request.POST.get("hide") == "on"
    actions.do_set_candidate_names_hidden(packet, hidden)
    messages.success(
        request, "Reviewers now see candidate numbers, not names." if hidden else "Reviewers now see candidate names."
    )
    return htmx_redirect(request, "takehome:packet-detail", slug=packet.slug)


@require_http_methods(["GET", "POST"])
@recruiter_required
def packet_create(request: HttpRequest) -> HttpResponse:
    form = NewPacketForm(request.POST or None, request.FILES or None, owner=request.user)
    if request.method == "POST" and form.is_valid():
        content = form.content()
        if content is not None:
            try:
                packet = actions.do_create_packet(
                    form.cleaned_data["slug"], form.cleaned_data["title"], content, request.user
                )
            except actions.PacketError as exc:
                form.add_error(None, str(exc))
            else:
                form.forget_kept()
                messages.success(request, f"Packet {packet.title} created. Its self-check is running: "
                                          "it can be invited to once every check passes.")
                return redirect(packet)
    form.keep_uploads()
    return render(request, "takehome/packet_form.html", {"form": form, "packet": None})


@require_http_methods(["GET", "POST"])
@recruiter_required
def packet_edit(request: HttpRequest, slug: str) -> HttpResponse:
    packet = get_object_or_404(Packet, slug=slug)
    base = packet.latest_version()
    form = PacketVersionForm(request.POST or None, request.FILES or None, base=base, owner=request.user)
    if request.method == "POST" and form.is_valid():
        content = form.content()
        if content is not None:
            try:
                saved = actions.do_save_version(packet, content, request.user)
            except actions.PacketError as exc:
                form.add_error(None, str(exc))
            else:
                form.forget_kept()
                if not saved.created:
                    messages.info(request, unchanged_words(saved.version))
                else:
                    messages.success(
                        request,
                        f"Saved as version {saved.version.number}. Invitations already sent keep the version they "
                        "were given. Its self-check is running: it can be invited to once every check passes.",
                    )
                return redirect(packet)
    form.keep_uploads()
    return render(request, "takehome/packet_form.html", {"form": form, "packet": packet, "base": base})


def unchanged_words(version: PacketVersion) -> str:
    """What a save that changed nothing says: no version made, and how to check the latest again if need be."""
    words = f"Nothing changed since version {version.number}, so no new version was made."
    if version.state == PacketVersion.DRAFT:
        words += (f" Version {version.number} is still a draft: change what its self-check found, or run the "
                  "check again below (Run the self-check again) if it could not run.")
    return words


@require_http_methods(["GET", "POST"])
@recruiter_required
def packet_invite(request: HttpRequest, slug: str) -> HttpResponse:
    packet = get_object_or_404(Packet, slug=slug)
    latest = packet.latest_version()
    if latest is None:
        raise Http404("This packet has no version yet.")
    version = packet.invitable_version() or latest
    form = InviteForm(request.POST or None)
    refusal = version.refusal_to_invite()
    created = []
    if request.method == "POST" and form.is_valid():
        try:
            created = actions.do_invite_candidates(
                version, form.cleaned_data["lines"], request.user, send=form.cleaned_data["send_email"]
            )
        except actions.InviteError as exc:
            for message in exc.messages:
                form.add_error("lines", message)
        else:
            form = InviteForm()
    return render(
        request,
        "takehome/packet_invite.html",
        {"packet": packet, "version": version, "form": form, "created": created, "refusal": refusal,
         "passed_over": latest if latest != version else None},
    )


@require_GET
@vary_on_headers("HX-Request")
@recruiter_required
def invitation_board(request: HttpRequest, slug: str) -> HttpResponse:
    packet = get_object_or_404(Packet, slug=slug)
    page = paging.keyset_page(pages.board_invitations(packet), "created_at", True, BOARD_PAGE_SIZE, request.GET)
    template = "takehome/invitation_board.html"
    if request.htmx:
        template += "#invitation-rows"
    return render(request, template, {
        "packet": packet, "page": page, "rows": pages.board_rows(page.ids),
        "decision_choices": Decision.Choice.choices,
        # The first page polls its bare address, so a new invitation comes in; a later page keeps its place.
        "poll_query": "" if not page.has_previous else request.GET.urlencode(),
    })


@require_GET
@vary_on_headers("HX-Request")
@recruiter_required
def candidate_search(request: HttpRequest) -> HttpResponse:
    """Find a person across every packet by name or email, 25 a page by name; everyone when nothing is typed.

    why recruiters only: a person's invitations side by side (packets, outcomes,
    decisions) is the recruiter's view. Reviewers score one upload at a time,
    some packets hide names from them, and a list of everything one named person
    did would undo that; their queue and debrief are unchanged.
    """
    text = request.GET.get("q", "").strip()[: pages.SEARCH_MAX]
    page = paging.keyset_page(pages.candidate_search(text), "name", False, pages.CANDIDATE_PAGE_SIZE, request.GET)
    template = "takehome/candidate_list.html"
    if request.htmx and not request.htmx.history_restore_request:
        template += "#candidate-results"
    return render(request, template, {"q": text, "page": page, "rows": pages.candidate_rows(page.ids),
                                      "filters": urlencode({"q": text}) if text else ""})


@require_GET
@recruiter_required
def candidate_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One person's every invitation, to any packet, newest first, each as its row on the board reads it."""
    candidate = get_object_or_404(Candidate, pk=pk)
    page = paging.keyset_page(pages.person_invitations(candidate), "created_at", True, pages.PERSON_PAGE_SIZE,
                              request.GET)
    return render(request, "takehome/candidate_detail.html",
                  {"candidate": candidate, "page": page, "rows": pages.board_rows(page.ids)})


@require_GET
@recruiter_required
def invitation_on_board(request: HttpRequest, pk: int) -> HttpResponse:
    """The invitation's row on its packet's board, on the board's page that shows it (a person's page links here)."""
    return redirect(pages.board_url_for(_invitation(pk)))


def _back_to_board(request: HttpRequest, invitation: Invitation) -> HttpResponse:
    return htmx_redirect(request, pages.board_url_for(invitation))


def _invitation(pk: int) -> Invitation:
    return get_object_or_404(Invitation.objects.select_related("candidate", "packet_version__packet"), pk=pk)


@require_POST
@recruiter_required
def invitation_resend(request: HttpRequest, pk: int) -> HttpResponse:
    invitation = _invitation(pk)
    if invitation.revoked_at:
        messages.error(request, "This invitation was revoked; invite the candidate again instead.")
    else:
        actions.do_resend_invitation(invitation, request.user)
        messages.success(request, f"Sent the link to {invitation.candidate.email} again.")
    return _back_to_board(request, invitation)


@require_POST
@recruiter_required
def invitation_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    invitation = _invitation(pk)
    actions.do_revoke_invitation(invitation, request.user)
    messages.success(request, f"The link for {invitation.candidate.name} no longer works.")
    return _back_to_board(request, invitation)


@require_POST
@recruiter_required
def invitation_extend(request: HttpRequest, pk: int) -> HttpResponse:
    """Move a candidate's deadline later by a number of minutes."""
    invitation = _invitation(pk)
    form = ExtendDeadlineForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the extra time as a whole number of minutes, from 1 to 10080.")
    else:
        try:
            actions.do_extend_deadline(invitation, form.cleaned_data["minutes"], request.user)
        except actions.ExtendError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(
                request,
                f"{invitation.candidate.name} now has until {invitation.deadline:%Y-%m-%d %H:%M} UTC.",
            )
    return _back_to_board(request, invitation)


@require_POST
@recruiter_required
def invitation_decide(request: HttpRequest, pk: int) -> HttpResponse:
    """Record a recruiter's hiring decision (advance, decline, undecided) and note on one candidate."""
    invitation = _invitation(pk)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose advance, decline or undecided; a note is at most 2,000 characters. "
                       "Nothing was changed.")
    else:
        try:
            decision = actions.do_decide(invitation, form.cleaned_data["outcome"], form.cleaned_data["note"],
                                         request.user)
        except actions.DecisionError as exc:
            messages.error(request, f"{exc} Nothing was changed.")
        else:
            messages.success(request, f"Decision for {invitation.candidate.name}: {decision.get_choice_display()}.")
    if request.POST.get("back") == "debrief":
        return htmx_redirect(request, "grading:debrief-detail", slug=invitation.packet.slug)
    return _back_to_board(request, invitation)
