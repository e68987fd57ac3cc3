import json

from django.core.management.base import BaseCommand, CommandError

from shared import health


class Command(BaseCommand):
    help = (
        "Run the readiness checks /readyz runs (the database, the broker, a worker's heartbeat, this host's "
        "serve_workspaces where workspaces are hosted), or only those named; print each with its state and "
        "reason. Exits 0 when every one passes, 1 otherwise."
    )
    # why: the system checks (the sandbox's, on a web host) are not readiness, and a healthcheck runs this often
    requires_system_checks: list[str] = []

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", metavar="CHECK",
                            help=f"only these checks: {', '.join(health.check_names())}")
        parser.add_argument("--json", action="store_true", help="print what /readyz answers instead")

    def handle(self, *args, **options):
        unknown = sorted(set(options["names"]) - set(health.check_names()))
        if unknown:
            raise CommandError(f"No check called {', '.join(unknown)}: use {', '.join(health.check_names())}.",
                               returncode=2)
        result = health.readiness(options["names"])
        if options["json"]:
            self.stdout.write(json.dumps(result.as_json(), indent=2))
        else:
            width = max(len(check.name) for check in result.checks)
            for check in result.checks:
                self.stdout.write(f"{check.name:<{width}}  {check.state:<7}  {check.reason}")
        if not result.ready:
            failing = [check.name for check in result.checks if not check.passed]
            raise CommandError(f"Not ready: {', '.join(failing)}.", returncode=1)
        if not options["json"]:
            self.stdout.write("Ready.")
