"""Recruiter pages need a login and the recruiter group."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

PAGES = [
    ("takehome:packet-list", {}),
    ("takehome:packet-create", {}),
    ("takehome:packet-detail", {"slug": "refund-sum"}),
    ("takehome:packet-edit", {"slug": "refund-sum"}),
    ("takehome:packet-invite", {"slug": "refund-sum"}),
    ("takehome:invitation-board", {"slug": "refund-sum"}),
    ("candidates:search", {}),
]
POSTS = [("takehome:invitation-resend", {"pk": 1}), ("takehome:invitation-revoke", {"pk": 1})]


@pytest.mark.parametrize("name, kwargs", PAGES + POSTS)
def test_anonymous_users_are_sent_to_the_login_page(client, sample_packet, name, kwargs):
    url = reverse(name, kwargs=kwargs)
    response = client.post(url) if (name, kwargs) in POSTS else client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name, kwargs", PAGES + POSTS)
def test_a_reviewer_is_not_a_recruiter(client, reviewer, sample_packet, name, kwargs):
    client.force_login(reviewer)
    url = reverse(name, kwargs=kwargs)
    response = client.post(url) if (name, kwargs) in POSTS else client.get(url)
    assert response.status_code == 403


@pytest.mark.parametrize("name, kwargs", PAGES)
def test_a_recruiter_sees_every_page(recruiter_client, sample_packet, name, kwargs):
    assert recruiter_client.get(reverse(name, kwargs=kwargs)).status_code == 200


def test_login_with_the_form_lands_a_recruiter_on_the_packets(client, recruiter, sample_packet):
    response = client.post(reverse("login"), {"username": "rita", "password": "pw-rita"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("takehome:packet-list")
    assert b"Refunds in the invoice total" in response.content


def test_a_wrong_password_says_so(client, recruiter):
    response = client.post(reverse("login"), {"username": "rita", "password": "nope"})
    assert b"do not match" in response.content


def test_home_sends_anonymous_users_to_log_in(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == reverse("login")


@pytest.mark.parametrize("url", ["/packets/", "/review/"])
def test_a_page_reads_the_viewers_groups_once(client, recruiter, reviewer, sample_packet, url):
    """The view's check and the navigation's links share one read of the viewer's groups."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(recruiter if url == "/packets/" else reviewer)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    assert sum("auth_group" in q["sql"] for q in queries.captured_queries) == 1


def test_a_403_logs_one_line_and_no_traceback(client, recruiter, caplog):
    """A right answer to the wrong role is no crash: the log says so in one line."""
    import logging

    client.force_login(recruiter)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert client.get("/team/").status_code == 403
    records = [r for r in caplog.records if r.name == "django.request"]
    # Django attaches the exception; the console handler's filter (settings.LOGGING) took it off.
    assert records and all(r.exc_info is None and "Forbidden" in r.getMessage() for r in records)
