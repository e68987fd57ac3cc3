from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from grading.engine.runner import RunnerUnavailable, ensure_runner


class Command(BaseCommand):
    # why none: the checks would warn that the runner is missing, the very thing this builds.
    requires_system_checks = []

    help = (
        "Build the sandbox's runner virtualenv (pinned pytest, from Debian's python3) where the "
        "settings say (TAKEHOME_RUNNER_DIR). Does nothing if it is already current. make run and "
        "make test call it; a worker also builds it on first use."
    )

    def handle(self, *args, **options):
        try:
            path = ensure_runner(settings.GRADING_RUNNER_DIR)
        except RunnerUnavailable as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Runner ready: {path}")
