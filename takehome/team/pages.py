"""Reads for the Team page."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Prefetch

from shared.access import TEAM_ADMIN_GROUP

from .actions import ROLES


@dataclass(frozen=True)
class MemberRow:
    user: object
    roles: list[str]
    is_self: bool
    invited: bool  # has never set a password


def member_rows(viewer) -> list[MemberRow]:
    """Every account, active first, then by username, with its roles."""
    users = (get_user_model().objects
             .prefetch_related(Prefetch("groups", queryset=Group.objects.filter(name__in=ROLES.values())))
             .order_by("-is_active", "username"))
    rows = []
    for user in users:
        names = {g.name for g in user.groups.all()}
        rows.append(MemberRow(
            user=user,
            roles=[role for role, group in ROLES.items() if group in names],
            is_self=user.pk == viewer.pk,
            # why last_login too: an account single sign-on made has no password, and is no invitation.
            invited=not user.has_usable_password() and user.last_login is None,
        ))
    return rows


def team_admin_names(limit: int = 5) -> list[str]:
    """Who a person without a role can ask: active team admins (staff if there are none), by username."""
    users = get_user_model().objects.filter(is_active=True)
    admins = users.filter(groups__name=TEAM_ADMIN_GROUP)
    if not admins.exists():
        admins = users.filter(is_staff=True)
    return list(admins.order_by("username").values_list("username", flat=True).distinct()[:limit])
