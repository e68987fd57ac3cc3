"""The candidate's side, behind the link. HTTP only."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from takehome.models import Invitation


def _invitation_or_invalid(token: str):
    return Invitation.objects.select_related("candidate", "packet_version__packet").by_token(token)


@require_GET
def landing(request: HttpRequest, token: str) -> HttpResponse:
    invitation = _invitation_or_invalid(token)
    if invitation is None:
        return render(request, "sessions_app/invalid_link.html", status=404)
    if invitation.opened_at is None:
        invitation.opened_at = timezone.now()
        invitation.save(update_fields=["opened_at"])
    return render(
        request,
        "sessions_app/session_detail.html",
        {"invitation": invitation, "version": invitation.packet_version, "token": token},
    )
