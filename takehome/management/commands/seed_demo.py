import json
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError

from shared.access import RECRUITER_GROUP, REVIEWER_GROUP, TEAM_ADMIN_GROUP

DEMO_USERS = {
    # The demo recruiter runs the team too (adds reviewers), as a hiring manager would.
    "recruiter": {"groups": [RECRUITER_GROUP, TEAM_ADMIN_GROUP]},
    "reviewer": {"groups": [REVIEWER_GROUP]},
    "admin": {"groups": [RECRUITER_GROUP, REVIEWER_GROUP], "superuser": True},
}


class Command(BaseCommand):
    help = (
        "Development only (needs DEBUG=true): create the groups and the demo accounts "
        "recruiter, reviewer and admin. Passwords are generated once, kept in "
        "TAKEHOME_VAR_DIR/demo-passwords.json, and printed each time."
    )

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError("seed_demo creates accounts with known passwords; it runs only with DEBUG=true.")
        for name in (RECRUITER_GROUP, REVIEWER_GROUP, TEAM_ADMIN_GROUP):
            Group.objects.get_or_create(name=name)
        store = Path(settings.VAR_DIR) / "demo-passwords.json"
        passwords = json.loads(store.read_text()) if store.exists() else {}
        # What this command set last time: each account's password and the hash it stored for it.
        set_before = store.with_name("demo-password-hashes.json")
        stored = json.loads(set_before.read_text()) if set_before.exists() else {}
        for username, spec in DEMO_USERS.items():
            password = passwords.setdefault(username, secrets.token_urlsafe(9))
            user, _ = User.objects.get_or_create(username=username)
            # why: hashing is most of this command's time (three passwords on every make run); an account
            # whose hash is still the one set here for this password logs in with it already.
            if stored.get(username) != {"password": password, "hash": user.password}:
                user.set_password(password)
                stored[username] = {"password": password, "hash": user.password}
            user.is_superuser = user.is_staff = bool(spec.get("superuser"))
            user.save()
            user.groups.set(Group.objects.filter(name__in=spec["groups"]))
        store.parent.mkdir(parents=True, exist_ok=True)
        for path, data in ((store, passwords), (set_before, stored)):
            path.write_text(json.dumps(data, indent=2))
            path.chmod(0o600)
        self.stdout.write(f"Log in at {settings.SITE_URL}/ with:")
        for username in DEMO_USERS:
            self.stdout.write(f"  {username:<10} {passwords[username]}")
