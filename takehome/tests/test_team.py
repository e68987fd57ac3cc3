"""The Team page, its actions, the set-password link and `manage.py createuser`."""

import re
from io import StringIO

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.urls import reverse

from shared.access import in_group
from takehome.team import actions

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(groups):
    user = User.objects.create_user("sam", email="sam@example.com", password="pw-sam", is_staff=True)
    return user


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


def link_in(body: str) -> str:
    return re.search(r"http://\S+/accounts/set-password/\S+/", body).group(0)


def test_the_data_migrations_make_the_three_role_groups():
    # why run them here: a transactional test before this one in the same process empties every table,
    # the rows migrate wrote included.
    from importlib import import_module

    from django.apps import apps

    Group.objects.all().delete()
    import_module("takehome.migrations.0007_create_role_groups").create_groups(apps, None)
    import_module("takehome.migrations.0017_create_team_admin_group").create_group(apps, None)
    assert set(Group.objects.values_list("name", flat=True)) == {"recruiter", "reviewer", "team admin"}


def test_the_team_page_is_for_team_admins_and_staff_only(client, recruiter):
    client.force_login(recruiter)
    assert client.get(reverse("team:list")).status_code == 403
    assert client.post(reverse("team:invite"), {"email": "x@example.com", "role": "reviewer"}).status_code == 403
    assert not User.objects.filter(username="x@example.com").exists()


def test_the_team_page_lists_users_with_their_roles(staff_client, recruiter, reviewer):
    body = staff_client.get(reverse("team:list")).content.decode()
    assert "rita" in body and "rob" in body and "sam" in body
    row = body.split('id="member-%d"' % recruiter.pk)[1].split("</tr>")[0]
    assert 'value="recruiter" checked' in row and 'value="reviewer" checked' not in row
    assert 'href="/team/"' in body  # the navigation's Team link, for staff


def test_the_team_link_is_not_shown_to_non_staff(client, recruiter):
    client.force_login(recruiter)
    body = client.get(reverse("takehome:packet-list")).content.decode()
    assert 'href="/team/"' not in body


