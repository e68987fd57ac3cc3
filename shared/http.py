"""HTTP helpers shared by the three apps."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, resolve_url
from django_htmx.http import HttpResponseClientRedirect


def htmx_redirect(request: HttpRequest, to: str, *args, **kwargs) -> HttpResponse:
    """Redirect so that htmx navigates the whole page instead of swapping a 302's body."""
    url = resolve_url(to, *args, **kwargs)
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect(url)
    return redirect(url)


def from_gate(request: HttpRequest) -> bool:
    """True for requests sent by gate.py (or any script asking for JSON).

    why this can skip CSRF: a page on another site cannot add a custom header
    to a cross-site request without a CORS preflight, which we never grant;
    and the token in the URL is itself a secret the attacker lacks.
    """
    return request.headers.get("X-Takehome-Client") == "gate"


def wants_json(request: HttpRequest) -> bool:
    accept = request.headers.get("Accept", "")
    return from_gate(request) or ("application/json" in accept and "text/html" not in accept)


# why: the site uses none of these; a script that got onto a page (or a page that frames nothing, as
# the CSP says) still cannot ask for a camera, a location or a payment. The terminal copies and pastes
# through the clipboard (static/sessions_app/terminal.js) and the replay player may go full screen,
# so neither is listed: both stay allowed for the site itself, as browsers default.
PERMISSIONS_POLICY = ", ".join(f"{feature}=()" for feature in (
    "accelerometer", "ambient-light-sensor", "autoplay", "bluetooth", "camera", "display-capture",
    "geolocation", "gyroscope", "hid", "idle-detection", "magnetometer", "microphone", "midi", "payment",
    "publickey-credentials-get", "screen-wake-lock", "serial", "usb", "xr-spatial-tracking",
))


class PermissionsPolicyMiddleware:
    """Adds Permissions-Policy to every response, so it holds behind any proxy."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        return response


# why in the session, popped when shown: a set-password link, a raw API token or a webhook's secret is a key to
# something; it is shown once, to the person who made it, on the page they land on, and never travels in a URL
# or a cookie.
SHOWN_ONCE_KEY = "shown-once"


def show_once(request: HttpRequest, what: str, value: str) -> None:
    """Keep a secret for the next page this person loads to show, once (take_shown_once)."""
    request.session[SHOWN_ONCE_KEY] = {"what": what, "value": value}


def take_shown_once(request: HttpRequest) -> dict | None:
    """What show_once kept ({"what", "value"}), gone from the session once taken; None when nothing is."""
    return request.session.pop(SHOWN_ONCE_KEY, None)
