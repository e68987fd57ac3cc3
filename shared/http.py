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
