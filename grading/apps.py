from django.apps import AppConfig
from django.db.models.signals import post_delete


class GradingConfig(AppConfig):
    name = "grading"
    verbose_name = "Grading"

    def ready(self) -> None:
        from sessions_app.signals import submission_stored
        from shared import health
        from takehome import funnel
        from takehome.signals import board_rows_read, funnel_facts_read

        from . import system_checks  # noqa: F401  (registers the sandbox's checks)
        from .health import workers_alive
        from .lifecycle import upload_stored
        from .outcomes import FUNNEL_ROWS, fill_board_rows, funnel_facts

        submission_stored.connect(upload_stored, dispatch_uid="grading-upload-stored")
        board_rows_read.connect(fill_board_rows, dispatch_uid="grading-board-rows")
        funnel_facts_read.connect(funnel_facts, dispatch_uid="grading-funnel-facts")
        health.register("workers", workers_alive)
        for label in FUNNEL_ROWS:
            post_delete.connect(funnel.forget_all, sender=label, dispatch_uid=f"funnel-forget-{label}")
