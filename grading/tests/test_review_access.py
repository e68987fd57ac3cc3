"""Every reviewer URL: anonymous users and candidates log in first; recruiters read, never mark; others get 403."""

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
        ("get", "/review/debrief/"),
    ]


URL_IDS = ["queue", "review", "mark", "submit", "debrief", "csv", "debriefs"]


@pytest.mark.parametrize("index", range(7), ids=URL_IDS)
def test_anonymous_users_are_sent_to_log_in(client, submission, index):
    method, url = urls(submission)[index]
    response = getattr(client, method)(url, {"passed": "true"} if method == "post" else None)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("index", range(7), ids=URL_IDS)
def test_a_candidate_with_their_link_open_is_still_anonymous_here(client, submission, index):
    token = submission.invitation.link_token()
    assert client.get(reverse("sessions_app:landing", args=[token])).status_code == 200
    method, url = urls(submission)[index]
    response = getattr(client, method)(url, {"passed": "true"} if method == "post" else None)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert b"red.log" not in response.content


@pytest.mark.parametrize("index", [2, 3], ids=["mark", "submit"])
def test_a_recruiter_without_the_reviewer_group_may_not_mark(client, recruiter, submission, index):
    client.force_login(recruiter)
    method, url = urls(submission)[index]
    response = getattr(client, method)(url, {"passed": "true"})
    assert response.status_code == 403
    assert b"Only reviewers mark reviews" in response.content
    assert b"nothing was changed" in response.content


@pytest.mark.parametrize("index", [0, 1, 4, 5, 6], ids=["queue", "review", "debrief", "csv", "debriefs"])
def test_a_recruiter_reads_every_reviewer_page(client, recruiter, submission, index):
    client.force_login(recruiter)
    method, url = urls(submission)[index]
    assert client.get(url).status_code == 200


@pytest.mark.parametrize("index", range(7), ids=URL_IDS)
def test_a_user_in_no_group_gets_403(client, groups, submission, index):
    client.force_login(User.objects.create_user("nobody", password="x"))
    method, url = urls(submission)[index]
    response = getattr(client, method)(url, {"passed": "true"} if method == "post" else None)
    assert response.status_code == 403


@pytest.mark.parametrize("index", [0, 1, 4, 5, 6], ids=["queue", "review", "debrief", "csv", "debriefs"])
def test_a_reviewer_reaches_every_page(client, reviewer, submission, index):
    client.force_login(reviewer)
    method, url = urls(submission)[index]
    assert client.get(url).status_code == 200


def test_nothing_is_written_by_a_refused_post(client, recruiter, submission):
    from grading.models import Mark, Review

    client.force_login(recruiter)
    client.post(f"/review/{submission.pk}/mark/red_log/", {"passed": "true"})
    client.post(f"/review/{submission.pk}/submit/")
    assert not Mark.objects.exists() and not Review.objects.exists()


def test_home_sends_a_reviewer_to_the_queue(client, reviewer):
    client.force_login(reviewer)
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == reverse("grading:queue")


def test_the_nav_shows_the_queue_and_debriefs_to_reviewers_and_recruiters_only(client, groups, reviewer, recruiter):
    for user in (reviewer, recruiter):
        client.force_login(user)
        page = client.get("/packets/" if user == recruiter else "/review/").content
        assert b'href="/review/"' in page and b'href="/review/debrief/"' in page
    client.force_login(User.objects.create_user("nobody", password="x"))
    page = client.get("/").content
    assert b'href="/review/"' not in page and b'href="/review/debrief/"' not in page
