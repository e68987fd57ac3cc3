from django.core.management.base import BaseCommand, CommandError

from grading.runners import build_runners


class Command(BaseCommand):
    help = (
        "Build the runner virtualenv of every packet version in use (each packet's latest, and any with a "
        "live invitation): one per (Python, requirements), under TAKEHOME_RUNNERS_DIR, with pip from the "
        "configured index. Those already built are left as they are. A worker also builds a missing one at "
        "start and before grading. Exit 1 if any could not be built, saying which and why."
    )

    def handle(self, *args, **options):
        built = build_runners()
        for line in built.ready:
            self.stdout.write(f"ready  {line}")
        for line in built.failed:
            self.stderr.write(f"failed {line}")
        if built.failed:
            raise CommandError(f"{len(built.failed)} of {len(built.ready) + len(built.failed)} environments "
                               "could not be built (see above).")
