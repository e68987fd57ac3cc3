"""Writes on the team: inviting a member, changing roles, deactivating.

A member's role is membership of the `recruiter` or `reviewer` group (created
by a migration). Accounts are never deleted, only deactivated, so everything a
person did keeps their name.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import PasswordResetForm
from django.contrib.auth.models import Group
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from shared.access import RECRUITER_GROUP, REVIEWER_GROUP, TEAM_ADMIN_GROUP

log = logging.getLogger(__name__)

# Role name (as typed on the command line and shown on the page) -> group name.
ROLES = {"recruiter": RECRUITER_GROUP, "reviewer": REVIEWER_GROUP, "team-admin": TEAM_ADMIN_GROUP}
# The roles that do work (an account needs one of them); team-admin only adds the Team page.
WORK_ROLES = ("recruiter", "reviewer")


class TeamError(Exception):
    """A team change that cannot be made; the message says why, and nothing was changed."""


@dataclass(frozen=True)
class NewMember:
    user: object
    link: str


def roles_of(user) -> list[str]:
    """The user's roles, in the order of ROLES."""
    groups = {g.name for g in user.groups.all()}
    return [role for role, group in ROLES.items() if group in groups]


def _audit_role_change(actor, member, before: list[str], after: list[str], what: str) -> None:
    """The one place team changes are recorded: in the audit trail (takehome.audit), and the log.

    Every team change (invite, roles, deactivate, reactivate, and the admin's staff and
    superuser flags) comes here:
    `actor` did `what` to `member`, roles `before` -> `after`.
    """
    from takehome.audit import record

    record(actor, "role_change", member,
           f"{what}: roles {', '.join(before) or 'none'} -> {', '.join(after) or 'none'}")
    log.info("team: %s %s %s (roles %s -> %s)", actor or "a command", what, member,
             ",".join(before) or "none", ",".join(after) or "none")


def set_password_link(user) -> str:
    """An absolute link to Django's set-password page for `user` (works once, for PASSWORD_RESET_TIMEOUT)."""
    path = reverse("password_reset_confirm", kwargs={
        "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
        "token": default_token_generator.make_token(user),
    })
    return settings.SITE_URL + path


class _InviteForm(PasswordResetForm):
    """Django's password reset email, aimed at one new account.

    why a subclass: the stock form skips accounts without a usable password,
    which is exactly what a new member has until they follow the link.
    """

    def __init__(self, user):
        super().__init__({"email": user.email})
        self.member = user

    def get_users(self, email):
        yield self.member


def _clean_roles(roles) -> list[str]:
    roles = list(dict.fromkeys(roles))
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise TeamError(f"Unknown role {unknown[0]!r}: choose among {', '.join(ROLES)}.")
    return roles


def _clean_email(email: str) -> str:
    email = (email or "").strip().lower()
    try:
        validate_email(email)
    except ValidationError as exc:
        raise TeamError(f"{email!r} is not a valid email address.") from exc
    if len(email) > 150:
        raise TeamError("That email address is longer than 150 characters, the longest a username may be.")
    return email


@transaction.atomic
def do_create_member(email: str, roles, actor=None, password: str | None = None) -> NewMember:
    """Create an account for `email` (its username too) with `roles`.

    Without a password the account has an unusable one until its owner sets
    one through the returned link. An email (or username) that already has an
    account is refused: nothing is changed.
    """
    email = _clean_email(email)
    roles = _clean_roles(roles)
    if not set(roles) & set(WORK_ROLES):
        raise TeamError("Choose at least one role: recruiter or reviewer.")
    User = get_user_model()
    if User.objects.filter(email__iexact=email).exists() or User.objects.filter(username__iexact=email).exists():
        raise TeamError(f"{email} already has an account; change its roles on the Team page instead. "
                        "Nothing was changed.")
    user = User(username=email, email=email, is_active=True)
    if password is None:
        user.set_unusable_password()
    else:
        from django.contrib.auth.password_validation import validate_password

        try:
            validate_password(password, user)
        except ValidationError as exc:
            raise TeamError("That password cannot be used: " + " ".join(exc.messages)) from exc
        user.set_password(password)
    user.save()
    user.groups.set(Group.objects.filter(name__in=[ROLES[r] for r in roles]))
    _audit_role_change(actor, user, [], roles, "created the account of")
    return NewMember(user, set_password_link(user))


def do_invite_member(email: str, roles, actor=None) -> NewMember:
    """Create the account, then email its owner a set-password link once the account is committed."""
    new = do_create_member(email, roles, actor)
    transaction.on_commit(lambda: send_set_password_email(new.user, invited_by=actor))
    return new


