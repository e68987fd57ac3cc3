from django.core.management.base import BaseCommand

from grading.engine.sandbox import SandboxUnavailable
from takehome.actions import (
    do_load_sample_packet,
    do_queue_packet_check,
    do_run_packet_check,
    do_send_packet_check,
    sample_packet_dirs,
)
from takehome.models import PacketCheck, PacketVersion


class Command(BaseCommand):
    help = (
        "Load the built-in refund-sum packet (with --all, every sample packet under takehome/sample_packets/). "
        "Safe to run again: it adds a version only if its files changed. A new version's self-check runs here "
        "when this machine has the sandbox (building the packet's environment first), else a worker runs it."
    )

    def add_arguments(self, parser):
        parser.add_argument("--no-check", action="store_true",
                            help="leave the self-check of a new version to a worker")
        parser.add_argument("--all", action="store_true",
                            help="load every sample packet, not only refund-sum")

    def handle(self, *args, **options):
        folders = sample_packet_dirs() if options["all"] else sample_packet_dirs()[:1]
        for folder in folders:
            self.load(folder, options["no_check"])

    def load(self, folder, no_check: bool) -> None:
        # why not sent: the check runs here when it can, and goes to a worker only when it cannot;
        # `make setup` runs this before any broker is up.
        packet, changed = do_load_sample_packet(send_check=no_check, folder=folder)
        version = packet.latest_version()
        verb = "Loaded" if changed else "Already up to date:"
        self.stdout.write(f"{verb} sample packet {packet.slug} (version {version.number}).")
        queued = version.checks.filter(status=PacketCheck.Status.QUEUED).first()
        if queued is None and version.state in (PacketVersion.UNCHECKED, PacketVersion.DRAFT):
            # A version from before self-checks, or one whose check could not run (no sandbox then): check it now.
            queued = do_queue_packet_check(version, send=no_check)
        if queued is None or no_check:
            if queued is not None:
                self.stdout.write("Its self-check is queued for a worker.")
            return
        try:
            check = do_run_packet_check(queued.pk, final=False)
        except SandboxUnavailable as exc:
            do_send_packet_check(queued.pk)  # a broker that is down: the sweep sends it later
            self.stdout.write(f"The sandbox cannot run here ({exc}); a worker will run the self-check.")
            return
        if check is not None:
            self.stdout.write(f"Self-check: {check.status}.")
            if check.status != PacketCheck.Status.PASSED:
                failed = [r["summary"] for r in check.results if not r["passed"]] or [check.error]
                self.stdout.write("  " + failed[0])
