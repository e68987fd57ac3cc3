from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The API and the webhooks: above every other app, which announce their events with signals."""

    name = "api"
    verbose_name = "API and webhooks"

    def ready(self) -> None:
        from takehome.audit import register_actions

        from . import events

        register_actions(events.AUDIT_ACTIONS)
        events.connect()
