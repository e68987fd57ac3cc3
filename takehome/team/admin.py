"""Django's admin pages for accounts and groups, with the team's roles and activation left to the Team page.

Staff still use the admin for what the Team page does not do: passwords,
names and addresses, the staff and superuser flags, other groups and
permissions. A role (membership of the recruiter or reviewer group) and
deactivation are shown here with a link to the Team page and refused here,
because the Team page holds their rules (nobody deactivates themself; only a
superuser deactivates a superuser) and records each change in the audit
trail. A change of the staff or superuser flag, made only here, is recorded
as a role change. Accounts are never deleted, only deactivated.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.forms import UserChangeForm
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils.html import format_html

from shared.admin import ChangedInTheApp

from . import actions

ROLE_GROUPS = tuple(actions.ROLES.values())


def team_link(user=None) -> str:
    url = reverse("team:list") + (f"#member-{user.pk}" if user is not None else "")
    return format_html('<a href="{}">the Team page</a>', url)


class AccountChangeForm(UserChangeForm):
    """The admin's account form: its groups are the other groups; the roles the account has are kept."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        groups = self.fields.get("groups")
        if groups is not None:
            groups.queryset = groups.queryset.exclude(name__in=ROLE_GROUPS)
            groups.help_text = ("Groups other than the roles. Roles (recruiter, reviewer) are changed on the "
                                "Team page, where each change is recorded.")
            groups.error_messages["invalid_choice"] = (
                "%(value)s is not a group this page changes: roles (recruiter, reviewer) are changed on the "
                "Team page, where each change is recorded. Nothing was changed.")

    def clean_groups(self):
        # why: the field lists the other groups only; saving it as is would drop the roles.
        roles = self.instance.groups.filter(name__in=ROLE_GROUPS) if self.instance.pk else Group.objects.none()
        return [*self.cleaned_data["groups"], *roles]


admin.site.unregister(get_user_model())


@admin.register(get_user_model())
class AccountAdmin(ChangedInTheApp, UserAdmin):
    form = AccountChangeForm
    fieldsets = (
        (None, {"fields": ("username", "password")}),
        ("Personal info", {"fields": ("first_name", "last_name", "email")}),
        ("Permissions", {"fields": ("active", "is_staff", "is_superuser", "roles", "groups", "user_permissions")}),
        ("Important dates", {"fields": ("last_login", "date_joined")}),
    )
    readonly_fields = ("active", "roles")

    @admin.display(description="Active")
    def active(self, obj):
        state = "Yes" if obj.is_active else "No (deactivated)"
        return format_html("{}. An account is deactivated and reactivated on {}, where each change is recorded.",
                           state, team_link(obj))

    @admin.display(description="Roles")
    def roles(self, obj):
        return format_html("{}. Roles are changed on {}, where each change is recorded.",
                           ", ".join(actions.roles_of(obj)) or "None", team_link(obj))

    def changed_in_the_app(self, request, obj=None):
        return format_html("Roles (recruiter, reviewer), invitations to the team and deactivation are managed on {}, "
                           "where each change is recorded; accounts are never deleted, only deactivated.",
                           team_link(obj))

    def has_delete_permission(self, request, obj=None):
        # why: everything a person did keeps their name; their reviews would block it anyway (PROTECT)
        return False

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if change:
            actions.do_record_privilege_change(obj, form.initial.get("is_staff", False),
                                            form.initial.get("is_superuser", False), request.user)


admin.site.unregister(Group)


@admin.register(Group)
class RoleGroupAdmin(ChangedInTheApp, GroupAdmin):
    """The role groups are the app's: their names are looked up in code and their members are on the Team page."""

    def _is_role(self, obj) -> bool:
        return obj is not None and obj.name in ROLE_GROUPS

    def has_change_permission(self, request, obj=None):
        return not self._is_role(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return not self._is_role(obj) and super().has_delete_permission(request, obj)

    def changed_in_the_app(self, request, obj=None):
        if obj is None:
            return format_html("The recruiter and reviewer groups are the app's roles: who has them is changed on "
                               "{}, where each change is recorded, and the groups themselves cannot be renamed or "
                               "deleted.", team_link())
        if self._is_role(obj):
            return format_html("The {} group is a role of the app: who has it is changed on {}, where each change "
                               "is recorded; the group itself cannot be renamed or deleted.", obj.name, team_link())
        return ""
