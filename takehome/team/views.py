"""The Team page (team admins and staff), and the page a locked-out login sees. HTTP only; writes go through actions."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from shared.access import team_manager_required
from shared.http import htmx_redirect, show_once, take_shown_once

from . import actions
from .forms import ROLE_CHOICES, InviteMemberForm, MemberRolesForm
from .pages import member_rows

team_admin_required = team_manager_required("The Team page is for team admins.")


def _show_link_once(request: HttpRequest, member, link: str) -> None:
    show_once(request, f"Set-password link for {member.username}", link)


def _render_team(request: HttpRequest, form: InviteMemberForm | None = None) -> HttpResponse:
    return render(request, "takehome/team_list.html", {
        "rows": member_rows(request.user),
        "form": form or InviteMemberForm(),
        "role_choices": ROLE_CHOICES,
        "new_link": take_shown_once(request),
        "roles_claim": settings.OIDC_ROLES_CLAIM,
        "password_login": settings.PASSWORD_LOGIN,
        "provider_name": settings.OIDC_PROVIDER_NAME,
    })


@require_GET
@team_admin_required
def team_list(request: HttpRequest) -> HttpResponse:
    return _render_team(request)


@require_POST
@team_admin_required
def team_invite(request: HttpRequest) -> HttpResponse:
    form = InviteMemberForm(request.POST)
    if form.is_valid():
        try:
            new = actions.do_invite_member(form.cleaned_data["email"], [form.cleaned_data["role"]], request.user)
        except actions.TeamError as exc:
            form.add_error("email", str(exc))
        else:
            if settings.PASSWORD_LOGIN:
                messages.success(request, f"Invited {new.user.email} as {form.cleaned_data['role']}: "
                                          "they were emailed a link to set their password.")
                _show_link_once(request, new.user, new.link)
            else:
                messages.success(request, f"Invited {new.user.email} as {form.cleaned_data['role']}: they were "
                                          f"emailed to log in with {settings.OIDC_PROVIDER_NAME}.")
            return htmx_redirect(request, "team:list")
    return _render_team(request, form)  # 200: htmx does not swap 4xx


def _member(pk: int):
    return get_object_or_404(get_user_model().objects.prefetch_related("groups"), pk=pk)


@require_POST
@team_admin_required
def member_roles(request: HttpRequest, pk: int) -> HttpResponse:
    member = _member(pk)
    form = MemberRolesForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose roles among: " + ", ".join(actions.ROLES) + ". Nothing was changed.")
    else:
        roles = actions.do_set_roles(member, form.cleaned_data["roles"], request.user)
        messages.success(request, f"{member.username} is now: {', '.join(roles) or 'no role'}.")
    return htmx_redirect(request, "team:list")


@require_POST
@team_admin_required
def member_deactivate(request: HttpRequest, pk: int) -> HttpResponse:
    member = _member(pk)
    try:
        actions.do_deactivate_member(member, request.user)
    except actions.TeamError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{member.username} can no longer log in. Their work stays.")
    return htmx_redirect(request, "team:list")


@require_POST
@team_admin_required
def member_reactivate(request: HttpRequest, pk: int) -> HttpResponse:
    member = _member(pk)
    actions.do_reactivate_member(member, request.user)
    messages.success(request, f"{member.username} can log in again.")
    return htmx_redirect(request, "team:list")


@require_POST
@team_admin_required
def member_send_link(request: HttpRequest, pk: int) -> HttpResponse:
    """Email a member a fresh set-password link (an invitation lost, a password forgotten)."""
    member = _member(pk)
    if not settings.PASSWORD_LOGIN:
        messages.error(request, f"Password login is off here: {member.username} logs in with "
                                f"{settings.OIDC_PROVIDER_NAME}, and needs no password.")
    elif not member.is_active:
        messages.error(request, f"{member.username} is deactivated; reactivate them first.")
    elif not member.email:
        messages.error(request, f"{member.username} has no email address to send a link to.")
    else:
        link = actions.send_set_password_email(member, invited_by=request.user)
        messages.success(request, f"Emailed {member.email} a link to set their password.")
        _show_link_once(request, member, link)
    return htmx_redirect(request, "team:list")


def locked_out(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """What a login sees after too many failures (django-axes calls this): when to try again, as a page."""
    minutes = settings.LOGIN_LOCKOUT_MINUTES
    until = timezone.now() + timedelta(minutes=minutes)
    return render(request, "registration/locked_out.html",
                  {"until": until, "minutes": minutes, "failure_limit": settings.AXES_FAILURE_LIMIT},
                  status=429)
