from django.core.management.base import BaseCommand

from takehome.actions import do_load_sample_packet


class Command(BaseCommand):
    help = "Load the built-in refund-sum packet. Safe to run again: it adds a version only if its files changed."

    def handle(self, *args, **options):
        packet, changed = do_load_sample_packet()
        version = packet.latest_version()
        verb = "Loaded" if changed else "Already up to date:"
        self.stdout.write(f"{verb} sample packet {packet.slug} (version {version.number}).")
