"""Django's admin makes no intervention itself: it shows invitations, decisions, roles and activation, and
points to the page of the app whose action checks each change and records it in the audit trail.

Every test goes through the real admin: a logged-in superuser posting to the admin's URLs. The admin's
"Grade again" (a regrade, through grading.lifecycle) is recorded: test_audit.py proves it.
"""

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.test import RequestFactory

from sessions_app.actions import do_start_session
from takehome.actions import do_decide
from takehome.models import AuditEvent, Decision, Invitation

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(groups):
    return User.objects.create_superuser("ops", email="ops@example.com", password="pw-ops")


@pytest.fixture
def ops_client(client, ops):
    client.force_login(ops)
    return client


def bulk_delete(client, model: str, *pks):
    """The changelist's "Delete selected", confirmed."""
    return client.post(f"/admin/{model}/", {"action": "delete_selected", "_selected_action": list(pks), "post": "yes"})


# -- invitations: invite, resend, revoke and extend are the board's --------------------------


def test_an_invitation_cannot_be_added_in_the_admin(ops_client, invitation, sample_packet):
    form = {"candidate": invitation.candidate.pk, "packet_version": sample_packet.latest_version().pk,
            "created_at_0": "2026-01-05", "created_at_1": "10:00:00"}
    assert ops_client.get("/admin/takehome/invitation/add/").status_code == 403
    assert ops_client.post("/admin/takehome/invitation/add/", form).status_code == 403
    assert Invitation.objects.count() == 1 and not AuditEvent.objects.exists()


def test_an_invitation_cannot_be_extended_or_revoked_in_the_admin(ops_client, invitation):
    do_start_session(invitation)
    deadline = Invitation.objects.get(pk=invitation.pk).deadline
    url = f"/admin/takehome/invitation/{invitation.pk}/change/"
    later = {"deadline_0": "2099-01-01", "deadline_1": "10:00:00",
             "revoked_at_0": "2026-01-05", "revoked_at_1": "10:00:00"}
    assert ops_client.post(url, later).status_code == 403
    after = Invitation.objects.get(pk=invitation.pk)
    assert (after.deadline, after.revoked_at) == (deadline, None)
    assert not AuditEvent.objects.exists()
    page = ops_client.get(url).content.decode()
    assert 'name="_save"' not in page
    assert f'href="/packets/{invitation.packet.slug}/invitations/#invitation-{invitation.pk}"' in page


def test_an_invitation_cannot_be_deleted_in_the_admin(ops_client, invitation):
    assert ops_client.post(f"/admin/takehome/invitation/{invitation.pk}/delete/", {"post": "yes"}).status_code == 403
    bulk_delete(ops_client, "takehome/invitation", invitation.pk)
    assert Invitation.objects.filter(pk=invitation.pk).exists()


def test_the_invitation_list_links_each_row_to_the_board(ops_client, invitation):
    page = ops_client.get("/admin/takehome/invitation/").content.decode()
    assert f'href="/packets/{invitation.packet.slug}/invitations/#invitation-{invitation.pk}"' in page
    assert 'id="changed-in-the-app"' in page and 'href="/packets/"' in page
    board = ops_client.get(f"/packets/{invitation.packet.slug}/invitations/").content.decode()
    assert f'id="invitation-{invitation.pk}"' in board  # where the link lands


# -- decisions: made on the board or the debrief -----------------------------------------------


def test_a_decision_cannot_be_changed_or_deleted_in_the_admin(ops_client, ops, invitation):
    decision = do_decide(invitation, "advance", "strong test", ops)
    url = f"/admin/takehome/decision/{decision.pk}/"
    changed = {"invitation": invitation.pk, "choice": "decline", "note": "", "decided_at_0": "2026-01-05",
               "decided_at_1": "10:00:00"}
    assert ops_client.post(url + "change/", changed).status_code == 403
    assert ops_client.post(url + "delete/", {"post": "yes"}).status_code == 403
    bulk_delete(ops_client, "takehome/decision", decision.pk)
    assert Decision.objects.get(pk=decision.pk).choice == "advance"
    assert AuditEvent.objects.filter(action="decision").count() == 1  # the board's decision alone
    page = ops_client.get(url + "change/").content.decode()
    assert f"/packets/{invitation.packet.slug}/invitations/#invitation-{invitation.pk}" in page


