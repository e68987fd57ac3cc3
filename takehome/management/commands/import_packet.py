import time
from pathlib import Path

from django.core.files import File
from django.core.management.base import BaseCommand, CommandError

from grading.engine.sandbox import SandboxUnavailable
from takehome.actions import PacketError, do_import_packet, do_run_packet_check
from takehome.models import PacketCheck, PacketVersion


class Command(BaseCommand):
    help = (
        "Import a packet zip made by export_packet (or by hand, laid out like takehome/sample_packets/refund-sum/). "
        "A slug that exists gets a new version, never an overwrite, unless its latest version holds the zip already "
        "(then nothing is written). The new version's self-check runs here "
        "when this machine has the sandbox (else a worker runs it); exits 0 only when every check passes."
    )

    def add_arguments(self, parser):
        parser.add_argument("zip", type=Path, help="the packet zip")
        parser.add_argument("--no-check", action="store_true",
                            help="leave the self-check to a worker (exit 0 once imported)")

    def handle(self, *args, **options):
        path: Path = options["zip"]
        if not path.is_file():
            raise CommandError(f"No file at {path}.")
        try:
            with path.open("rb") as fh:
                imported = do_import_packet(File(fh, name=path.name))
        except PacketError as exc:
            raise CommandError(f"{path} was not imported: {exc}") from exc
        if imported.unchanged:
            self._unchanged(imported, options["no_check"])
            return
        verb = "Created packet" if imported.new_packet else "Added a new version to"
        self.stdout.write(f"{verb} {imported.packet.slug}: {imported.version}.")
        if imported.earlier:
            self.stdout.write(f"Recreated {len(imported.earlier)} earlier version(s) from versions/ first.")
        if imported.history_skipped:
            self.stdout.write(f"Left out the {imported.history_skipped} earlier version(s) under versions/: "
                              "this installation has its own history of the packet.")
        if not options["no_check"]:
            self._check_earlier(imported.earlier)
        queued = imported.version.checks.filter(status=PacketCheck.Status.QUEUED).first()
        if options["no_check"] or queued is None:
            self.stdout.write("Its self-check is queued for a worker.")
            return
        try:
            check = do_run_packet_check(queued.pk, final=False)
        except SandboxUnavailable as exc:
            self.stdout.write(f"The sandbox cannot run here ({exc}); a worker will run the self-check.")
            return
        if check is None:  # a worker took it first: wait for its outcome
            self.stdout.write("A worker is running the self-check...")
            check = PacketCheck.objects.get(pk=queued.pk)
            deadline = time.monotonic() + 300
            while check.is_open and time.monotonic() < deadline:
                time.sleep(1)
                check.refresh_from_db()
            if check.is_open:
                raise CommandError("The worker's self-check has not finished after 5 minutes; see the packet's page.")
        for result in check.results:
            self.stdout.write(f"{'PASS' if result['passed'] else 'FAIL'}  {result['title']}: {result['summary']}")
        if check.status != PacketCheck.Status.PASSED:
            raise CommandError(f"{imported.version} is a draft: {check.error or 'a check failed'}.")
        self.stdout.write(f"{imported.version} passes every check; it is published.")

    def _unchanged(self, imported, no_check: bool) -> None:
        """The latest version held the zip already: say so, and its state; a draft exits 1 (unless --no-check)."""
        version = imported.version
        self.stdout.write(f"Nothing imported: {version} holds this zip already (the same prompt, files and "
                          "settings); no new version was made.")
        if imported.history_skipped:
            self.stdout.write(f"The {imported.history_skipped} earlier version(s) under versions/ were left out: "
                              "this installation has its own history of the packet.")
        refusal = version.refusal_to_invite()
        if version.state == PacketVersion.DRAFT and not no_check:
            raise CommandError(refusal)
        self.stdout.write(refusal or f"{version} is {version.state}: it can be invited to.")

    def _check_earlier(self, versions) -> None:
        """Self-check the recreated earlier versions here too (one line each); a worker takes any left over."""
        for version in versions:
            queued = version.checks.filter(status=PacketCheck.Status.QUEUED).first()
            if queued is None:
                continue
            try:
                check = do_run_packet_check(queued.pk, final=False)
            except SandboxUnavailable:
                return
            if check is not None:
                self.stdout.write(f"Self-check of {version}: {check.status}.")
