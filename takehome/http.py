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
