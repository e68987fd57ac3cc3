from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sessions_app.hosted import workspaces
from sessions_app.models import Workspace


class Command(BaseCommand):
    help = (
        "Stop every hosted workspace of this server (TAKEHOME_WORKSPACE_HOST): end its shell, save its "
        "files to saved.tar and unmount them. The next visit restores them. Idempotent; `make run` runs "
        "it once everything else has stopped (Ctrl-C)."
    )

    def handle(self, *args, **options):
        if not settings.HOLDS_WORKSPACES:
            raise CommandError("This server holds no hosted workspaces (TAKEHOME_HOLDS_WORKSPACES=false): run "
                               "stop_workspaces on the workspace host.")
        rows = (Workspace.objects.filter(host=settings.WORKSPACE_HOST)
                .select_related("invitation__packet_version__packet").order_by("closed", "pk"))
        failed = stopped = 0
        for row in rows:
            invitation = row.invitation
            folder = workspaces.folder_for(invitation)
            try:
                running = workspaces.stop_for_shutdown(invitation, row)
            except Exception as exc:  # one workspace that cannot be stopped must not keep the others running
                failed += 1
                self.stderr.write(f"Could not stop the workspace of invitation {invitation.pk} ({folder}): {exc}")
                continue
            if running is None:
                continue
            stopped += 1
            done = "stopped its shell, " if running else ""
            self.stdout.write(f"Workspace of invitation {invitation.pk} (uid {row.uid}): {done}saved its files "
                              f"to {folder / 'saved.tar'} and unmounted them.")
        if failed:
            raise CommandError(f"{failed} workspace(s) could not be stopped; see above.")
        if not stopped:
            self.stdout.write("No hosted workspace was running on this server.")
