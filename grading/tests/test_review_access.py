"""Every reviewer URL: anonymous users and candidates are sent to log in, others without the reviewer group get 403."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

pytestmark = pytest.mark.django_db


def urls(submission):
    pk, slug = submission.pk, submission.invitation.packet.slug
    return [
        ("get", "/review/"),
        ("get", f"/review/{pk}/"),
        ("post", f"/review/{pk}/mark/red_log/"),
        ("post", f"/review/{pk}/submit/"),
        ("get", f"/review/debrief/{slug}/"),
        ("get", f"/review/debrief/{slug}.csv"),
    ]


URL_IDS = ["queue", "review", "mark", "submit", "debrief", "csv"]


@pytest.mark.parametrize("index", range(6), ids=URL_IDS)
def test_anonymous_users_are_sent_to_log_in(client, submission, index):
    method, url = urls(submission)[index]
    response = getattr(client, method)(url, {"passed": "true"} if method == "post" else None)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("index", range(6), ids=URL_IDS)
def test_a_candidate_with_their_link_open_is_still_anonymous_here(client, submission, index):
    token = submission.invitation.link_token()
    assert client.get(reverse("sessions_app:landing", args=[token])).status_code == 200
    method, url = urls(submission)[index]
    response = getattr(client, method)(url, {"passed": "true"} if method == "post" else None)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert b"red.log" not in response.content


@pytest.mark.parametrize("index", range(6), ids=URL_IDS)
def test_a_recruiter_without_the_reviewer_group_gets_403(client, recruiter, submission, index):
    client.force_login(recruiter)
    method, url = urls(submission)[index]
    response = getattr(client, method)(url, {"passed": "true"} if method == "post" else None)
    assert response.status_code == 403


@pytest.mark.parametrize("index", range(6), ids=URL_IDS)
def test_a_user_in_no_group_gets_403(client, groups, submission, index):
    client.force_login(User.objects.create_user("nobody", password="x"))
    method, url = urls(submission)[index]
    response = getattr(client, method)(url, {"passed": "true"} if method == "post" else None)
    assert response.status_code == 403


@pytest.mark.parametrize("index", [0, 1, 4, 5], ids=["queue", "review", "debrief", "csv"])
def test_a_reviewer_reaches_every_page(client, reviewer, submission, index):
    client.force_login(reviewer)
    method, url = urls(submission)[index]
    assert client.get(url).status_code == 200


def test_nothing_is_written_by_a_refused_post(client, recruiter, submission):
    from grading.models import Mark

    client.force_login(recruiter)
    client.post(f"/review/{submission.pk}/mark/red_log/", {"passed": "true"})
    assert not Mark.objects.exists()


def test_home_sends_a_reviewer_to_the_queue(client, reviewer):
    client.force_login(reviewer)
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == reverse("grading:queue")


def test_the_nav_shows_review_to_reviewers_only(client, reviewer, recruiter):
    client.force_login(reviewer)
    assert b'href="/review/"' in client.get("/review/").content
    client.force_login(recruiter)
    assert b'href="/review/"' not in client.get("/packets/").content
