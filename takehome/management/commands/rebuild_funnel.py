from django.core.management.base import BaseCommand, CommandError

from takehome import funnel
from takehome.models import Packet


class Command(BaseCommand):
    help = (
        "Count each packet's funnel (the packet page's steps and times, the debriefs' index) again from "
        "its rows. The actions keep it up to date, and a deletion has it counted again on the next read; "
        "run this after changing rows by hand. Safe to run at any time."
    )

    def add_arguments(self, parser):
        parser.add_argument("slugs", nargs="*", metavar="SLUG", help="only these packets (default: every one)")

    def handle(self, *args, slugs, **options):
        packets = list(Packet.objects.filter(slug__in=slugs) if slugs else Packet.objects.all())
        missing = sorted(set(slugs) - {p.slug for p in packets})
        if missing:
            raise CommandError(f"No packet with the slug {', '.join(missing)}; `manage.py check_packet` lists none, "
                               "the packets page lists them all.")
        for packet in packets:
            funnel.rebuild(packet)
            self.stdout.write(f"{packet.slug}: {funnel.counts(packet)['invited']} invited, counted again.")
