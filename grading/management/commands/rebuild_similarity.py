from django.core.management.base import BaseCommand, CommandError

from grading import similarity
from takehome.models import Packet


class Command(BaseCommand):
    help = (
        "Fingerprint every graded submission again and find the similar ones in each packet (the review "
        "page's, the debrief's and the CSV's similar submissions). Grading keeps them up to date as it "
        "finishes; run this once for submissions graded before, or after deleting submissions by hand. "
        "Safe to run at any time."
    )

    def add_arguments(self, parser):
        parser.add_argument("slugs", nargs="*", metavar="SLUG", help="only these packets (default: every packet)")

    def handle(self, *args, **options):
        packets = [None]
        if options["slugs"]:
            found = {p.slug: p for p in Packet.objects.filter(slug__in=options["slugs"])}
            missing = sorted(set(options["slugs"]) - set(found))
            if missing:
                raise CommandError(f"No packet named {', '.join(missing)}.")
            packets = [found[slug] for slug in options["slugs"]]
        done = sum(similarity.rebuild(packet) for packet in packets)
        self.stdout.write(f"Fingerprinted {done} graded submission{'s' if done != 1 else ''} and matched each "
                          f"against its packet's others.")
