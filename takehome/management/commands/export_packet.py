from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from takehome.management.lookup import packet_version
from takehome.packet_zip import export_zip


class Command(BaseCommand):
    help = (
        "Write a packet's latest version (or --version N) to a zip laid out like takehome/sample_packets/refund-sum/ "
        "(packet.json, prompt.md, fixture/, solution/, reference_tests/, decoys/<name>/), for import_packet."
    )

    def add_arguments(self, parser):
        # why: --version is Django's own (it prints Django's version); here it picks the packet version.
        parser.conflict_handler = parser._optionals.conflict_handler = "resolve"
        parser.add_argument("slug", help="packet slug, e.g. refund-sum")
        parser.add_argument("-o", "--output", required=True, type=Path, help="the zip file to write")
        parser.add_argument("--version", type=int, dest="number", help="version number (default: the latest)")
        parser.add_argument("--history", action="store_true",
                            help="add the earlier versions under versions/<n>/ (import_packet recreates them)")

    def handle(self, *args, **options):
        packet, version = packet_version(options["slug"], options["number"])
        out: Path = options["output"]
        if out.is_dir():
            raise CommandError(f"{out} is a folder; give the zip file's name, e.g. {out / (packet.slug + '.zip')}.")
        try:
            out.write_bytes(export_zip(version, history=options["history"]))
        except OSError as exc:
            raise CommandError(f"Cannot write {out}: {exc.strerror}.") from exc
        earlier = version.number - 1 if options["history"] else 0
        self.stdout.write(f"Wrote {version} to {out}" + (f", with {earlier} earlier version(s)." if earlier else "."))
