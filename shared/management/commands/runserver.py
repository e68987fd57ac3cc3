"""``manage.py runserver``: daphne's, serving the ASGI application (the hosted terminal's WebSockets too) and,
as staticfiles' does, the static files. Listed through this app rather than by "daphne" in INSTALLED_APPS,
so that Twisted is imported by this command alone (see the settings' INSTALLED_APPS)."""

from daphne.management.commands.runserver import Command

__all__ = ["Command"]
