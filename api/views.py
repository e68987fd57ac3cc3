"""The account page (personal API tokens) and the webhooks page (the team's endpoints). HTTP only; writes go
through api.actions."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from shared.access import desk_required, team_manager_required
from shared.http import htmx_redirect, show_once, take_shown_once

from . import actions, signing
from .forms import EndpointForm, TokenForm
from .models import ApiToken, WebhookDelivery, WebhookEndpoint

DELIVERIES_SHOWN = 20  # per endpoint, newest first


def _render_account(request: HttpRequest, form: TokenForm | None = None) -> HttpResponse:
    return render(request, "api/account.html", {
        "tokens": ApiToken.objects.filter(user=request.user),
        "form": form or TokenForm(),
        "shown_once": take_shown_once(request),
    })


@require_GET
@desk_required
def account(request: HttpRequest) -> HttpResponse:
    return _render_account(request)


@require_POST
@desk_required
def token_create(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _render_account(request, form)  # 200: htmx does not swap 4xx
    new = actions.do_create_token(request.user, form.cleaned_data["name"], form.cleaned_data["scope"])
    show_once(request, f"Your new token {new.token.name!r}", new.raw)
    messages.success(request, f"Token {new.token.prefix}… made. Copy it now: it is not shown again.")
    return htmx_redirect(request, "api:account")


@require_POST
@desk_required
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)  # why user: only one's own tokens
    if actions.do_revoke_token(token, request.user):
        messages.success(request, f"Token {token.prefix}… revoked: it is refused from now on.")
    else:
        messages.info(request, f"Token {token.prefix}… was revoked already; nothing changed.")
    return htmx_redirect(request, "api:account")


webhooks_manager_required = team_manager_required("Webhooks are managed by team admins.")


def _render_webhooks(request: HttpRequest, form: EndpointForm | None = None) -> HttpResponse:
    endpoints = list(WebhookEndpoint.objects.select_related("created_by"))
    for endpoint in endpoints:
        endpoint.recent = list(WebhookDelivery.objects.filter(endpoint=endpoint)[:DELIVERIES_SHOWN])
    return render(request, "api/webhook_list.html", {
        "endpoints": endpoints,
        "form": form or EndpointForm(),
        "shown_once": take_shown_once(request),
    })


@require_GET
@webhooks_manager_required
def webhook_list(request: HttpRequest) -> HttpResponse:
    return _render_webhooks(request)


@require_POST
@webhooks_manager_required
def webhook_create(request: HttpRequest) -> HttpResponse:
    form = EndpointForm(request.POST)
    if form.is_valid():
        try:
            new = actions.do_register_endpoint(form.cleaned_data["url"], form.cleaned_data["events"],
                                               form.cleaned_data["description"], request.user)
        except signing.RefusedAddress as exc:
            form.add_error("url", str(exc))
        else:
            show_once(request, f"The signing secret of {new.endpoint.url}", new.secret)
            messages.success(request, f"Endpoint {new.endpoint.url} registered. Copy its secret now: it is not "
                                      "shown again.")
            return htmx_redirect(request, "api:webhook-list")
    return _render_webhooks(request, form)  # 200: htmx does not swap 4xx


@require_POST
@webhooks_manager_required
def webhook_test(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = get_object_or_404(WebhookEndpoint, pk=pk)
    actions.do_send_test_event(endpoint, request.user)
    messages.success(request, f"A test event is on its way to {endpoint.url}; its answer appears in the log below.")
    return htmx_redirect(request, "api:webhook-list")


@require_POST
@webhooks_manager_required
def webhook_remove(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = get_object_or_404(WebhookEndpoint, pk=pk)
    url = endpoint.url
    actions.do_remove_endpoint(endpoint, request.user)
    messages.success(request, f"Endpoint {url} removed, with its delivery log.")
    return htmx_redirect(request, "api:webhook-list")
