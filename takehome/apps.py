from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate

# The recruiter's rows the packet's funnel counts (takehome.funnel): a deletion of any has it counted again.
# The rooms after it connect their own rows (grading.apps).
FUNNEL_ROWS = ("takehome.Invitation", "takehome.Decision")


class TakehomeConfig(AppConfig):
    name = "takehome"
    verbose_name = "Recruiting"

    def ready(self) -> None:
        from . import funnel

        for label in FUNNEL_ROWS:
            post_delete.connect(funnel.forget_all, sender=label, dispatch_uid=f"funnel-forget-{label}")
        # why after migrate: a packet from before the tally is counted once there, not by the first page to read it.
        post_migrate.connect(funnel.build_missing, sender=self, dispatch_uid="funnel-build-missing")
