from django.core.management.base import BaseCommand, CommandError

from grading import lifecycle
from grading.management.packets import find_packet_version
from sessions_app.models import Submission


class Command(BaseCommand):
    help = (
        "Send submissions to grading again: by id, every latest upload of a packet version, or every "
        "one in error. Each gets a new grading run; its evidence is replaced when the run finishes and "
        "its reviews are kept. Uploads still waiting, being graded or superseded are left as they are. "
        "Prints one line per submission."
    )

    def add_arguments(self, parser):
        parser.add_argument("ids", nargs="*", type=int, metavar="ID", help="submission ids")
        parser.add_argument("--packet", help="every latest upload of this packet (slug, e.g. refund-sum)")
        # why not --version: every Django command has --version (it prints Django's).
        parser.add_argument("--packet-version", type=int, dest="packet_version",
                            help="with --packet: this version number (default: the latest)")
        parser.add_argument("--errored", action="store_true", help="every submission in error")
        parser.add_argument("--dry-run", action="store_true", help="say what would be sent, send nothing")

    def handle(self, *args, **options):
        ids = self.chosen(options)
        if not ids:
            self.stdout.write("No submission matched; nothing sent.")
            return
        results = [lifecycle.regrade(pk, options["dry_run"]) for pk in ids]
        for result in results:
            self.stdout.write(result.line)
        sent = sum(r.result == "sent" for r in results)
        verb = "would be sent" if options["dry_run"] else "sent"
        self.stdout.write(f"{sent} of {len(results)} {verb} for grading again.")
        unknown = [str(r.submission_id) for r in results if r.result == "unknown"]
        if unknown:
            raise CommandError(f"No submission with id {', '.join(unknown)}; check the ids (the admin lists them).")

    def chosen(self, options) -> list[int]:
        if options["packet_version"] and not options["packet"]:
            raise CommandError("--packet-version goes with --packet SLUG.")
        if not (options["ids"] or options["packet"] or options["errored"]):
            raise CommandError("Say which submissions: one or more ids, --packet SLUG [--packet-version N], "
                               "or --errored.")
        ids = list(dict.fromkeys(options["ids"]))
        if options["packet"]:
            version = find_packet_version(options["packet"], options["packet_version"])
            latest = Submission.objects.latest_per_invitation().filter(invitation__packet_version=version)
            ids += latest.order_by("uploaded_at", "pk").values_list("pk", flat=True)
        if options["errored"]:
            errored = Submission.objects.filter(status=Submission.Status.ERROR)
            ids += errored.order_by("uploaded_at", "pk").values_list("pk", flat=True)
        return list(dict.fromkeys(ids))
