"""The REST API (django-ninja), under /api/v1/: personal tokens, the same access rules and actions as the pages.

Every answer that is not a success has one shape, ``{"error": {"code": ..., "message": ..., "details": [...]}}``,
whatever refused it: the token (401), its scope or its user's roles (403), a missing row (404), a
conflict with what exists (409), an input that cannot be used (400, 422), the rate limit (429, with
Retry-After), a method the address does not take (405). The schema is served at /api/v1/openapi.json and read at /api/v1/docs.
"""

from __future__ import annotations

from datetime import datetime
from functools import wraps
from typing import Literal

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404
from ninja import NinjaAPI, Schema, Status
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import HttpBearer
from pydantic import Field

from shared.access import RECRUITER_GROUP, REVIEWER_GROUP, in_group
from takehome import actions as recruiter_actions
from takehome.invites import rows_from_pairs
from takehome.models import Invitation, Packet, hash_token

from . import actions
from .models import ApiToken
from .ratelimit import over_limit
from .reading import invitation_row, invitation_state

READ_METHODS = ("GET", "HEAD", "OPTIONS")


class ApiError(Exception):
    """A refusal in the API's one error shape; ``retry_after`` adds that header (429)."""

    def __init__(self, status: int, code: str, message: str, details: list | None = None,
                 retry_after: int | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.details, self.retry_after = (
            status, code, message, details or [], retry_after)


class TokenAuth(HttpBearer):
    """``Authorization: Bearer thk_...``: a live token, within the per-token limit and its scope; each use audited."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken:
        found = (ApiToken.objects.select_related("user").filter(token_hash=hash_token(token)).first()
                 if token.startswith(actions.TOKEN_PREFIX) and len(token) < 100 else None)
        if found is None:
            raise ApiError(401, "invalid_token", "The token is not known. Send Authorization: Bearer thk_….")
        what = f"{request.method} {request.path}"
        wait = over_limit(found.pk)
        if wait is not None:
            raise ApiError(429, "rate_limited", f"This token made too many requests this minute; try again in "
                                                f"{wait} s.", retry_after=wait)
        if found.revoked_at is not None:
            actions.note_token_use(found, f"{what}: refused, the token is revoked")
            raise ApiError(401, "token_revoked", "This token was revoked; make a new one on your account page.")
        if not found.user.is_active:
            actions.note_token_use(found, f"{what}: refused, the account is deactivated")
            raise ApiError(401, "account_inactive", "The token's account is deactivated.")
        if request.method not in READ_METHODS and not found.writes:
            actions.note_token_use(found, f"{what}: refused, the token is read-only")
            raise ApiError(403, "read_only_token", "This token may only read; make a read-and-write token to "
                                                   "change anything.")
        actions.note_token_use(found, what)
        return found


api = NinjaAPI(
    title="takehome API",
    version="1",
    description="Packets, invitations, outcomes, reviews and decisions, with a personal token "
                "(your account page). Errors: {\"error\": {\"code\", \"message\", \"details\"}}.",
    urls_namespace="api-v1",
    auth=TokenAuth(),
)


def error_response(request: HttpRequest, status: int, code: str, message: str, details: list | None = None,
                   retry_after: int | None = None) -> HttpResponse:
    response = api.create_response(request, {"error": {"code": code, "message": message, "details": details or []}},
                                   status=status)
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


@api.exception_handler(ApiError)
def _api_error(request, exc: ApiError):
    return error_response(request, exc.status, exc.code, exc.message, exc.details, exc.retry_after)


@api.exception_handler(AuthenticationError)
def _no_token(request, exc):
    return error_response(request, 401, "missing_token", "Send a personal API token: Authorization: Bearer thk_….")


@api.exception_handler(ValidationError)
def _invalid(request, exc: ValidationError):
    details = [{"where": ".".join(str(p) for p in e.get("loc", ())), "message": e.get("msg", "")} for e in exc.errors]
    return error_response(request, 422, "invalid_input", "The request does not match the schema; see details.",
                          details)


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    return error_response(request, exc.status_code, "bad_request" if exc.status_code == 400 else "error", str(exc))


@api.exception_handler(Http404)
def _not_found(request, exc):
    return error_response(request, 404, "not_found", str(exc) or "Not found.")


@api.exception_handler(PermissionDenied)
def _forbidden(request, exc):
    return error_response(request, 403, "forbidden", str(exc) or "Your account may not do this.")


def _in_error_shape(view):
    """The view, with django-ninja's plain-text 405 (a method the path does not take) in the API's error shape."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        if isinstance(response, HttpResponseNotAllowed):
            shaped = error_response(request, 405, "method_not_allowed",
                                    f"{request.method} is not taken here; this address takes {response['Allow']}.")
            shaped["Allow"] = response["Allow"]
            return shaped
        return response

    return wrapped


def urls():
    """The API's URL patterns (``path("api/v1/", endpoints.urls())``), every answer in the API's shape."""
    patterns, app_name, namespace = api.urls
    for pattern in patterns:
        pattern.callback = _in_error_shape(pattern.callback)
    return patterns, app_name, namespace


def not_found_view(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any other address under /api/v1/: a 404 in the API's shape, not the site's page."""
    return error_response(request, 404, "not_found", f"No such API address: {request.path}")


# --- who may do what: the pages' rules (shared.access) ----------------------------------------


def _desk(request) -> None:
    user = request.auth.user
    if not (in_group(user, RECRUITER_GROUP) or in_group(user, REVIEWER_GROUP)):
        raise PermissionDenied("This is for the reviewer and recruiter groups.")


def _recruiter(request) -> None:
    if not in_group(request.auth.user, RECRUITER_GROUP):
        raise PermissionDenied("This is for the recruiter group.")


# --- schemas ----------------------------------------------------------------------------------


class ErrorBody(Schema):
    code: str
    message: str
    details: list = []


class ErrorOut(Schema):
    error: ErrorBody


class PacketOut(Schema):
    slug: str
    title: str
    latest_version: int | None
    invitable_version: int | None = Field(description="The version new invitations go to; null: none may be.")


class CandidateIn(Schema):
    name: str = Field(max_length=200)
    email: str = Field(max_length=254)


class InvitationsIn(Schema):
    packet: str = Field(description="The packet's slug.")
    candidates: list[CandidateIn] = Field(min_length=1, max_length=500)
    send_email: bool = Field(False, description="Email each candidate their link, as the invite page can.")


class CandidateOut(Schema):
    name: str
    email: str


class NewInvitationOut(Schema):
    id: int
    candidate: CandidateOut
    link: str = Field(description="The candidate's link: send it, or set send_email.")


class OutcomeOut(Schema):
    submission_id: int
    status: str
    uploaded_at: datetime
    reviews_submitted: int
    reviewers_disagree: bool


class MarkOut(Schema):
    passed: bool
    note: str


class ReviewOut(Schema):
    id: int
    reviewer: str
    submitted_at: datetime
    marks: dict[str, MarkOut] = Field(description="The rubric's cells side by side; never summed.")


class DecisionOut(Schema):
    choice: str
    note: str
    decided_by: str | None
    decided_at: datetime


class InvitationOut(Schema):
    id: int
    packet: str
    version: int
    candidate: CandidateOut
    status: str
    phase: str
    created_at: datetime
    started_at: datetime | None
    deadline: datetime | None
    submitted_at: datetime | None
    revoked_at: datetime | None
    outcome: OutcomeOut | None
    refused_uploads: int
    decision: DecisionOut | None
    reviews: list[ReviewOut]


class DecisionIn(Schema):
    choice: Literal["advance", "decline", "undecided"]
    note: str = Field("", max_length=2000)


ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 422: ErrorOut, 429: ErrorOut}


# --- endpoints --------------------------------------------------------------------------------


@api.get("/packets", response={200: list[PacketOut], **ERRORS}, summary="List packets")
def list_packets(request):
    """Every packet the token's user may see (reviewers and recruiters see them all), by title."""
    _desk(request)
    rows = []
    for packet in Packet.objects.prefetch_related("versions"):
        versions = sorted(packet.versions.all(), key=lambda v: -v.number)
        invitable = next((v for v in versions if v.refusal_to_invite() is None), None)
        rows.append({"slug": packet.slug, "title": packet.title,
                     "latest_version": versions[0].number if versions else None,
                     "invitable_version": invitable.number if invitable else None})
    return rows


@api.post("/invitations", response={201: list[NewInvitationOut], **ERRORS}, summary="Invite candidates")
def create_invitations(request, body: InvitationsIn):
    """Invite one or many candidates to a packet, all or none, as the invite page does; returns their links."""
    _recruiter(request)
    packet = get_object_or_404(Packet, slug=body.packet)
    latest = packet.latest_version()
    if latest is None:
        raise ApiError(409, "no_version", "This packet has no version yet.")
    version = packet.invitable_version() or latest
    rows, problems = rows_from_pairs([(c.name, c.email) for c in body.candidates])
    if problems:
        raise ApiError(422, "invalid_candidates", "Some candidates cannot be invited; nothing was created.",
                       [{"where": f"candidates.{p.line - 1}", "message": p.message} for p in problems])
    try:
        created = recruiter_actions.do_invite_candidates(version, rows, request.auth.user, send=body.send_email)
    except recruiter_actions.InviteError as exc:
        raise ApiError(409, "not_invited", "No invitation was created.",
                       [{"message": m} for m in exc.messages]) from exc
    return Status(201, [{"id": new.invitation.pk, "link": new.link,
                         "candidate": {"name": new.invitation.candidate.name, "email": new.invitation.candidate.email}}
                        for new in created])


@api.get("/invitations/{invitation_id}", response={200: InvitationOut, **ERRORS}, summary="Read an invitation")
def read_invitation(request, invitation_id: int):
    """An invitation's state and clock, what came back (the upload under review and its grading), the
    submitted reviews of that upload, and the decision."""
    _recruiter(request)
    return invitation_state(invitation_row(invitation_id))


@api.post("/invitations/{invitation_id}/decision", response={200: InvitationOut, **ERRORS},
          summary="Record a decision")
def record_decision(request, invitation_id: int, body: DecisionIn):
    """Advance, decline or undecided, with a note, as the board's decision form records it."""
    _recruiter(request)
    invitation = get_object_or_404(Invitation.objects.select_related("candidate"), pk=invitation_id)
    try:
        recruiter_actions.do_decide(invitation, body.choice, body.note, request.auth.user)
    except recruiter_actions.DecisionError as exc:
        raise ApiError(409, "no_decision", str(exc)) from exc
    return invitation_state(invitation_row(invitation_id))

