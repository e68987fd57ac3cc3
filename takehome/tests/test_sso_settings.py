"""The single sign-on settings refuse half a configuration at start, with one line naming what to set."""

import secrets

import pytest

from takehome.tests.test_settings import manage, stopped_with

SSO = {"TAKEHOME_OIDC_ISSUER": "https://login.example.com/realms/staff", "TAKEHOME_OIDC_CLIENT_ID": "takehome",
       "TAKEHOME_OIDC_CLIENT_SECRET": "hunter2-hunter2"}


@pytest.mark.parametrize("env, says", [
    ({"TAKEHOME_OIDC_CLIENT_ID": "takehome"}, "TAKEHOME_OIDC_CLIENT_ID is set but TAKEHOME_OIDC_ISSUER is not"),
    ({**SSO, "TAKEHOME_OIDC_CLIENT_SECRET": ""},
     "TAKEHOME_OIDC_ISSUER is set but TAKEHOME_OIDC_CLIENT_SECRET is not"),
    ({**SSO, "TAKEHOME_OIDC_CLIENT_ID": ""}, "TAKEHOME_OIDC_ISSUER is set but TAKEHOME_OIDC_CLIENT_ID is not"),
    ({**SSO, "TAKEHOME_OIDC_AUTHORIZATION_URL": "https://login.example.com/auth"},
     "TAKEHOME_OIDC_TOKEN_URL is not set while the other endpoints are"),
    ({**SSO, "TAKEHOME_OIDC_ROLES_CLAIM": "groups"}, "TAKEHOME_OIDC_ROLE_MAP is not set"),
    ({**SSO, "TAKEHOME_OIDC_ROLE_MAP": "hiring=recruiter"}, "TAKEHOME_OIDC_ROLES_CLAIM is not set"),
    ({**SSO, "TAKEHOME_OIDC_ROLES_CLAIM": "groups", "TAKEHOME_OIDC_ROLE_MAP": "hiring=recruiter,engineers=admin"},
     "TAKEHOME_OIDC_ROLE_MAP has 'engineers=admin': write VALUE=ROLE pairs"),
    ({"TAKEHOME_PASSWORD_LOGIN": "false"}, "TAKEHOME_PASSWORD_LOGIN=false needs single sign-on"),
])
def test_half_a_sign_on_configuration_stops_the_process_naming_the_variable(env, says):
    line = stopped_with(manage("check", DEBUG="true", **env))
    assert says in line and "hunter2" not in line


def test_production_refuses_a_plain_http_issuer_elsewhere_than_this_machine():
    env = {**SSO, "TAKEHOME_OIDC_ISSUER": "http://login.example.com"}
    line = stopped_with(manage("check", DEBUG="false", SECRET_KEY=secrets.token_urlsafe(50),
                               ALLOWED_HOSTS="takehome.example.com", **env))
    assert "TAKEHOME_OIDC_ISSUER=http://login.example.com is plain http" in line


def test_a_whole_configuration_is_read(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("from-the-file\n")
    show = ("from django.conf import settings as s; print(s.OIDC_ENABLED, s.OIDC_CLIENT_SECRET, "
            "s.OIDC_ROLE_MAP, s.CONTENT_SECURITY_POLICY['DIRECTIVES']['form-action'], s.PASSWORD_LOGIN)")
    result = manage("shell", "-c", show, DEBUG="true", **SSO, TAKEHOME_OIDC_CLIENT_SECRET_FILE=str(secret),
                    TAKEHOME_OIDC_ROLES_CLAIM="groups", TAKEHOME_PASSWORD_LOGIN="false",
                    TAKEHOME_OIDC_ROLE_MAP="hiring=recruiter, hiring=team-admin ,engineers=reviewer")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == (
        "True from-the-file {'hiring': ['recruiter', 'team-admin'], 'engineers': ['reviewer']} "
        "[\"'self'\", 'https://login.example.com'] False")