def test_invite_creates_an_account_and_emails_a_link_that_sets_the_password(
        staff_client, client, mailoutbox, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(reverse("team:invite"), {"email": "Rev@Example.com", "role": "reviewer"})
    assert response.status_code == 302
    user = User.objects.get(username="rev@example.com")
    assert user.email == "rev@example.com" and not user.has_usable_password()
    assert in_group(user, "reviewer") and not in_group(user, "recruiter")
    (mail,) = mailoutbox
    assert mail.to == ["rev@example.com"]
    assert "as reviewer" in mail.body and "sam has given you" in mail.body
    for paragraph in mail.body.strip().split("\n\n"):
        assert "\n" not in paragraph.strip()
    link = link_in(mail.body)
    assert link.startswith("http://127.0.0.1:8000/")
    # The invitee follows the link, sets a password, and logs in with it.
    path = link.split("127.0.0.1:8000", 1)[1]
    page = client.get(path, follow=True)
    assert b"Set your password" in page.content and b"rev@example.com" in page.content
    form_url = page.redirect_chain[-1][0]
    done = client.post(form_url, {"new_password1": "a long new password 42", "new_password2": "a long new password 42"})
    assert done.status_code == 302
    assert client.login(username="rev@example.com", password="a long new password 42")
    # The link worked once.
    assert b"cannot be used any more" in client.get(path, follow=True).content


def test_inviting_an_email_that_has_an_account_changes_nothing(staff_client, mailoutbox, reviewer,
                                                               django_capture_on_commit_callbacks):
    reviewer.email = "rob@example.com"
    reviewer.save()
    before = list(User.objects.values_list("pk", "username", "email", "password", "is_active"))
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(reverse("team:invite"), {"email": "ROB@example.com", "role": "recruiter"})
    assert response.status_code == 200
    assert "rob@example.com already has an account" in response.content.decode()
    assert list(User.objects.values_list("pk", "username", "email", "password", "is_active")) == before
    assert not in_group(reviewer, "recruiter")
    assert mailoutbox == []


@pytest.mark.parametrize("data", [{"email": "not an email", "role": "reviewer"},
                                  {"email": "x@example.com", "role": "admin"},
                                  {"email": "", "role": "reviewer"}])
def test_bad_invitations_are_refused_with_a_message(staff_client, data):
    count = User.objects.count()
    response = staff_client.post(reverse("team:invite"), data)
    assert response.status_code == 200 and b'class="error"' in response.content
    assert User.objects.count() == count


def test_changing_roles_sets_exactly_the_chosen_ones_and_is_audited(staff_client, recruiter, monkeypatch):
    calls = []
    monkeypatch.setattr(actions, "_audit_role_change", lambda *a: calls.append(a))
    staff_client.post(reverse("team:member-roles", args=[recruiter.pk]), {"roles": ["reviewer"]})
    recruiter.refresh_from_db()
    assert actions.roles_of(recruiter) == ["reviewer"]
    staff_client.post(reverse("team:member-roles", args=[recruiter.pk]), {})
    assert actions.roles_of(recruiter) == []
    assert [(c[2], c[3], c[4]) for c in calls] == [
        (["recruiter"], ["reviewer"], "changed the roles of"),
        (["reviewer"], [], "changed the roles of"),
    ]
    assert all(c[0].username == "sam" and c[1] == recruiter for c in calls)


def test_a_role_change_is_in_the_audit_trail(staff_client, recruiter):
    from takehome.models import AuditEvent

    staff_client.post(reverse("team:member-roles", args=[recruiter.pk]), {"roles": ["reviewer"]})
    staff_client.post(reverse("team:member-deactivate", args=[recruiter.pk]))
    events = list(AuditEvent.objects.filter(target_type="auth.user", target_id=str(recruiter.pk)).order_by("pk"))
    assert [e.action for e in events] == ["role_change", "role_change"]
    assert events[0].actor_name == "sam" and "recruiter -> reviewer" in events[0].detail
    assert "deactivated" in events[1].detail


def test_changing_roles_keeps_other_groups(staff_client, recruiter):
    other = Group.objects.create(name="auditors")
    recruiter.groups.add(other)
    staff_client.post(reverse("team:member-roles", args=[recruiter.pk]), {"roles": ["reviewer"]})
    assert set(recruiter.groups.values_list("name", flat=True)) == {"auditors", "reviewer"}


def test_an_unknown_role_changes_nothing(staff_client, recruiter):
    response = staff_client.post(reverse("team:member-roles", args=[recruiter.pk]), {"roles": ["admin"]}, follow=True)
    assert b"Nothing was changed" in response.content
    assert actions.roles_of(recruiter) == ["recruiter"]


def test_deactivate_keeps_the_account_and_stops_logins(staff_client, client, recruiter):
    staff_client.post(reverse("team:member-deactivate", args=[recruiter.pk]))
    recruiter.refresh_from_db()
    assert not recruiter.is_active
    assert not client.login(username="rita", password="pw-rita")
    staff_client.post(reverse("team:member-reactivate", args=[recruiter.pk]))
    assert client.login(username="rita", password="pw-rita")


def test_staff_cannot_deactivate_themselves(staff_client, staff):
    response = staff_client.post(reverse("team:member-deactivate", args=[staff.pk]), follow=True)
    assert b"You cannot deactivate your own account" in response.content
    staff.refresh_from_db()
    assert staff.is_active


@pytest.mark.parametrize("manager", ["staff_client", "team_admin_client"])
def test_neither_staff_nor_a_team_admin_can_deactivate_a_superuser(request, manager):
    manager_client = request.getfixturevalue(manager)
    boss = User.objects.create_superuser("boss", "boss@example.com", "pw-boss")
    response = manager_client.post(reverse("team:member-deactivate", args=[boss.pk]), follow=True)
    assert b"only a superuser can deactivate them" in response.content
    boss.refresh_from_db()
    assert boss.is_active


def test_staff_can_email_a_fresh_set_password_link(staff_client, recruiter, mailoutbox):
    recruiter.email = "rita@example.com"
    recruiter.save()
    staff_client.post(reverse("team:member-send-link", args=[recruiter.pk]))
    (mail,) = mailoutbox
    assert mail.to == ["rita@example.com"] and "/accounts/set-password/" in mail.body


def test_createuser_prints_a_working_set_password_link(client, settings, groups):
    settings.SITE_URL = "http://127.0.0.1:8123"
    out, err = StringIO(), StringIO()
    call_command("createuser", "--role", "reviewer", "New@Example.com", stdout=out, stderr=err)
    user = User.objects.get(username="new@example.com")
    assert in_group(user, "reviewer") and not user.has_usable_password()
    link = out.getvalue().strip().splitlines()[-1]
    assert link.startswith("http://127.0.0.1:8123/accounts/set-password/")
    assert b"Set your password" in client.get(link.split("8123", 1)[1], follow=True).content


def test_createuser_reads_a_password_from_stdin(client, monkeypatch, groups):
    monkeypatch.setattr("sys.stdin", StringIO("a long new password 42\n"))
    out = StringIO()
    call_command("createuser", "--role", "recruiter", "--role", "reviewer", "both@example.com",
                 "--password-stdin", stdout=out)
    assert "can log in now" in out.getvalue()
    user = User.objects.get(username="both@example.com")
    assert actions.roles_of(user) == ["recruiter", "reviewer"]
    assert client.login(username="both@example.com", password="a long new password 42")


def test_createuser_refuses_a_weak_password(monkeypatch):
    monkeypatch.setattr("sys.stdin", StringIO("123\n"))
    with pytest.raises(CommandError, match="That password cannot be used"):
        call_command("createuser", "--role", "recruiter", "weak@example.com", "--password-stdin")
    assert not User.objects.filter(username="weak@example.com").exists()


def test_createuser_refuses_an_existing_account(reviewer):
    reviewer.email = "rob@example.com"
    reviewer.save()
    with pytest.raises(CommandError, match="already has an account"):
        call_command("createuser", "--role", "recruiter", "rob@example.com", stdout=StringIO())
    assert actions.roles_of(reviewer) == ["reviewer"]


def test_createuser_refuses_an_unknown_role():
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("createuser", "--role", "admin", "x@example.com")


def test_staff_without_a_role_land_on_the_team_page(staff_client):
    response = staff_client.get(reverse("home"))
    assert response.status_code == 302 and response.url == reverse("team:list")


@pytest.fixture
def team_admin_client(client, recruiter):
    """rita, a recruiter who is also a team admin, without Django's staff flag."""
    recruiter.groups.add(Group.objects.get_or_create(name="team admin")[0])
    client.force_login(recruiter)
    return client


def test_a_recruiter_who_is_team_admin_adds_a_reviewer_and_is_shown_the_link_once(
        team_admin_client, client, mailoutbox, django_capture_on_commit_callbacks):
    body = team_admin_client.get(reverse("takehome:packet-list")).content.decode()
    assert 'href="/team/"' in body and 'href="/admin/"' not in body  # the Team page, not the admin
    with django_capture_on_commit_callbacks(execute=True):
        response = team_admin_client.post(reverse("team:invite"), {"email": "new@example.com", "role": "reviewer"})
    assert response.status_code == 302
    user = User.objects.get(username="new@example.com")
    assert in_group(user, "reviewer")
    page = team_admin_client.get(reverse("team:list")).content.decode()
    shown = re.search(r'id="set-password-link".*?value="([^"]+)"', page, re.S).group(1)
    (mail,) = mailoutbox
    assert shown.startswith("http://127.0.0.1:8000/accounts/set-password/") and "/accounts/set-password/" in mail.body
    # Once: the next visit does not show it again.
    assert 'id="set-password-link"' not in team_admin_client.get(reverse("team:list")).content.decode()
    # The shown link works, as the emailed one does.
    opened = client.get(shown.split("127.0.0.1:8000", 1)[1], follow=True)
    assert b"Set your password" in opened.content


def test_a_fresh_link_emailed_from_the_page_is_shown_once_too(team_admin_client, reviewer, mailoutbox):
    reviewer.email = "rob@example.com"
    reviewer.save()
    team_admin_client.post(reverse("team:member-send-link", args=[reviewer.pk]))
    page = team_admin_client.get(reverse("team:list")).content.decode()
    assert "Set-password link for rob" in page and len(mailoutbox) == 1


def test_team_admin_is_a_role_given_on_the_page_never_alone_and_never_by_a_non_admin(
        team_admin_client, client, reviewer, make_reviewer):
    team_admin_client.post(reverse("team:member-roles", args=[reviewer.pk]), {"roles": ["reviewer", "team-admin"]})
    assert actions.roles_of(reviewer) == ["reviewer", "team-admin"]
    with pytest.raises(actions.TeamError, match="at least one role"):
        actions.do_create_member("only@example.com", ["team-admin"])
    other = make_reviewer("ann")
    client.force_login(other)
    assert client.post(reverse("team:member-roles", args=[other.pk]), {"roles": ["team-admin"]}).status_code == 403
    assert actions.roles_of(other) == ["reviewer"]


def test_the_demo_recruiter_manages_the_team(settings, tmp_path, client):
    settings.VAR_DIR, settings.DEBUG = tmp_path, True
    call_command("seed_demo", stdout=StringIO())
    recruiter = User.objects.get(username="recruiter")
    client.force_login(recruiter)
    assert client.get(reverse("team:list")).status_code == 200
    assert not recruiter.is_staff
