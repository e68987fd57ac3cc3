"""The reviewer's long lists at any length: keyset pages reach every row, next-in-queue, fixed query counts."""

from __future__ import annotations

import random
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from grading.pages import next_in_queue
from grading.tests.reviewing import make_submission, score, upload_again
from sessions_app.models import Submission
from shared import paging
from takehome.models import Candidate, Invitation, Packet, PacketVersion

pytestmark = pytest.mark.django_db
ALL_PASS = {"red_log": True, "model_waited": True, "refusal_specific": True, "test_names_bug": True}


def shown(html: str) -> list[int]:
    return [int(x) for x in re.findall(r'data-submission="(\d+)"', html)]


def link(html: str, rel: str) -> str | None:
    """The pager's link: rel="next"/"prev", or data-page="first"/"last"."""
    found = re.search(rf'<a href="([^"]*)" (?:rel|data-page)="{rel}"', html)
    return found.group(1).replace("&amp;", "&") if found else None


def make_queue(packet, n: int, seed: int = 3) -> list[Submission]:
    """n uploads under review, their times shuffled, many of them equal (ties in the queue's sort key)."""
    rng = random.Random(seed)
    now = timezone.now()
    return [make_submission(packet, f"Candidate {i:03d}", uploaded_at=now - timedelta(minutes=rng.randrange(n // 4)))
            for i in range(n)]


def queue_order(submissions) -> list[int]:
    return [s.pk for s in sorted(submissions, key=lambda s: (s.uploaded_at, s.pk), reverse=True)]


def walk(client, url: str, rel: str) -> tuple[list[int], list[str]]:
    """Every row met following the pager's `rel` links from url, and each page's html."""
    seen, pages = [], []
    while url:
        html = client.get(url).content.decode()
        pages.append(html)
        seen += shown(html)
        following = link(html, rel)
        url = "/review/" + following if following and not following.startswith("/") else following
        assert len(pages) < 100, "the pager goes round in circles"
    return seen, pages


def test_the_queue_pager_reaches_every_row_once_and_shows_the_total(rob, sample_packet):
    subs = make_queue(sample_packet, 120)
    seen, pages = walk(rob, "/review/?show=all", "next")
    assert seen == queue_order(subs)
    assert len(pages) == 3 and all("120 submissions" in html for html in pages)
    last = rob.get("/review/?show=all&last=1").content.decode()
    assert shown(last) == queue_order(subs)[-50:] and link(last, "next") is None
    back, _ = walk(rob, "/review/?show=all&last=1", "prev")
    assert set(back) == set(seen)  # the way back ends on the first page, whole


def test_the_debrief_pager_reaches_every_candidate_in_name_order(rob, sample_packet):
    subs = make_queue(sample_packet, 60)
    random.Random(1).shuffle(subs)
    html = rob.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    seen = shown(html)
    while link(html, "next"):
        html = rob.get(f"/review/debrief/{sample_packet.slug}/{link(html, 'next')}").content.decode()
        seen += shown(html)
    assert "60 candidates" in html
    assert seen == [s.pk for s in sorted(subs, key=lambda s: s.invitation.candidate.name)]


def test_the_debrief_counts_each_candidate_with_an_upload_for_the_packet_once(rob, sample_packet):
    """The total is counted from the packet's invitations, not walked over every candidate: the same people."""
    subs = make_queue(sample_packet, 8)[:5]
    again = subs[0].invitation  # the same candidate invited again, to a newer version, and uploading there too
    newer = PacketVersion.objects.create(packet=sample_packet, number=2, prompt="Fix it again.")
    second = Invitation(candidate=again.candidate, packet_version=newer)
    second.issue_token()
    second.save()
    Submission.objects.create(invitation=second, archive="uploads/x.zip", sha256="f" * 64, size=1,
                              status=Submission.Status.GRADED, uploaded_at=timezone.now())
    upload_again(subs[1])  # two uploads, one candidate
    silent = Invitation(candidate=Candidate.objects.create(name="No Upload", email="none@example.com"),
                        packet_version=newer)  # invited, nothing uploaded: no debrief row
    silent.issue_token()
    silent.save()
    other = Packet.objects.create(slug="other", title="Other")
    PacketVersion.objects.create(packet=other, number=1, prompt="Other.")
    make_queue(other, 4)
    html = rob.get(f"/review/debrief/{sample_packet.slug}/").content.decode()
    assert "8 candidates" in html
    assert "4 candidates" in rob.get("/review/debrief/other/").content.decode()


def test_a_long_list_says_more_than_the_limit(rob, sample_packet, monkeypatch):
    monkeypatch.setattr(paging, "COUNT_LIMIT", 20)
    make_queue(sample_packet, 30)
    assert "more than 20 submissions" in rob.get("/review/?show=all").content.decode()


def old_next_in_queue(submission, reviewer) -> int | None:
    """The definition before keyset: read the reviewer's whole to-do list in order, take the row after this one."""
    todo = [s for s in Submission.objects.filter(is_latest=True).order_by("-uploaded_at", "-pk")
            if not s.reviews.filter(reviewer=reviewer, submitted_at__isnull=False).exists()]
    key = (submission.uploaded_at, submission.pk)
    older = [s.pk for s in todo if (s.uploaded_at, s.pk) < key]
    rest = [s.pk for s in todo if s.pk != submission.pk]
    return older[0] if older else (rest[0] if rest else None)


@pytest.mark.parametrize("seed", range(3))
def test_next_in_queue_is_the_row_after_this_one_with_ties(seed, rob, reviewer, ann, sample_packet):
    subs = make_queue(sample_packet, 40, seed=seed)
    rng = random.Random(seed)
    for s in rng.sample(subs, 15):
        score(s, reviewer, ALL_PASS)  # off rob's to-do list
    for s in rng.sample(subs, 10):
        score(s, ann, ALL_PASS)  # someone else's review: still on rob's list
    for s in rng.sample(subs, 4):
        upload_again(s)  # no longer the upload under review
    for s in Submission.objects.all():
        assert next_in_queue(s, reviewer) == old_next_in_queue(s, reviewer), s.pk


def queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


@pytest.fixture
def two_packets(sample_packet):
    other = Packet.objects.create(slug="other", title="Other")
    PacketVersion.objects.create(packet=other, number=1, prompt="Fix it.")
    return sample_packet, other


def add_reviewed(packets, n: int, start: int, reviewers) -> list[Submission]:
    subs = []
    for i in range(start, start + n):
        s = make_submission(packets[i % 2], f"Candidate {i:04d}")
        for r in reviewers[: i % 3]:
            score(s, r, ALL_PASS)
        subs.append(s)
    return subs


def test_every_page_takes_as_many_queries_with_200_rows_as_with_10(rob, reviewer, ann, two_packets,
                                                                     django_assert_max_num_queries):
    packet = two_packets[0]
    first = add_reviewed(two_packets, 10, 0, [ann, reviewer])
    def urls(subs):
        return ["/review/", "/review/?show=all", f"/review/?packet={packet.slug}&show=all",
                f"/review/?show=all&after={subs[5].pk}", "/review/?show=all&last=1",
                f"/review/{subs[0].pk}/", f"/review/{subs[1].pk}/",
                f"/review/debrief/{packet.slug}/", f"/review/debrief/{packet.slug}/?last=1",
                f"/review/debrief/{packet.slug}/?after={subs[0].invitation.candidate_id}"]

    small = [queries(rob, url) for url in urls(first)]
    more = add_reviewed(two_packets, 190, 10, [ann, reviewer])
    for url, n in zip(urls(first + more), small):
        with django_assert_max_num_queries(n):
            rob.get(url)


def test_one_row_is_counted_in_the_singular(rob, sample_packet):
    make_queue(sample_packet, 4)
    Submission.objects.exclude(pk=Submission.objects.order_by("pk").first().pk).delete()
    assert re.search(r"\b1 submission\b(?!s)", rob.get("/review/?show=all").content.decode())
    assert re.search(r"\b1 candidate\b(?!s)", rob.get(f"/review/debrief/{sample_packet.slug}/").content.decode())
