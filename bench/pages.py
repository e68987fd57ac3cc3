#!/usr/bin/env python
"""Measure the reviewer's and the recruiter's pages with 10,000 (or up to 100,000) submissions stored.

Standalone: creates a throwaway database (SQLite in a temporary folder, or the
scratch database named by BENCH_DATABASE_URL, whose tables it creates and
fills), fills it with submissions, evidence and reviews, then requests the
queue, the review page, the debrief and the debriefs' index (logged in as a
reviewer), and the invitations board, the packet page with its funnel, the
candidate search and a candidate's page (as a recruiter), through the whole middleware stack (django.test.Client),
many times each: warm (one
request after another) and cold (before each request, one review submitted
through the review page's views, alternately by the viewing reviewer and by
another, which changes the viewer's queue and the debrief's agreement).
Deep pages are reached by following the pager's links. Prints p50 and
p95 per page, and, per the project's rule, each page's ratio to a baseline
measured in the same run (the login page: same stack, no data), so the
figures compare across machines. The target is p95 under 100 ms per page.

    .venv/bin/python bench/pages.py [--submissions 10000] [--requests 200] [--keep]

The last line is "worst page p95: X ms (target: under 100 ms)".
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def configure(folder: Path) -> None:
    """Point the settings at the throwaway folder, before Django is set up."""
    os.environ["TAKEHOME_VAR_DIR"] = str(folder)
    os.environ["TAKEHOME_STATIC_ROOT"] = str(folder / "static")
    os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL", f"sqlite:///{folder / 'bench.sqlite3'}")
    # Production mode, as a deployment serves pages (no debug query log, manifest static files).
    os.environ["DEBUG"] = "false"
    os.environ["SECRET_KEY"] = "bench-" + os.urandom(24).hex()
    os.environ["SECURE_SSL_REDIRECT"] = "false"
    os.environ["ALLOWED_HOSTS"] = "testserver"
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "takehome.settings")
    sys.path.insert(0, str(ROOT))


@contextmanager
def throwaway_site(prefix: str, keep: bool = False):
    """Django set up on a throwaway folder and database, migrated; the folder is removed after (unless ``keep``)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    configure(folder)
    import django

    django.setup()
    from django.core.management import call_command

    try:
        call_command("migrate", verbosity=0)
        yield folder
    finally:
        if keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def collect_manifest() -> None:
    """collectstatic's manifest, which the pages need for their static URLs in production mode.

    why not the deployment's storage: it also compresses every file (gzip and brotli), about 15 s of
    CPU for files this benchmark never serves; the manifest and the URLs it gives are the same.
    """
    from django.conf import settings
    from django.core.management import call_command

    settings.STORAGES = {**settings.STORAGES, "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"}}
    call_command("collectstatic", interactive=False, verbosity=0)


