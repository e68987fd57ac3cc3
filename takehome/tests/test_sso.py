"""Single sign-on through a real OpenID Connect provider (takehome/tests/oidc_provider.py, on a local port).

Each sign-in goes the whole way: this site sends the browser (the test client) to the provider; the person
signs in there (a real POST to its sign-in form); the provider sends them back with a code; this site trades
it for an RS256-signed ID token, checks it against the provider's published keys, and signs them on.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth.models import User
from django.urls import reverse

from shared.http import SHOWN_ONCE_KEY
from takehome.models import AuditEvent
from takehome.sso.backend import roles_from_claims
from takehome.team.actions import do_create_member, do_deactivate_member, do_set_roles, roles_of

pytestmark = pytest.mark.django_db

CALLBACK = "http://testserver/accounts/sso/callback/"
ROLE_MAP = {"engineers": ["reviewer"], "hiring": ["recruiter"], "hiring-leads": ["recruiter", "team-admin"]}


@pytest.fixture
def idp(oidc_provider, groups):
    oidc_provider.allow_redirect(CALLBACK)
    return oidc_provider


@pytest.fixture
def by_claim(settings):
    settings.OIDC_ROLES_CLAIM = "groups"
    settings.OIDC_ROLE_MAP = ROLE_MAP


def provider_answer(client, idp, username: str, next_url: str = "") -> str:
    """Start a sign-in here and sign in at the provider as `username`: the address it sends the browser back to."""
    start = client.get(reverse("sso-login") + (f"?next={next_url}" if next_url else ""))
    assert start.status_code == 302
    authorize = start["Location"]
    assert authorize.startswith(idp.issuer + "/authorize?")
    asked = parse_qs(urlsplit(authorize).query)
    assert asked["code_challenge_method"] == ["S256"] and asked["nonce"] and asked["state"]
    signed_in = requests.post(authorize, data={"username": username, "password": f"pw-{username}"},
                              allow_redirects=False, timeout=10)
    assert signed_in.status_code == 302, signed_in.text
    assert signed_in.headers["Location"].startswith(CALLBACK)
    return signed_in.headers["Location"]


def sign_on(client, idp, username: str, next_url: str = ""):
    return client.get(provider_answer(client, idp, username, next_url))


def signed_on_as(client) -> User | None:
    pk = client.session.get("_auth_user_id")
    return User.objects.get(pk=pk) if pk else None


def test_roles_come_from_the_claim_at_each_sign_on(client, idp, by_claim):
    idp.add_person("rev", "Rev@Example.com", groups=["engineers", "other-app"])
    answer = sign_on(client, idp, "rev")
    assert answer.status_code == 302 and answer["Location"] == reverse("home")
    user = signed_on_as(client)
    assert user.username == "rev@example.com" and user.email == "rev@example.com"
    assert roles_of(user) == ["reviewer"] and not user.has_usable_password() and not user.is_staff
    assert client.get(reverse("home"))["Location"] == reverse("grading:queue")

    # The provider moves them: the next sign-on gives the new roles, and takes the old one away.
    idp.people["rev"].claims["groups"] = ["hiring-leads"]
    client.logout()
    sign_on(client, idp, "rev")
    assert signed_on_as(client) == user and roles_of(user) == ["recruiter", "team-admin"]
    assert client.get(reverse("home"))["Location"] == reverse("takehome:packet-list")
    changes = AuditEvent.objects.filter(action="role_change", target_id=str(user.pk)).order_by("pk")
    assert [e.detail.split(": ")[-1] for e in changes] == [
        "roles none -> none", "roles none -> reviewer", "roles reviewer -> recruiter, team-admin"]
    assert "groups claim" in changes.last().detail and changes.last().actor == user


def test_a_sign_in_keeps_where_the_person_was_going(client, idp, by_claim):
    idp.add_person("rev", "rev@example.com", groups=["engineers"])
    assert sign_on(client, idp, "rev", next_url="/review/?page=2")["Location"] == "/review/?page=2"


@pytest.mark.parametrize("claims, name, roles", [
    ({"groups": ["engineers", "hiring"]}, "groups", ["recruiter", "reviewer"]),
    ({"groups": "engineers"}, "groups", ["reviewer"]),  # a single value, not a list
    ({"groups": ["Engineers", "nobody"]}, "groups", []),  # values are compared exactly
    ({"groups": [{"name": "engineers"}, True, 3]}, "groups", []),  # neither strings nor numbers
    ({}, "groups", []),
    ({"realm_access": {"roles": ["hiring-leads"]}}, "realm_access.roles", ["recruiter", "team-admin"]),
    ({"https://example.com/roles": ["hiring"]}, "https://example.com/roles", ["recruiter"]),
])
def test_claim_values_map_to_roles(claims, name, roles):
    assert roles_from_claims(claims, name, ROLE_MAP) == roles


def test_a_first_time_member_with_no_role_is_told_to_ask_a_team_admin(client, idp, groups):
    do_create_member("lead@example.com", ["recruiter", "team-admin"])
    idp.add_person("new", "new@example.com")
    assert sign_on(client, idp, "new")["Location"] == reverse("home")
    page = client.get(reverse("home"))
    body = page.content.decode()
    assert page.status_code == 403 and "Traceback" not in body
    assert "has no role here yet" in body and "Ask a team admin" in body and "on the Team page" in body
    assert "lead@example.com" in body
    # The team admin gives a role on the Team page; the member's next page is their desk.
    do_set_roles(signed_on_as(client), ["reviewer"])
    assert client.get(reverse("home"))["Location"] == reverse("grading:queue")


def test_with_a_claim_the_no_role_page_says_where_roles_come_from(client, idp, by_claim):
    idp.add_person("new", "new@example.com", groups=["marketing"])
    sign_on(client, idp, "new")
    body = client.get(reverse("home")).content.decode()
    assert "has no role here yet" in body and "<code>groups</code> claim" in body


def test_an_existing_account_is_found_by_its_verified_email_and_keeps_its_roles(client, idp, groups):
    rita = do_create_member("rita@example.com", ["recruiter"], password="a long password 42").user
    idp.add_person("rita", "RITA@example.com")
    sign_on(client, idp, "rita")
    assert signed_on_as(client) == rita and roles_of(rita) == ["recruiter"]
    assert User.objects.count() == 1


@pytest.mark.parametrize("verified", [False, "false", None])
def test_an_unverified_email_never_signs_on_to_an_existing_staff_account(client, idp, groups, verified):
    boss = User.objects.create_user("boss", email="boss@example.com", password="pw", is_staff=True,
                                    is_superuser=True)
    idp.add_person("mallory", "boss@example.com", email_verified=verified)
    answer = sign_on(client, idp, "mallory")
    body = answer.content.decode()
    assert answer.status_code == 403 and "has not verified the email address boss@example.com" in body
    assert signed_on_as(client) is None
    assert list(User.objects.all()) == [boss]  # not linked, and no second account made under the address


def test_an_unverified_email_makes_no_account_either(client, idp, groups):
    idp.add_person("mallory", "someone@example.com", email_verified=False)
    assert sign_on(client, idp, "mallory").status_code == 403
    assert not User.objects.exists()


def test_a_provider_that_never_sends_email_verified_can_be_trusted_by_a_setting(client, idp, groups, settings):
    rita = do_create_member("rita@example.com", ["recruiter"]).user
    idp.add_person("rita", "rita@example.com", email_verified=None)
    settings.OIDC_TRUST_EMAILS = True
    sign_on(client, idp, "rita")
    assert signed_on_as(client) == rita
    # An explicit "not verified" is refused whatever the setting says.
    client.logout()
    idp.people["rita"].claims["email_verified"] = False
    assert sign_on(client, idp, "rita").status_code == 403 and signed_on_as(client) is None


def test_an_id_token_signed_with_a_key_the_provider_does_not_publish_is_refused(client, idp, by_claim):
    idp.add_person("rev", "rev@example.com", groups=["engineers"])
    idp.rogue_signing = True
    answer = sign_on(client, idp, "rev")
    assert answer.status_code == 400 and "could not be verified" in answer.content.decode()
    assert signed_on_as(client) is None and not User.objects.exists()


def test_an_id_token_from_another_issuer_is_refused(client, idp, by_claim):
    idp.add_person("rev", "rev@example.com", groups=["engineers"])
    idp.token_issuer = "http://127.0.0.1:1/someone-else"
    assert sign_on(client, idp, "rev").status_code == 400 and signed_on_as(client) is None


def test_an_answer_with_a_state_this_browser_did_not_start_is_refused(client, idp, by_claim):
    idp.add_person("rev", "rev@example.com", groups=["engineers"])
    answer = provider_answer(client, idp, "rev")
    code = parse_qs(urlsplit(answer).query)["code"][0]
    forged = client.get(reverse("sso-callback"), {"code": code, "state": "not-the-one-we-sent"})
    assert forged.status_code == 400 and "does not belong to a sign-in started" in forged.content.decode()
    assert signed_on_as(client) is None


def test_an_answer_sent_to_another_browser_is_refused(client, idp, by_claim):
    """Login CSRF: an attacker's own answer, handed to a victim's browser, must not sign the victim on."""
    from django.test import Client

    idp.add_person("mallory", "mallory@example.com", groups=["engineers"])
    answer = provider_answer(Client(), idp, "mallory")
    assert client.get(answer).status_code == 400 and signed_on_as(client) is None


def test_an_answer_works_once(client, idp, by_claim):
    idp.add_person("rev", "rev@example.com", groups=["engineers"])
    answer = provider_answer(client, idp, "rev")
    assert client.get(answer).status_code == 302
    client.logout()
    again = client.get(answer)
    assert again.status_code == 400 and signed_on_as(client) is None


def test_a_provider_error_is_a_page(client, idp):
    start = client.get(reverse("sso-login"))
    state = parse_qs(urlsplit(start["Location"]).query)["state"][0]
    answer = client.get(reverse("sso-callback"), {"state": state, "error": "access_denied",
                                                  "error_description": "The user said no"})
    assert answer.status_code == 400 and "did not sign you in (The user said no)" in answer.content.decode()


def test_a_deactivated_member_cannot_sign_on_and_their_session_ends(client, idp, by_claim):
    idp.add_person("rev", "rev@example.com", groups=["engineers"])
    sign_on(client, idp, "rev")
    user = signed_on_as(client)
    assert client.get(reverse("grading:queue")).status_code == 200
    do_deactivate_member(user, actor=None)
    assert client.get(reverse("grading:queue")).status_code == 302  # to the login page
    answer = sign_on(client, idp, "rev")
    assert answer.status_code == 403 and "is deactivated" in answer.content.decode()
    assert client.get(reverse("grading:queue")).status_code == 302


def test_logging_out_ends_the_provider_session_too_and_comes_back_to_the_login_page(client, idp, by_claim):
    idp.add_person("rev", "rev@example.com", groups=["engineers"])
    sign_on(client, idp, "rev")
    id_token = client.session["oidc_id_token"]
    out = client.post(reverse("logout"))
    assert out.status_code == 302 and out["Location"].startswith(idp.issuer + "/logout?")
    assert signed_on_as(client) is None
    assert client.get(reverse("grading:queue"))["Location"].startswith(reverse("login"))
    ended = requests.get(out["Location"], allow_redirects=False, timeout=10)
    assert ended.status_code == 302 and ended.headers["Location"] == "http://testserver" + reverse("login")
    assert idp.ended_sessions[-1]["id_token_hint"] == id_token


def test_a_password_session_logs_out_here_only(client, idp, recruiter):
    client.force_login(recruiter)
    out = client.post(reverse("logout"))
    assert out["Location"] == reverse("login") and not idp.ended_sessions


def test_the_login_page_offers_both_while_passwords_are_on(client, idp, recruiter, settings):
    settings.OIDC_PROVIDER_NAME = "Acme SSO"
    body = client.get(reverse("login")).content.decode()
    assert "Log in with Acme SSO" in body and 'name="password"' in body
    assert client.post(reverse("login"), {"username": "rita", "password": "pw-rita"}).status_code == 302


def test_password_login_off_shows_only_the_button_and_refuses_a_password(client, idp, recruiter, settings):
    settings.PASSWORD_LOGIN = False
    page = client.get(reverse("login"))
    body = page.content.decode()
    assert 'id="sso-login"' in body and 'name="password"' not in body and "<form method=\"post\" action=\"/accounts/login/\"" not in body
    refused = client.post(reverse("login"), {"username": "rita", "password": "pw-rita"})
    assert refused.status_code == 403 and "Logging in with a password is turned off" in refused.content.decode()
    assert signed_on_as(client) is None
    # No other form takes a password either: the admin's login sends people to this one.
    admin = client.get("/admin/login/?next=/admin/")
    assert admin.status_code == 302 and admin["Location"].startswith(reverse("login"))
    admin_post = client.post("/admin/login/", {"username": "rita", "password": "pw-rita"})
    assert admin_post.status_code == 302 and signed_on_as(client) is None
    from django.contrib.auth import authenticate

    assert authenticate(username="rita", password="pw-rita") is None


def test_turning_passwords_off_ends_the_sessions_a_password_opened(client, idp, recruiter, settings):
    assert client.post(reverse("login"), {"username": "rita", "password": "pw-rita"}).status_code == 302
    assert client.get(reverse("takehome:packet-list")).status_code == 200
    settings.PASSWORD_LOGIN = False
    assert client.get(reverse("takehome:packet-list"))["Location"].startswith(reverse("login"))


def test_sign_on_is_absent_when_it_is_not_set_up(client, db):
    assert client.get(reverse("sso-login")).status_code == 404
    assert client.get(reverse("sso-callback"), {"code": "x", "state": "y"}).status_code == 404
    assert "sso-login" not in client.get(reverse("login")).content.decode()


@pytest.mark.axes
def test_the_password_lockout_still_works_beside_sign_on(client, idp, recruiter, settings):
    settings.AXES_FAILURE_LIMIT = 2
    for _ in range(2):
        client.post(reverse("login"), {"username": "rita", "password": "wrong"})
    locked = client.post(reverse("login"), {"username": "rita", "password": "pw-rita"})
    assert locked.status_code == 429 and signed_on_as(client) is None


def test_an_unreachable_provider_is_a_page_not_a_traceback(client, db, settings):
    from conftest import free_port
    from takehome.sso import provider

    settings.OIDC_ENABLED, settings.OIDC_ENDPOINTS = True, {}
    settings.OIDC_ISSUER = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    provider.forget()
    answer = client.get(reverse("sso-login"))
    assert answer.status_code == 502 and "could not be reached" in answer.content.decode()


def test_a_code_the_provider_refuses_is_a_page(client, idp, by_claim):
    idp.add_person("rev", "rev@example.com", groups=["engineers"])
    answer = provider_answer(client, idp, "rev")
    idp.codes.clear()  # the provider forgot it (expired, or used by another)
    refused = client.get(answer)
    assert refused.status_code == 400 and "refused to finish the sign-in" in refused.content.decode()
    assert signed_on_as(client) is None


def test_with_passwords_off_a_team_invitation_says_to_sign_on(client, idp, settings, mailoutbox,
                                                               django_capture_on_commit_callbacks):
    lead = do_create_member("lead@example.com", ["recruiter", "team-admin"]).user
    client.force_login(lead, backend="takehome.sso.backend.SignOnBackend")
    settings.PASSWORD_LOGIN = False
    settings.OIDC_ROLES_CLAIM, settings.OIDC_ROLE_MAP = "groups", ROLE_MAP
    page = client.get(reverse("team:list")).content.decode()
    assert "<code>groups</code> claim" in page and "log in with single sign-on" in page
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("team:invite"), {"email": "new@example.com", "role": "reviewer"})
    assert "set-password" not in mailoutbox[-1].body and "with single sign-on" in mailoutbox[-1].body
    assert SHOWN_ONCE_KEY not in client.session
    new = User.objects.get(email="new@example.com")
    assert "Email a set-password link" not in client.get(reverse("team:list")).content.decode()
    sent = len(mailoutbox)
    client.post(reverse("team:member-send-link", args=[new.pk]))
    assert len(mailoutbox) == sent and SHOWN_ONCE_KEY not in client.session
    # The invited person signs on with that verified address, and finds the account and its role.
    idp.add_person("new", "new@example.com", groups=["engineers"])
    client.logout()
    sign_on(client, idp, "new")
    assert signed_on_as(client) == User.objects.get(email="new@example.com")
