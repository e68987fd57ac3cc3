"""Staff in headless Chromium sign on through a real OpenID Connect provider and land at their desk.

The provider (takehome/tests/oidc_provider.py) serves its own sign-in page on a local port and issues
RS256-signed ID tokens; the browser goes there and back as a person's would.
"""

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from takehome.team.actions import roles_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def site(live_server, oidc_provider, groups, settings):
    oidc_provider.allow_redirect(live_server.url + "/accounts/sso/callback/")
    settings.OIDC_PROVIDER_NAME = "Example SSO"
    settings.OIDC_ROLES_CLAIM = "groups"
    settings.OIDC_ROLE_MAP = {"engineers": ["reviewer"], "hiring": ["recruiter"]}
    oidc_provider.add_person("rev", "rev@example.com", groups=["engineers"])
    oidc_provider.add_person("rec", "rec@example.com", groups=["hiring"])
    oidc_provider.add_person("newbie", "newbie@example.com", groups=["marketing"])
    return live_server.url


def sign_on(page, site, idp, username):
    page.goto(site + "/")
    page.get_by_role("link", name="Log in with Example SSO").click()
    page.wait_for_url(idp.issuer + "/authorize?**")
    page.fill("#username", username)
    page.fill("#password", f"pw-{username}")
    page.click("button[type=submit]")


def test_a_reviewer_claim_lands_on_the_queue_and_a_recruiter_claim_on_the_packets(site, page, oidc_provider):
    sign_on(page, site, oidc_provider, "rev")
    page.wait_for_url(re.compile(r"/review/$"))
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    expect(page.get_by_role("button", name="Log out rev@example.com")).to_be_visible()
    assert roles_of(User.objects.get(email="rev@example.com")) == ["reviewer"]

    # Logging out ends the provider's session too, and comes back to the login page.
    page.get_by_role("button", name="Log out rev@example.com").click()
    page.wait_for_url(re.compile(r"/accounts/login/$"))
    assert oidc_provider.ended_sessions
    page.goto(site + "/review/")
    page.wait_for_url(re.compile(r"/accounts/login/\?next="))

    sign_on(page, site, oidc_provider, "rec")
    page.wait_for_url(re.compile(r"/packets/$"))
    expect(page.get_by_role("heading", name="Packets", exact=True)).to_be_visible()
    assert roles_of(User.objects.get(email="rec@example.com")) == ["recruiter"]


def test_someone_without_a_role_gets_a_page_saying_whom_to_ask(site, page, oidc_provider):
    User.objects.create_user("lead@example.com", email="lead@example.com", is_staff=True)
    sign_on(page, site, oidc_provider, "newbie")
    expect(page.get_by_role("heading", name="Welcome, newbie@example.com")).to_be_visible()
    text = page.locator("#no-role").inner_text()
    assert "has no role here yet" in text and "lead@example.com" in text and "Traceback" not in text


def test_with_password_login_off_the_login_page_is_the_button_alone(site, page, oidc_provider, settings):
    settings.PASSWORD_LOGIN = False
    page.goto(site + "/accounts/login/")
    expect(page.get_by_role("link", name="Log in with Example SSO")).to_be_visible()
    assert page.locator("input[type=password]").count() == 0
    sign_on(page, site, oidc_provider, "rev")
    page.wait_for_url(re.compile(r"/review/$"))


def test_the_sign_on_pages_pass_csp_axe_and_fit_a_phone(site, browser, oidc_provider, settings, live_server):
    """The login page with the button (passwords on, then off), a refused sign-on's page and the no-role page:
    reached through the provider, so not in test_every_page.py's walk."""
    from axe_playwright_python.sync_playwright import Axe

    from conftest import in_flight
    from takehome.tests.browser.test_every_page import AXE_OPTIONS, PHONE_WIDTH, RECORD_CSP

    oidc_provider.add_person("mallory", "mallory@example.com", email_verified=False)
    context = browser.new_context(viewport={"width": PHONE_WIDTH, "height": 900})
    context.add_init_script(RECORD_CSP)
    page = context.new_page()

    def check(heading: str) -> None:
        page.get_by_role("heading", name=heading).wait_for()
        assert page.evaluate("window.__csp") == []
        serious = [f"{rule['impact']} {rule['id']}: {rule['help']}"
                   for rule in Axe().run(page, options=AXE_OPTIONS).response["violations"]
                   if rule["impact"] in ("serious", "critical")]
        assert serious == []
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE_WIDTH

    try:
        page.goto(site + "/accounts/login/")
        check("Log in")
        sign_on(page, site, oidc_provider, "mallory")
        check("Single sign-on did not work")
        assert "has not verified the email address mallory@example.com" in page.locator("main").inner_text()
        sign_on(page, site, oidc_provider, "newbie")
        check("Welcome, newbie@example.com")
        page.get_by_role("button", name="Log out newbie@example.com").click()
        page.wait_for_url(re.compile(r"/accounts/login/$"))
        settings.PASSWORD_LOGIN = False
        page.reload()
        check("Log in")
    finally:
        context.close()
        # why: as the page fixture does, the database is emptied for the next test only once no request runs.
        assert in_flight(live_server).wait_idle(60)
