#!/usr/bin/env python
"""Measure finding the similar submissions of one upload in a packet of 100 and of 1,000 graded submissions.

Standalone: creates a throwaway database (SQLite in a temporary folder, or the
scratch database named by BENCH_DATABASE_URL), loads the sample packet, and
fills it with graded submissions whose evidence looks like candidates' (a
test diff of a few dozen lines, a production diff, a prompt and a refusal,
each drawn from shared pools of statements and words, so that the usual
idioms are shared as they are in life, and one in ten a renamed copy of
another's). Their fingerprints are stored as grading stores them. Then, per
packet size, each of ``--uploads`` new uploads is timed through what grading
runs when it finishes (grading.similarity.record: fingerprint, store, look the
hashes up in the index, score, store the matches), against a baseline
measured in the same run: storing the same upload's Evidence row, which
grading writes for every submission anyway. Prints p50 and p95 per size and
each one's ratio to the baseline, so the figures compare across machines.
The target is under a second per upload at 1,000 submissions.

    .venv/bin/python bench/similarity.py [--sizes 100 1000] [--uploads 50] [--keep]

The last line is "worst per-upload p95: X ms (target: under 1000 ms)".
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

STATEMENTS = [
    "assert invoices.total({f}) == {n}",
    "{v} = tmp_path / '{w}.csv'",
    "{v}.write_text('cents\\n{n}\\n-{m}\\n')",
    "{v} = invoices.total({f})",
    "assert {v} == {n}, f'expected {n}, got {{{v}}}'",
    "rows = [{n}, -{m}, {n}]",
    "{v} = sum(int(r) for r in rows)",
    "assert {v} < {n}",
    "with open({f}) as fh:",
    "    {v} = fh.read().splitlines()",
    "assert len({v}) == {m}",
    "@pytest.mark.parametrize('{w}', [{n}, -{m}])",
    "monkeypatch.setattr(invoices, '{w}', lambda *a: {n})",
    "assert invoices.total({f}) != {m}",
]
FIXES = [
    "n += int(row[{w!r}])",
    "{v} = int(row.get({w!r}, {n}))",
    "if {v} < 0 and {f}:",
    "    {v} -= {m}",
    "return sum(int(r[{w!r}]) for r in {f})",
    "{v} = [r for r in csv.DictReader({f}) if r[{w!r}]]",
    "{v} += {f}",
    "log.debug({w!r}, {v})",
]
WORDS = ("the refund row cents negative total abs model patch test fails sum invoice csv revenue drop rows "
         "because would hide wrong reason apply change minimal pandas eval file sample expect charges bug "
         "suggested instead safer dangerous data lose every one line keep sign").split()


def names(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 10))) for _ in range(n)]


def answer(rng: random.Random) -> dict:
    """One candidate's texts: a test of 3 to 5 functions, a one-to-three line fix, a prompt and a refusal."""
    lines = []
    for _ in range(rng.randint(3, 5)):
        lines.append(f"def test_{'_'.join(names(rng, 3))}(tmp_path):")
        for _ in range(rng.randint(3, 7)):
            v, f, w = names(rng, 3)
            lines.append("    " + rng.choice(STATEMENTS).format(v=v, f=f, w=w, n=rng.randint(1, 2000),
                                                               m=rng.randint(1, 500)))
        lines.append("")
    fix = []
    for _ in range(rng.randint(2, 6)):
        v, f, w = names(rng, 3)
        fix.append("        " + rng.choice(FIXES).format(v=v, f=f, w=w, n=rng.randint(1, 2000), m=rng.randint(1, 500)))
    return {"tests": "\n".join(lines), "production": "\n".join(fix),
            "prompt": " ".join(rng.choices(WORDS, k=rng.randint(30, 90))),
            "refusal": " ".join(rng.choices(WORDS, k=rng.randint(20, 70)))}


def renamed(texts: dict, rng: random.Random) -> dict:
    """Another candidate's paste of the same answer: the test's names changed."""
    import re

    tests = re.sub(r"\b[a-z]{3,10}\b", lambda m: m.group() if m.group() in ("def", "assert", "with", "open", "sum",
                                                                          "int", "for", "len", "lambda")
                   else names(rng, 1)[0], texts["tests"])
    return {**texts, "tests": tests}


