from django.apps import AppConfig


class GradingConfig(AppConfig):
    name = "grading"
    verbose_name = "Grading"

    def ready(self) -> None:
        from . import system_checks  # noqa: F401  (registers the sandbox's checks)