# -- accounts: roles and deactivation are the Team page's; the rest stays here -------------------


def account_form(user, **changes):
    """The admin's account form as the page posts it, unchanged but for ``changes``."""
    data = {"username": user.username, "first_name": user.first_name, "last_name": user.last_name,
            "email": user.email, "date_joined_0": f"{user.date_joined:%Y-%m-%d}",
            "date_joined_1": f"{user.date_joined:%H:%M:%S}", "last_login_0": "", "last_login_1": "",
            "is_active": "on", "groups": [], "user_permissions": []}
    data.update({flag: "on" for flag in ("is_staff", "is_superuser") if getattr(user, flag)})
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def names_of_groups(user) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_a_role_cannot_be_given_in_the_admin(ops_client, recruiter, groups):
    url = f"/admin/auth/user/{recruiter.pk}/change/"
    response = ops_client.post(url, account_form(recruiter, groups=[groups["reviewer"].pk]))
    assert response.status_code == 200  # the form again, with the reason
    assert "roles (recruiter, reviewer) are changed on the Team page" in response.content.decode()
    assert names_of_groups(recruiter) == {"recruiter"}
    assert not AuditEvent.objects.exists()


def test_saving_an_account_in_the_admin_keeps_its_roles_and_sets_other_groups(ops_client, recruiter):
    readers = Group.objects.create(name="log readers")
    response = ops_client.post(f"/admin/auth/user/{recruiter.pk}/change/",
                               account_form(recruiter, email="rita@example.org", groups=[readers.pk]))
    assert response.status_code == 302
    recruiter.refresh_from_db()
    assert recruiter.email == "rita@example.org"
    assert names_of_groups(recruiter) == {"recruiter", "log readers"}
    assert not AuditEvent.objects.exists()  # no role changed


def test_an_account_cannot_be_deactivated_in_the_admin(ops_client, recruiter):
    url = f"/admin/auth/user/{recruiter.pk}/change/"
    page = ops_client.get(url).content.decode()
    assert 'name="is_active"' not in page and f'href="/team/#member-{recruiter.pk}"' in page
    assert ops_client.post(url, account_form(recruiter, is_active=None)).status_code == 302  # the box unticked
    assert User.objects.get(pk=recruiter.pk).is_active
    assert not AuditEvent.objects.exists()


def test_an_account_cannot_be_deleted_in_the_admin(ops_client, recruiter):
    assert ops_client.post(f"/admin/auth/user/{recruiter.pk}/delete/", {"post": "yes"}).status_code == 403
    bulk_delete(ops_client, "auth/user", recruiter.pk)
    assert User.objects.filter(pk=recruiter.pk).exists()


def test_the_staff_and_superuser_flags_set_in_the_admin_are_recorded(ops_client, ops, recruiter):
    url = f"/admin/auth/user/{recruiter.pk}/change/"
    ops_client.post(url, account_form(recruiter, is_staff="on", is_superuser="on"))
    recruiter.refresh_from_db()
    ops_client.post(url, account_form(recruiter, is_superuser=None))
    ops_client.post(url, account_form(recruiter, is_superuser=None, first_name="Rita"))  # no flag changed
    made, unmade = AuditEvent.objects.filter(action="role_change").order_by("pk")
    assert made.actor == unmade.actor == ops and made.target_id == str(recruiter.pk)
    assert made.detail == ("changed in the admin the staff or superuser rights of: "
                           "roles recruiter -> recruiter, staff, superuser")
    assert unmade.detail.endswith("roles recruiter, staff, superuser -> recruiter, staff")
    recruiter.refresh_from_db()
    assert (recruiter.is_staff, recruiter.is_superuser, recruiter.first_name) == (True, False, "Rita")


