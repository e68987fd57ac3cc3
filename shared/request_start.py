"""When a request began: the moment its request line reached this server, before its body.

Uploads are judged by it (sessions_app.views.upload): one that began before
uploads closed is not refused because its body was still arriving. Nothing
the client sends can set it: under daphne it is taken when the request line
is read (``install_daphne_hook``) and handed on in the ASGI scope under a key
no header can produce; under WSGI (runserver, the test servers) the body is
read only when the view asks for it, so the view's own start is early enough.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from django.http import HttpRequest
from django.utils import timezone

SCOPE_KEY = "takehome.request_began"


def request_began(request: HttpRequest) -> datetime:
    """When ``request`` began on this server; now when the server did not say (its body is not read yet)."""
    scope = getattr(request, "scope", None)
    began = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    now = timezone.now()
    if not isinstance(began, float):
        return now
    # why min: a moment in the future is never a request's start, whatever went wrong
    return min(datetime.fromtimestamp(began, UTC), now)


def install_daphne_hook() -> None:
    """Stamp each daphne request when its request line is read, and put the stamp in its ASGI scope.

    why here: daphne hands a request to the application only once its whole
    body has arrived, so the application alone cannot tell a slow upload that
    began in time from one that began late. Twisted builds the request object
    when the request line arrives; the scope is built from it later, by the
    request's server (``create_application``).

    why the server object, not its class: daphne's own test process imports
    ``daphne.server`` afresh after forking (a new ``Server`` class, unhooked), and
    this module's import is not repeated there. The request class is never
    imported twice, so each request wraps its server, once, as it is made.
    """
    try:
        from daphne import http_protocol
    except ImportError:  # served without daphne: nothing to hook
        return
    request_class = http_protocol.WebRequest
    if getattr(request_class, "_takehome_hooked", False):
        return
    original_init = request_class.__init__

    def __init__(self, *args, **kwargs):
        self._takehome_began = time.time()
        original_init(self, *args, **kwargs)
        server = getattr(self, "server", None)
        if server is not None and not getattr(server, "_takehome_stamps", False):
            _stamp_scopes(server)

    request_class.__init__ = __init__
    request_class._takehome_hooked = True


def _stamp_scopes(server) -> None:
    """Make ``server`` put each request's stamp into the scope it builds for the application."""
    original = server.create_application

    def create_application(protocol, scope):
        began = getattr(protocol, "_takehome_began", None)
        if isinstance(began, float) and scope.get("type") == "http":
            scope[SCOPE_KEY] = began
        return original(protocol, scope)

    server.create_application = create_application
    server._takehome_stamps = True