def fill(n: int, seed: int = 7) -> dict:
    """n latest submissions over three packets, evidence for the graded ones, three reviewers' reviews.

    Each candidate also holds what the recruiter's desk reads: the gate's
    receipts, an invite in the audit trail, and for one in five a decision.

    As candidates do, one in ten uploaded once before (an older graded upload,
    reviewed, that keeps its debrief row) and one in twenty-five sent a later
    upload that was refused (history on the review page). Every graded upload
    has its Evidence row; one in twenty (the review page's sample among them)
    holds the full evidence of an honest zip (about 20 KB), the others a small
    stand-in (only the queue's tampered flag is read from those), so 100,000
    submissions fill in minutes, not hours, and the evidence table stays the
    size it would be. Rows go in with bulk_create in batches; the agreement
    tally is then rebuilt from the marks, as the migration does for an
    existing database, and on PostgreSQL the tables are analysed.
    """
    from django.contrib.auth.models import Group, User
    from django.db import connection, transaction
    from django.utils import timezone

    from grading.actions import do_rebuild_agreement
    from grading.models import Assignment, Cell, Evidence, Mark, Review
    from grading.tests.reviewing import IDEAL
    from sessions_app.models import GateReceipt, Submission
    from shared.access import RECRUITER_GROUP, REVIEWER_GROUP
    from takehome import funnel
    from takehome.actions import do_load_sample_packet
    from takehome.models import AuditEvent, Candidate, Decision, Invitation, Packet, PacketVersion

    rng = random.Random(seed)
    group, _ = Group.objects.get_or_create(name=REVIEWER_GROUP)
    reviewers = []
    for name in ("rob", "ann", "cy"):
        user = User.objects.create_user(name, password="x")
        user.groups.add(group)
        reviewers.append(user)
    recruiter = User.objects.create_user("rita", password="x")
    recruiter.groups.add(Group.objects.get_or_create(name=RECRUITER_GROUP)[0])
    sample, _ = do_load_sample_packet(send_check=False)  # no broker here, and no candidate is graded
    packets = [sample]
    for slug in ("csv-dedupe", "date-parse"):
        p = Packet.objects.create(slug=slug, title=slug.replace("-", " ").title())
        PacketVersion.objects.create(packet=p, number=1, prompt="Fix it.")
        packets.append(p)
    versions = [p.latest_version() for p in packets]
    weights = [0.7, 0.2, 0.1]  # the sample packet holds most candidates
    now = timezone.now()
    batch = 2000
    stand_in = {"stand_in": True, "runs": {}}  # why shared: one small dict, serialised per row
    with transaction.atomic():
        candidates = Candidate.objects.bulk_create(
            [Candidate(name=f"Candidate {i:06d}", email=f"c{i}@example.com") for i in range(n)], batch_size=batch
        )
        invitations = []
        for i, c in enumerate(candidates):
            started = now - timezone.timedelta(minutes=i, hours=2)
            version = rng.choices(versions, weights)[0]
            inv = Invitation(candidate=c, packet_version=version, board_packet_id=version.packet_id, sent_at=now,
                             created_at=started - timezone.timedelta(hours=1),
                             opened_at=started - timezone.timedelta(minutes=5), started_at=started,
                             submitted_at=now - timezone.timedelta(minutes=i),
                             deadline=started + timezone.timedelta(minutes=90))
            inv.issue_token()
            invitations.append(inv)
        invitations = Invitation.objects.bulk_create(invitations, batch_size=batch)
        subs = Submission.objects.bulk_create(
            [Submission(invitation=inv, archive=f"uploads/{i}.zip", sha256=f"{i:064x}", size=2048,
                        uploaded_at=now - timezone.timedelta(minutes=i),
                        status="graded" if rng.random() > 0.02 else rng.choice(["queued", "grading"]))
             for i, inv in enumerate(invitations)],
            batch_size=batch,
        )
        earlier = Submission.objects.bulk_create(
            [Submission(invitation=inv, archive=f"uploads/e{i}.zip", sha256=f"e{i:063x}", size=2048,
                        uploaded_at=now - timezone.timedelta(minutes=i, hours=1), status="graded", is_latest=False)
             for i, inv in enumerate(invitations) if i % 10 == 0],
            batch_size=batch,
        )
        refused = Submission.objects.bulk_create(
            [Submission(invitation=inv, archive=f"uploads/r{i}.zip", sha256=f"r{i:063x}", size=2048,
                        uploaded_at=now - timezone.timedelta(minutes=i) + timezone.timedelta(seconds=30),
                        status="rejected", is_latest=False,
                        reject_reason="The archive holds a symbolic link (project/link); replace it with a copy.")
             for i, inv in enumerate(invitations) if i % 25 == 0],
            batch_size=batch,
        )
        # The gate's receipts (red, model, green; one in ten refused a red first), an invite in the
        # audit trail each, and a decision for one in five: what the board and the funnel read.
        receipts, events = [], []
        for inv in invitations:
            red_at = inv.started_at + timezone.timedelta(minutes=rng.randint(3, 50))
            if rng.random() < 0.1:
                receipts.append(GateReceipt(invitation=inv, step="red", accepted=False, received_at=red_at,
                                            refusal="the run is green; the gate wants a failure"))
            for k, step in enumerate(("red", "model", "green")):
                receipts.append(GateReceipt(invitation=inv, step=step, received_at=red_at + timezone.timedelta(minutes=k),
                                            log_text="1 failed in 0.03s" if step == "red" else ""))
            events.append(AuditEvent(at=inv.created_at, actor=recruiter, actor_name=recruiter.username,
                                     action="invite", target_type="takehome.invitation", target_id=str(inv.pk),
                                     target_repr=str(inv.candidate.name), invitation=inv))
        GateReceipt.objects.bulk_create(receipts, batch_size=batch)
        AuditEvent.objects.bulk_create(events, batch_size=batch)
        Decision.objects.bulk_create(
            [Decision(invitation=inv, choice=rng.choice(["advance", "decline"]), decided_by=recruiter, decided_at=now)
             for inv in invitations[::5]], batch_size=batch)
        graded = [s for s in subs if s.status == "graded"]
        full = {s.pk for s in graded[::20]}
        Evidence.objects.bulk_create(
            [Evidence(submission=s, data=IDEAL if s.pk in full else stand_in, grader_version="1")
             for s in graded + earlier],
            batch_size=500,
        )
        reviews, truth = [], {}
        for s in graded:
            truth[s.pk] = {cell: rng.random() < 0.6 for cell in Cell.values}
            for user, share in zip(reviewers, (0.6, 0.45, 0.1)):
                if rng.random() < share:
                    reviews.append(Review(submission=s, reviewer=user, submitted_at=now))
        for s in earlier:  # reviewed before the candidate uploaded again
            truth[s.pk] = {cell: rng.random() < 0.6 for cell in Cell.values}
            reviews += [Review(submission=s, reviewer=user, submitted_at=now) for user in reviewers[:2]]
        reviews = Review.objects.bulk_create(reviews, batch_size=batch)
        # each graded upload assigned to one reviewer in turn, as grading would: the viewer's queue is a third
        Assignment.objects.bulk_create([Assignment(submission=s, reviewer=reviewers[i % len(reviewers)])
                                        for i, s in enumerate(graded)], batch_size=batch)
        marks = 0
        for start in range(0, len(reviews), batch):
            chunk = []
            for r in reviews[start:start + batch]:
                for cell, right in truth[r.submission_id].items():
                    # reviewers agree with the "truth" 85% of the time
                    chunk.append(Mark(review=r, cell=cell, passed=right if rng.random() < 0.85 else not right))
            Mark.objects.bulk_create(chunk, batch_size=batch * 4)
            marks += len(chunk)
    do_rebuild_agreement()
    for p in packets:  # the funnel's tally, as the actions would have kept it
        funnel.rebuild(p)
    if connection.vendor == "postgresql":
        # why: a live PostgreSQL has its planner statistics from autovacuum; right after a bulk
        # fill it has none yet, and plans as if the tables were empty.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    under_review = Submission.objects.latest_per_invitation()
    per_packet = {p.slug: under_review.filter(invitation__packet_version__packet=p).count() for p in packets}
    reviewed_by = {}
    for r in reviews:
        reviewed_by.setdefault(r.submission_id, set()).add(r.reviewer_id)
    return {"reviewer": reviewers[0], "other": reviewers[2], "recruiter": recruiter,
            "submissions": sorted(full), "per_packet": per_packet, "reviews": len(reviews), "marks": marks,
            "slug": sample.slug, "earlier": len(earlier), "refused": len(refused),
            "unreviewed": {
                user.pk: [s.pk for s in graded if s.invitation.packet_version_id == versions[0].pk
                          and user.pk not in reviewed_by.get(s.pk, ())
                          and reviewed_by.get(s.pk)]
                for user in (reviewers[0], reviewers[2])}}


