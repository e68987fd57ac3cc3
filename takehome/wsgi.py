"""WSGI entry point, for a WSGI server of your own: pages only, no hosted terminal (that needs takehome.asgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "takehome.settings")
application = get_wsgi_application()