def send_set_password_email(user, invited_by=None) -> str:
    """Email `user` a link to set their password, through Django's password reset form; return a link
    (the same kind: any one made for the account works until the password is set)."""
    form = _InviteForm(user)
    form.is_valid()
    form.save(
        subject_template_name="takehome/email/team_invite_subject.txt",
        email_template_name="takehome/email/team_invite.txt",
        from_email=settings.DEFAULT_FROM_EMAIL,
        extra_email_context={
            "site_url": settings.SITE_URL,
            "roles": roles_of(user),
            "invited_by": invited_by,
            "link_days": settings.PASSWORD_RESET_TIMEOUT // (24 * 3600),
            "password_login": settings.PASSWORD_LOGIN,
            "provider_name": settings.OIDC_PROVIDER_NAME,
        },
        domain_override="takehome",  # unused: the template builds the link from SITE_URL
    )
    return set_password_link(user)


@transaction.atomic
def do_set_roles(member, roles, actor=None, what: str = "changed the roles of") -> list[str]:
    """Make `member`'s roles exactly `roles` (possibly none); returns them. `what` words the audit event."""
    roles = _clean_roles(roles)
    before = roles_of(member)
    keep = member.groups.exclude(name__in=ROLES.values())  # other groups are not ours to touch
    member.groups.set(list(keep) + list(Group.objects.filter(name__in=[ROLES[r] for r in roles])))
    if before != roles:
        _audit_role_change(actor, member, before, roles, what)
    return roles


@transaction.atomic
def do_sign_on(email: str, roles: list[str] | None, claim: str = ""):
    """The account a provider-verified `email` signs on to: its own, or one made now (username the email,
    no usable password). With `roles` (from the provider's `claim`), they become the account's roles,
    audited as the person's own sign-on; with None, the roles stay as the Team page set them (none for a
    new account). Refuses (TeamError) a deactivated account, and an email two accounts share.
    """
    email = _clean_email(email)
    User = get_user_model()
    found = list(User.objects.filter(email__iexact=email)[:2])
    if len(found) > 1:
        # why: picking one would hand a person whichever account the database listed first.
        raise TeamError(f"Two accounts here have the email {email}, so single sign-on cannot tell which is "
                        "yours. Ask a team admin to change the email of the one that is not.")
    if found:
        user = found[0]
        if not user.is_active:
            raise TeamError(f"The account {user.username} is deactivated. Ask a team admin to reactivate it.")
    else:
        if User.objects.filter(username__iexact=email).exists():
            raise TeamError(f"An account named {email} exists with another email address, so single sign-on "
                            "does not take it over. Ask a team admin to set its email to yours.")
        user = User(username=email, email=email, is_active=True)
        user.set_unusable_password()
        user.save()
        _audit_role_change(user, user, [], [], "signed on for the first time, creating the account of")
    if roles is not None:
        do_set_roles(user, roles, actor=user, what=f"signed on with the provider's {claim} claim, setting the "
                                                   "roles of")
    return user


def do_deactivate_member(member, actor) -> None:
    """Stop `member` logging in; their account and everything they did stay."""
    # why: a staff user who locks themselves out may leave nobody to undo it.
    if actor is not None and member.pk == actor.pk:
        raise TeamError("You cannot deactivate your own account; ask another staff member.")
    # why: staff must not be able to lock out the superusers who granted their rights.
    if member.is_superuser and not (actor is None or actor.is_superuser):
        raise TeamError(f"{member.username} is a superuser; only a superuser can deactivate them.")
    if not member.is_active:
        return
    member.is_active = False
    member.save(update_fields=["is_active"])
    roles = roles_of(member)
    _audit_role_change(actor, member, roles, roles, "deactivated")


def do_reactivate_member(member, actor) -> None:
    """Let a deactivated member log in again, with the roles they had."""
    if member.is_active:
        return
    member.is_active = True
    member.save(update_fields=["is_active"])
    roles = roles_of(member)
    _audit_role_change(actor, member, roles, roles, "reactivated")


def do_record_privilege_change(member, was_staff: bool, was_superuser: bool, actor) -> None:
    """Record a change of `member`'s staff or superuser flag, just saved in Django's admin (where they are set).

    why a role change: staff manage the team and a superuser passes every
    role's check, so either flag changes what the person may do as a role
    does. The flags are listed after the roles: "recruiter -> recruiter, superuser".
    """
    def rights(staff: bool, superuser: bool) -> list[str]:
        return [*roles, *(["staff"] if staff else []), *(["superuser"] if superuser else [])]

    roles = roles_of(member)
    before, after = rights(was_staff, was_superuser), rights(member.is_staff, member.is_superuser)
    if before != after:
        _audit_role_change(actor, member, before, after, "changed in the admin the staff or superuser rights of")
