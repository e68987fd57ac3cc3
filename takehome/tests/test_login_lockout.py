"""Failed logins are limited (django-axes): a locked-out person gets a page saying when to try again."""

import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

pytestmark = [pytest.mark.django_db, pytest.mark.axes]


@pytest.fixture
def limits(settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.LOGIN_LOCKOUT_MINUTES = 15


def login(client, password, username="rita"):
    return client.post(reverse("login"), {"username": username, "password": password})


def test_after_too_many_failures_even_the_right_password_is_refused_with_a_page(client, recruiter, limits):
    for _ in range(2):
        response = login(client, "wrong")
        assert response.status_code == 200 and b"do not match" in response.content
    locked = login(client, "wrong")
    assert locked.status_code == 429
    body = locked.content.decode()
    assert "Too many failed logins" in body and "Try again after" in body and "15 minutes" in body
    assert "Traceback" not in body
    # when, in UTC inside a <time> that localtime.js gives the viewer's own time beside
    assert re.search(r'Try again after <strong><time datetime="[^"]+\+00:00" data-format="Y-m-d H:i T">'
                     r"\d{4}-\d\d-\d\d \d\d:\d\d UTC</time></strong>\.", body)
    right = login(client, "pw-rita")
    assert right.status_code == 429
    assert "_auth_user_id" not in client.session


def test_another_username_from_the_same_address_is_not_locked_out(client, recruiter, reviewer, limits):
    for _ in range(3):
        login(client, "wrong")
    assert login(client, "pw-rob", username="rob").status_code == 302


def test_a_success_clears_the_count(client, recruiter, limits):
    login(client, "wrong")
    login(client, "wrong")
    assert login(client, "pw-rita").status_code == 302
    client.logout()
    login(client, "wrong")
    assert login(client, "pw-rita").status_code == 302


def test_the_lockout_ends_after_its_time(client, recruiter, limits):
    from datetime import timedelta

    from axes.models import AccessAttempt
    from django.utils import timezone

    for _ in range(3):
        login(client, "wrong")
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert login(client, "pw-rita").status_code == 302
    assert User.objects.get(username="rita").last_login is not None
