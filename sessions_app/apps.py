from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Candidate sessions"

    def ready(self) -> None:
        from shared import backup, health
        from takehome.signals import invitation_revoked

        from .hosted import backup as hosted_backup
        from .hosted import gate_host
        from .hosted.consumers import close_revoked_terminals

        invitation_revoked.connect(close_revoked_terminals, dispatch_uid="hosted-close-revoked-terminals")
        health.register("workspaces", gate_host.readiness)
        backup.register(hosted_backup.PART)