def evidence(texts: dict) -> dict:
    def diff(path: str, body: str, is_test: bool) -> dict:
        return {"path": path, "status": "modified", "is_test": is_test, "binary": False,
                "diff": f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n" + "".join(f"+{x}\n" for x in body.splitlines())}

    return {"archive": {"accepted": True}, "texts": {"prompt.txt": texts["prompt"], "refuse.md": texts["refusal"]},
            "diff": {"files": [diff("invoices.py", texts["production"], False),
                               diff("test_invoices.py", texts["tests"], True)], "flags": []}}


class Packet:
    """The sample packet's candidates, their graded submissions and fingerprints, grown to a size."""

    def __init__(self, seed: int = 11):
        from takehome.actions import do_load_sample_packet

        self.rng = random.Random(seed)
        self.packet, _ = do_load_sample_packet(send_check=False)
        self.version = self.packet.latest_version()
        self.answers: list[dict] = []
        self.count = 0  # the packet's size
        self.serial = 0  # every candidate ever added, the timed ones too

    def add(self, texts: dict):
        """One more candidate with a graded submission of these texts; returns it (no fingerprints yet)."""
        from django.utils import timezone

        from grading.models import Evidence
        from sessions_app.models import Submission
        from takehome.models import Candidate, Invitation

        self.count += 1
        self.serial += 1
        candidate = Candidate.objects.create(name=f"Candidate {self.serial:05d}", email=f"c{self.serial}@example.com")
        invitation = Invitation(candidate=candidate, packet_version=self.version, board_packet_id=self.packet.pk)
        invitation.issue_token()
        invitation.save()
        submission = Submission.objects.create(invitation=invitation, archive=f"uploads/{self.serial}.zip",
                                               sha256=f"{self.serial:064x}", size=2048, status="graded",
                                               uploaded_at=timezone.now())
        Evidence.objects.create(submission=submission, data=evidence(texts), grader_version="1")
        self.answers.append(texts)
        return submission

    def next_answer(self) -> dict:
        if self.answers and self.rng.random() < 0.1:
            return renamed(self.rng.choice(self.answers), self.rng)
        return answer(self.rng)

    def grow_to(self, size: int) -> None:
        from grading import similarity

        while self.count < size:
            similarity.record(self.add(self.next_answer()).pk)


def time_uploads(packet: Packet, uploads: int) -> tuple[list[float], list[float], int]:
    """Per new upload: the baseline (its Evidence row stored again) and the similarity, in ms; then removed
    again, so each is timed against the same packet. Also how many matches they found."""
    from django.db import transaction

    from grading import similarity
    from grading.models import Evidence

    base, timed, found = [], [], 0
    for _ in range(uploads):
        texts = packet.next_answer()
        submission = packet.add(texts)
        data = evidence(texts)
        start = time.perf_counter()
        with transaction.atomic():
            Evidence.objects.update_or_create(submission=submission, defaults={"data": data, "grader_version": "1"})
        base.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        found += similarity.record(submission.pk)
        timed.append((time.perf_counter() - start) * 1000)
        submission.invitation.delete()  # the packet stays at its size
        packet.answers.pop()
        packet.count -= 1
    return base, timed, found


def p95(times: list[float]) -> float:
    return statistics.quantiles(times, n=100, method="inclusive")[94] if len(times) > 1 else times[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000], help="graded submissions in the packet")
    parser.add_argument("--uploads", type=int, default=50, help="new uploads timed at each size")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    from pages import throwaway_site  # the pages' benchmark's throwaway settings (bench/ is on the path)

    with throwaway_site("takehome-bench-similarity-", args.keep):
        from django.db import connection

        from grading.models import Fingerprint, SimilarMatch

        packet = Packet()
        print(f"{connection.vendor}; {args.uploads} uploads timed at each size")
        print(f"\n{'submissions':>11} {'fingerprints':>12} {'matches':>8} {'baseline p50':>13} "
              f"{'p50 ms':>8} {'p95 ms':>8} {'p50 / baseline p50':>19}")
        worst = 0.0
        for size in sorted(args.sizes):
            started = time.perf_counter()
            packet.grow_to(size)
            filled = time.perf_counter() - started
            base, timed, found = time_uploads(packet, args.uploads)
            ratio = statistics.median(timed) / statistics.median(base)
            print(f"{size:11d} {Fingerprint.objects.count():12d} {found:8d} {statistics.median(base):13.1f} "
                  f"{statistics.median(timed):8.1f} {p95(timed):8.1f} {ratio:19.1f}"
                  f"   (filled in {filled:.0f} s; {SimilarMatch.objects.count() // 2} similar pairs stored)")
            worst = max(worst, p95(timed))
        print(f"worst per-upload p95: {worst:.1f} ms (target: under 1000 ms)")


if __name__ == "__main__":
    main()
