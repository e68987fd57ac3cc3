from django.apps import AppConfig


class GradingConfig(AppConfig):
    name = "grading"
    verbose_name = "Grading"

    def ready(self) -> None:
        from sessions_app.signals import submission_stored

        from . import system_checks  # noqa: F401  (registers the sandbox's checks)
        from .lifecycle import upload_stored

        submission_stored.connect(upload_stored, dispatch_uid="grading-upload-stored")
