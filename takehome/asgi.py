"""ASGI entry point (daphne takehome.asgi:application): the pages over HTTP and the hosted terminal's WebSocket."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "takehome.settings")
# why first: the Django app must be set up before the consumers import models.
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path  # noqa: E402

from sessions_app.hosted.consumers import TerminalConsumer  # noqa: E402
from shared.request_start import install_daphne_hook  # noqa: E402

# why: uploads are judged by when their request began, which only daphne sees (shared/request_start.py)
install_daphne_hook()

websocket_urls = [path("t/<str:token>/terminal", TerminalConsumer.as_asgi(), name="terminal")]

# AllowedHostsOriginValidator: a page on another site cannot open a candidate's terminal
# (the Origin header must be one of ALLOWED_HOSTS, as Host is for HTTP).
application = ProtocolTypeRouter({
    "http": django_asgi_app,
    "websocket": AllowedHostsOriginValidator(URLRouter(websocket_urls)),
})
