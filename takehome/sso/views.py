"""The login page, a sign-in through the provider (its start and its callback), and logging out. HTTP only."""

from __future__ import annotations

import logging
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import login as auth_login
from django.contrib.auth import views as auth_views
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render, resolve_url
from django.urls import reverse
from django.views.decorators.http import require_GET
from django.views.generic import View
from mozilla_django_oidc.views import OIDCAuthenticationRequestView

from . import provider
from .backend import SignOnBackend, SignOnRefused

log = logging.getLogger(__name__)

BACKEND = "takehome.sso.backend.SignOnBackend"


def sign_on_context() -> dict:
    """What the login page shows: the sign-on button (and its provider's name), the password form."""
    return {"sso": settings.OIDC_ENABLED, "provider_name": settings.OIDC_PROVIDER_NAME,
            "password_login": settings.PASSWORD_LOGIN}


class LoginView(auth_views.LoginView):
    """Django's login page with the sign-on button; with password login off, the button alone."""

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), **sign_on_context()}

    def post(self, request, *args, **kwargs):
        if not settings.PASSWORD_LOGIN:
            # why before the form: no password is looked at, nor counted by the lockout, when none may be used.
            log.warning("a password login was refused: password login is off (TAKEHOME_PASSWORD_LOGIN=false)")
            return self.render_to_response(self.get_context_data(password_refused=True), status=403)
        return super().post(request, *args, **kwargs)


def admin_login(request: HttpRequest) -> HttpResponse:
    """The admin's login: its own password form while password login is on, else this site's login page."""
    if settings.PASSWORD_LOGIN:
        return admin.site.login(request)
    return auth_views.redirect_to_login(request.GET.get("next") or reverse("admin:index"))


def _failed(request: HttpRequest, message: str, status: int) -> HttpResponse:
    return render(request, "registration/sso_failed.html",
                  {"message": message, **sign_on_context()}, status=status)


class SignOnStart(OIDCAuthenticationRequestView):
    """Send the browser to the provider, with a fresh state, nonce and PKCE challenge kept in the session."""

    def __init__(self, **kwargs):
        # why not the parent's: it reads the endpoint from the settings when built; ours may be discovered.
        View.__init__(self, **kwargs)

    def get(self, request):
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is not set up here.")
        try:
            points = provider.endpoints()
        except provider.ProviderUnavailable as exc:
            log.error("single sign-on could not start: %s", exc)
            return _failed(request, "The identity provider could not be reached, so nobody can sign on just "
                                    "now. Try again in a minute; if it lasts, tell your administrator.", 502)
        self.OIDC_OP_AUTH_ENDPOINT = points.authorization
        self.OIDC_RP_CLIENT_ID = settings.OIDC_CLIENT_ID
        return super().get(request)


@require_GET
def sign_on_callback(request: HttpRequest) -> HttpResponse:
    """Where the provider sends the browser back: check the answer, sign the person on, send them on."""
    if not settings.OIDC_ENABLED:
        raise Http404("Single sign-on is not set up here.")
    states = request.session.get("oidc_states") or {}
    state = request.GET.get("state", "")
    started = states.pop(state, None) if state else None
    # why saved now: each state works once, so an answer replayed (or sent twice) finds none.
    request.session["oidc_states"] = states
    if request.GET.get("error"):
        log.info("single sign-on: the provider answered %s (%s)", request.GET["error"],
                 request.GET.get("error_description", ""))
        return _failed(request, "Your identity provider did not sign you in "
                                f"({request.GET.get('error_description') or request.GET['error']}).", 400)
    if started is None or not request.GET.get("code"):
        # why: an answer for a sign-in this browser did not start is how a login is forced on someone.
        log.warning("single sign-on refused: an answer whose state this session did not start")
        return _failed(request, "This answer from the identity provider does not belong to a sign-in started "
                                "in this browser (or it was used already), so nobody was signed in. Start again "
                                "from the login page.", 400)
    backend = SignOnBackend()
    try:
        user = backend.authenticate(request, sso_nonce=started["nonce"],
                                    sso_code_verifier=started.get("code_verifier"))
    except SuspiciousOperation as exc:
        log.warning("single sign-on refused: %s", exc)
        return _failed(request, "The identity provider's answer could not be verified, so nobody was signed "
                                "in. Start again from the login page; if it happens again, tell your "
                                "administrator.", 400)
    except SignOnRefused as exc:
        return _failed(request, str(exc), 403)
    except requests.HTTPError as exc:
        log.warning("single sign-on: the provider refused the code: %s", exc)
        return _failed(request, "The identity provider refused to finish the sign-in, so nobody was signed "
                                "in. Start again from the login page.", 400)
    except (provider.ProviderUnavailable, requests.RequestException) as exc:
        log.error("single sign-on: the provider could not be reached: %s", exc)
        return _failed(request, "The identity provider could not be reached, so nobody was signed in. Try "
                                "again in a minute; if it lasts, tell your administrator.", 502)
    if user is None:
        return _failed(request, "Nobody was signed in. Start again from the login page.", 400)
    next_url = request.session.get("oidc_login_next")
    auth_login(request, user, backend=BACKEND)
    request.session["oidc_id_token"] = backend.id_token
    return redirect(next_url or resolve_url(settings.LOGIN_REDIRECT_URL))


class LogoutView(auth_views.LogoutView):
    """Log out here; a person who signed on is sent on to end their provider session too, when it has an
    end-session endpoint, and comes back to the login page."""

    def post(self, request, *args, **kwargs):
        id_token = request.session.get("oidc_id_token")
        response = super().post(request, *args, **kwargs)
        if not (id_token and settings.OIDC_ENABLED):
            return response
        try:
            end_session = provider.endpoints().end_session
        except provider.ProviderUnavailable as exc:
            log.warning("logged out here only: %s", exc)
            return response
        if not end_session:
            return response
        back = request.build_absolute_uri(reverse("login"))
        query = urlencode({"id_token_hint": id_token, "post_logout_redirect_uri": back,
                           "client_id": settings.OIDC_CLIENT_ID})
        return redirect(f"{end_session}{'&' if '?' in end_session else '?'}{query}")
