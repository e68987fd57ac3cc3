from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Candidate sessions"

    def ready(self) -> None:
        from takehome.signals import invitation_revoked

        from .hosted.consumers import close_revoked_terminals

        invitation_revoked.connect(close_revoked_terminals, dispatch_uid="hosted-close-revoked-terminals")
