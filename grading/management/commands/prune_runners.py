from django.core.management.base import BaseCommand

from grading.runners import prune_runners
from shared.words import counted


class Command(BaseCommand):
    help = (
        "Remove the runner virtualenvs under TAKEHOME_RUNNERS_DIR that no packet version in use needs "
        "(in use: each packet's latest version, and any with a live invitation). One being built is left "
        "alone. An older version graded again later has its environment built again."
    )

    def handle(self, *args, **options):
        removed = prune_runners()
        for path in removed:
            self.stdout.write(f"removed {path}")
        self.stdout.write(f"{counted(len(removed), 'unused environment')} removed.")