def timed_get(client, url: str, headers: dict) -> float:
    """One GET through the whole stack, read to the end; its wall time in ms."""
    start = time.perf_counter()
    response = client.get(url, **headers)
    if response.status_code != 200:
        raise SystemExit(f"{url} answered {response.status_code}")
    if hasattr(response, "streaming_content"):
        b"".join(response.streaming_content)
    return (time.perf_counter() - start) * 1000


def measure(client, urls: list[str], requests: int, headers: dict | None = None, before=None) -> list[float]:
    """Wall time of `requests` GETs (cycling over urls), in ms.

    Warm: after a short warm-up. Cold: `before` runs (untimed) before each
    request, and there is no warm-up.
    """
    headers = headers or {}
    if before is None:
        for url in urls[:5]:
            client.get(url, **headers)
    times = []
    for i in range(requests):
        if before is not None:
            before()
        times.append(timed_get(client, urls[i % len(urls)], headers))
    return times


def deep_url(client, url: str, rel: str, pages: int) -> str:
    """The address of page `pages` of a list, found by following its pager's `rel` link as a reviewer would."""
    import re

    for _ in range(pages - 1):
        html = client.get(url).content.decode()
        found = re.search(rf'<a href="([^"]*)" rel="{rel}"', html)
        if not found:
            break  # a short list: its last page
        url = url.split("?")[0] + found.group(1).replace("&amp;", "&")
    return url


class ReviewSubmitter:
    """Submits one whole review through the review page's views per call, alternating two reviewers.

    The viewing reviewer's own reviews change their queue; the other's change
    only the debrief. Each submission clears whatever a page kept from before
    it, so the request after it is measured cold.
    """

    def __init__(self, reviewers: list, unreviewed: dict[int, list[int]]):
        from django.test import Client

        self.turns = []
        for user in reviewers:
            client = Client()
            client.force_login(user)
            self.turns.append((client, list(unreviewed[user.pk])))
        self.count = 0

    def __call__(self) -> None:
        from grading.models import Cell

        client, todo = self.turns[self.count % len(self.turns)]
        self.count += 1
        if not todo:
            raise SystemExit("Not enough unreviewed uploads for the cold requests: "
                             "use more --submissions or fewer --requests.")
        pk = todo.pop()
        for i, cell in enumerate(Cell.values):  # the page's order: the diff cell last
            client.post(f"/review/{pk}/mark/{cell}/", {"passed": "true" if (pk + i) % 3 else "false"})
        response = client.post(f"/review/{pk}/submit/", {"confirm": "yes"})
        if response.status_code != 302:
            raise SystemExit(f"submitting a review of {pk} answered {response.status_code}")


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=100, method="inclusive")[94]


