from django.core.management.base import BaseCommand

from grading.actions import do_rebuild_agreement


class Command(BaseCommand):
    help = (
        "Rebuild the reviewers' agreement tally (the debrief's agreement figures) from every "
        "submitted review. Reviews keep it up to date as they are submitted; run this after "
        "deleting reviews or submissions by hand. Safe to run at any time."
    )

    def handle(self, *args, **options):
        rows = do_rebuild_agreement()
        self.stdout.write(f"Rebuilt the agreement tally: {rows} rows (one per packet, reviewer pair and cell).")
