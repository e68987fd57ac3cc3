from django.apps import AppConfig
from django.db.models.signals import post_delete

# The rows the packet's funnel counts (takehome.funnel): a deletion of any has it counted again.
FUNNEL_ROWS = ("takehome.Invitation", "takehome.Decision", "sessions_app.Submission", "sessions_app.GateReceipt",
               "sessions_app.ModelExchange", "grading.Review")


class TakehomeConfig(AppConfig):
    name = "takehome"
    verbose_name = "Recruiting"

    def ready(self) -> None:
        from . import funnel

        for label in FUNNEL_ROWS:
            post_delete.connect(funnel.forget_all, sender=label, dispatch_uid=f"funnel-forget-{label}")
