from django.core.management.base import BaseCommand, CommandError

from grading.engine.sandbox import SandboxUnavailable
from takehome.actions import do_check_version_now
from takehome.management.lookup import packet_version
from takehome.models import PacketCheck


class Command(BaseCommand):
    help = (
        "Run a packet version's self-check in the sandbox, here and now: the fixture's tests fail, the hidden "
        "tests fail on the fixture and pass on the solution, every decoy fails them. Prints each check and "
        "stores the outcome (publishing the version when all pass). Exits 0 only when all pass."
    )

    def add_arguments(self, parser):
        # why: --version is Django's own (it prints Django's version); here it picks the packet version.
        parser.conflict_handler = parser._optionals.conflict_handler = "resolve"
        parser.add_argument("slug", help="packet slug, e.g. refund-sum")
        parser.add_argument("--version", type=int, dest="number", help="version number (default: the latest)")
        parser.add_argument("--logs", action="store_true", help="print each failing check's log too")

    def handle(self, *args, **options):
        packet, version = packet_version(options["slug"], options["number"])
        try:
            check = do_check_version_now(version)
        except SandboxUnavailable as exc:
            raise CommandError(f"The sandbox cannot run on this machine: {exc}") from exc
        for result in check.results:
            mark = "PASS" if result["passed"] else "FAIL"
            self.stdout.write(f"{mark}  {result['title']}: {result['summary']}")
            if options["logs"] and not result["passed"] and result["log"]:
                self.stdout.write(result["log"])
        if check.status == PacketCheck.Status.ERROR:
            raise CommandError(check.error)
        if check.status != PacketCheck.Status.PASSED:
            raise CommandError(f"{version} is a draft: fix the failing checks with a new version.")
        self.stdout.write(f"{version} passes every check; it is published.")