def print_table(title: str, results: dict[str, list[float]], base95: float) -> None:
    print(f"\n{title:42} {'p50 ms':>8} {'p95 ms':>8} {'p95 / baseline p95':>20}")
    for name, times in results.items():
        print(f"{name:42} {statistics.median(times):8.1f} {p95(times):8.1f} {p95(times) / base95:20.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=10_000, help="uploads under review (up to 100,000)")
    parser.add_argument("--requests", type=int, default=200, help="timed requests per page, warm and cold each")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    with throwaway_site("takehome-bench-pages-", args.keep):
        from django.db import connection
        from django.test import Client

        from sessions_app.models import Submission

        collect_manifest()
        started = time.perf_counter()
        data = fill(args.submissions)
        print(f"{connection.vendor}: {args.submissions} submissions under review {data['per_packet']} "
              f"(and {data['earlier']} earlier reviewed uploads, {data['refused']} refused later ones), "
              f"{data['reviews']} reviews, {data['marks']} marks; filled in {time.perf_counter() - started:.1f} s")

        client = Client()
        baseline = measure(client, ["/accounts/login/"], args.requests)
        client.force_login(data["reviewer"])
        sample = random.Random(1).sample(data["submissions"], min(100, len(data["submissions"])))
        slug = data["slug"]
        pages = {
            "queue (first page)": ["/review/"],
            "queue (packet filter, page 40)": [deep_url(client, f"/review/?packet={slug}&show=all", "next", 40)],
            "queue (htmx status poll)": ["/review/?show=todo"],
            "review page (100 submissions)": [f"/review/{pk}/" for pk in sample],
            f"debrief {slug} (page 1)": [f"/review/debrief/{slug}/"],
            f"debrief {slug} (page 100)": [deep_url(client, f"/review/debrief/{slug}/", "next", 100)],
        }
        pages["debrief index (every packet)"] = ["/review/debrief/"]
        # The recruiter's desk reads the same tables: the board, the packet page's funnel.
        recruiter = Client()
        recruiter.force_login(data["recruiter"])
        board = f"/packets/{slug}/invitations/"
        recruiter_pages = {
            "invitations board (first page)": [board],
            "invitations board (page 40)": [deep_url(recruiter, board, "next", 40)],
            "invitations board (htmx poll)": [board],
            f"packet page {slug} (funnel)": [f"/packets/{slug}/"],
            # The search at its worst, a word nobody's name or email holds (every candidate read), and a
            # person's page. (Two pages only: each cold request uses up an unreviewed upload, and at
            # 10,000 the viewing reviewer has about 1,370 of them for the 13 pages.)
            "candidates (search, no match)": ["/candidates/?q=nobody"],
            "a candidate's page (100 people)": [f"/candidates/{pk}/" for pk in Submission.objects.filter(
                pk__in=sample).values_list("invitation__candidate_id", flat=True)],
        }
        submit = ReviewSubmitter([data["reviewer"], data["other"]], data["unreviewed"])
        warm = {"baseline: login page": baseline}
        cold = {}
        for name, urls in [*pages.items(), *recruiter_pages.items()]:
            viewer = recruiter if name in recruiter_pages else client
            headers = {"HTTP_HX_REQUEST": "true"} if "htmx" in name else {}
            warm[name] = measure(viewer, urls, args.requests, headers)
            cold[name] = measure(viewer, urls, args.requests, headers, before=submit)
        base95 = p95(baseline)
        print_table("page (warm)", warm, base95)
        print_table("cold (a review submitted before each)", cold, base95)
        csv_times = measure(client, [f"/review/debrief/{slug}.csv"], 3)
        print(f"\nCSV export of {slug} (all rows, streamed; not a page): median {statistics.median(csv_times):.0f} ms")
        worst = max(p95(t) for n, t in [*warm.items(), *cold.items()] if not n.startswith("baseline"))
        print(f"worst page p95: {worst:.1f} ms (target: under 100 ms)")


if __name__ == "__main__":
    main()
