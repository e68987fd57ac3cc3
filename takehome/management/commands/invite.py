from django.core.management.base import BaseCommand, CommandError

from takehome.actions import InviteError, do_invite_candidates
from takehome.invites import parse_invite_lines
from takehome.models import Packet


class Command(BaseCommand):
    help = (
        "Invite one candidate to a packet's latest version. Prints the candidate's full link "
        "on the last line (for scripts). Emails the link too unless --no-email."
    )

    def add_arguments(self, parser):
        parser.add_argument("--packet", required=True, help="packet slug, e.g. refund-sum")
        parser.add_argument("--name", required=True)
        parser.add_argument("--email", required=True)
        parser.add_argument("--no-email", action="store_true", help="do not send the email")

    def handle(self, *args, **options):
        packet = Packet.objects.filter(slug=options["packet"]).first()
        if packet is None:
            known = ", ".join(Packet.objects.values_list("slug", flat=True)) or "none"
            raise CommandError(f"No packet with slug {options['packet']!r} (known: {known}).")
        latest = packet.latest_version()
        if latest is None:
            raise CommandError(f"Packet {packet.slug} has no version yet.")
        version = packet.invitable_version() or latest
        if version != latest:
            self.stderr.write(f"{latest.refusal_to_invite()} Inviting to version {version.number}, the latest "
                              "that may be invited to.")
        # The same parser as the recruiter's form, so both accept the same input.
        line = f'"{options["name"].replace(chr(34), "")}",{options["email"]}'
        rows, errors = parse_invite_lines(line)
        if errors:
            raise CommandError(errors[0].message)
        try:
            (new,) = do_invite_candidates(version, rows, send=not options["no_email"])
        except InviteError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        self.stderr.write(f"Invited {new.invitation.candidate} to {version}.")
        self.stdout.write(new.link)