# -- groups: the three role groups are the app's ---------------------------------------------


def test_a_role_group_cannot_be_renamed_or_deleted_in_the_admin(ops_client, recruiter, groups):
    role = groups["recruiter"]
    url = f"/admin/auth/group/{role.pk}/"
    assert ops_client.post(url + "change/", {"name": "hiring", "permissions": []}).status_code == 403
    assert ops_client.post(url + "delete/", {"post": "yes"}).status_code == 403
    other = Group.objects.create(name="log readers")
    assert bulk_delete(ops_client, "auth/group", role.pk, other.pk).status_code == 403  # asks each row's page
    assert set(Group.objects.values_list("name", flat=True)) == {"recruiter", "reviewer", "team admin", "log readers"}
    assert names_of_groups(recruiter) == {"recruiter"}
    assert "who has it is changed on" in ops_client.get(url + "change/").content.decode()


def test_other_groups_are_still_changed_in_the_admin(ops_client):
    other = Group.objects.create(name="log readers")
    ops_client.post(f"/admin/auth/group/{other.pk}/change/", {"name": "log keepers", "permissions": []})
    assert Group.objects.filter(name="log keepers").exists()
    bulk_delete(ops_client, "auth/group", other.pk)
    assert not Group.objects.filter(pk=other.pk).exists()


# -- the whole admin ---------------------------------------------------------------------------

# What a superuser may still add, change or delete in the admin, and why that is no intervention.
WRITABLE = {
    "auth.user": "passwords, names, staff and superuser flags (recorded); not roles, activation or deletion",
    "auth.group": "groups other than the two roles, and their permissions",
    "axes.accessattempt": "clearing a login lockout",
    "axes.accesslog": "django-axes' own log of logins",
    "axes.accessfailurelog": "django-axes' own log of failures",
    "shared.workerheartbeat": "a worker's last sign of life, written again within seconds",
    "takehome.packet": "a packet's title and the hiding of names; its content is in versions",
    "takehome.candidate": "a candidate's name and address (deleting one with invitations is refused)",
}


def test_the_admin_writes_nothing_the_audit_trail_covers(ops):
    """A model newly registered in the admin with a form must be added here on purpose, or made read-only."""
    request = RequestFactory().get("/admin/")
    request.user = ops
    writable = {model._meta.label_lower for model, page in admin.site._registry.items()
                if page.has_add_permission(request) or page.has_change_permission(request)
                or page.has_delete_permission(request)}
    assert writable == set(WRITABLE)


# -- packet versions: written by the packet's Edit and Import, checked before anyone is invited -------


def test_a_version_or_its_files_cannot_be_added_or_deleted_in_the_admin(ops_client, sample_packet):
    version = sample_packet.latest_version()
    files = version.files.count()
    new = {"packet": sample_packet.pk, "number": version.number + 1, "prompt": "Empty.",
           "test_command": "python -m pytest -q", "time_limit_minutes": 90, "work_mode": "zip",
           "created_at_0": "2026-01-05", "created_at_1": "10:00:00"}
    assert ops_client.post("/admin/takehome/packetversion/add/", new).status_code == 403
    assert ops_client.post(f"/admin/takehome/packetversion/{version.pk}/delete/", {"post": "yes"}).status_code == 403
    a_file = version.files.first()
    assert ops_client.post("/admin/takehome/packetfile/add/",
                           {"version": version.pk, "kind": "fixture", "path": "extra.py"}).status_code == 403
    assert ops_client.post(f"/admin/takehome/packetfile/{a_file.pk}/delete/", {"post": "yes"}).status_code == 403
    bulk_delete(ops_client, "takehome/packetfile", a_file.pk)
    assert sample_packet.invitable_version() == version and version.files.count() == files
    assert 'href="/packets/"' in ops_client.get(f"/admin/takehome/packetversion/{version.pk}/change/").content.decode()
