"""Staff in headless Chromium: invite a reviewer on the Team page; the reviewer sets a password and logs in."""

import re

import pytest
from django.contrib.auth.models import User

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def log_in(page, base, username, password):
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")


def test_staff_invites_a_reviewer_who_sets_a_password_and_logs_in(live_server, page, browser, groups,
                                                                   settings, mailoutbox):
    settings.SITE_URL = live_server.url
    User.objects.create_user("sam", email="sam@example.com", password="pw-sam", is_staff=True)
    log_in(page, live_server.url, "sam", "pw-sam")
    page.get_by_role("link", name="Team").click()
    page.get_by_role("heading", name="Team").wait_for()

    page.fill("#id_email", "rev@example.com")
    page.select_option("#id_role", "reviewer")
    page.click("button:has-text('Send the invitation')")
    page.locator(".message.success").wait_for()
    row = page.locator("tr", has_text="rev@example.com")
    assert "invited" in row.inner_text()

    # A second invitation to the same email: a message, and nothing else.
    page.fill("#id_email", "rev@example.com")
    page.click("button:has-text('Send the invitation')")
    page.get_by_text("rev@example.com already has an account").wait_for()
    assert User.objects.filter(email="rev@example.com").count() == 1 and len(mailoutbox) == 1

    # At a phone's width the page is no wider than the screen; the table scrolls in its own box.
    narrow = browser.new_context(viewport={"width": 390, "height": 844}, storage_state=page.context.storage_state())
    phone = narrow.new_page()
    phone.goto(live_server.url + "/team/")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    narrow.close()

    link = re.search(r"http://\S+/accounts/set-password/\S+/", mailoutbox[0].body).group(0)
    invitee = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    invitee.goto(link)
    invitee.get_by_role("heading", name="Set your password").wait_for()
    invitee.fill("#id_new_password1", "a long new password 42")
    invitee.fill("#id_new_password2", "a long new password 42")
    invitee.click("button:has-text('Set my password')")
    invitee.get_by_role("heading", name="Your password is set").wait_for()
    log_in(invitee, live_server.url, "rev@example.com", "a long new password 42")
    invitee.wait_for_url(re.compile(r"/review/"))
    invitee.context.close()
