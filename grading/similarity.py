"""Similar submissions: each graded submission's fingerprints stored, and matched against its packet's others.

The measure is grading.engine.similarity's (winnowed k-gram fingerprints, a
Jaccard score per channel). Here the fingerprints are stored, one
Fingerprint row each: the index (packet, channel, hash) -> submissions. A
newly graded submission looks its own hashes up in that index, counts per
other submission how many it shares, and needs nothing else but the others'
sizes to score them, so the cost follows how many fingerprints it has and
how many others share them, not how many submissions the packet holds.

Matches are stored both ways round (SimilarMatch), so a submission graded
earlier lists the ones graded after it. An upload of the same invitation
(the candidate's own earlier zip) is never a match. Written only here.
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Count

from sessions_app.models import Submission
from takehome.models import Packet, PacketFile, PacketVersion

from .engine import similarity
from .models import Evidence, Fingerprint, SimilarityProfile, SimilarMatch

log = logging.getLogger(__name__)

# Hashes per IN list: far below SQLite's and PostgreSQL's limits on parameters.
LOOKUP_CHUNK = 500


@functools.lru_cache(maxsize=32)
def base_of_version(version_id: int) -> similarity.Base:
    """What every submission of a packet version shares (its fixture, solution and prompt); versions never change."""
    version = PacketVersion.objects.get(pk=version_id)
    files = {**version.files_of(PacketFile.Kind.FIXTURE), **version.files_of(PacketFile.Kind.SOLUTION)}
    return similarity.base_of(files, version.prompt)


def clear(submission_id: int) -> None:
    """Forget a submission's fingerprints and matches (it is graded again, or was refused)."""
    Fingerprint.objects.filter(submission_id=submission_id).delete()
    SimilarMatch.objects.filter(submission_id=submission_id).delete()
    SimilarMatch.objects.filter(other_id=submission_id).delete()
    SimilarityProfile.objects.filter(submission_id=submission_id).delete()


def record(submission_id: int) -> int:
    """Fingerprint a graded submission and match it against its packet's others; returns how many it matches.

    Replaces whatever was stored for it before. A submission that is not
    graded (or has no evidence) is only cleared.
    """
    submission = Submission.objects.select_related("invitation__packet_version").get(pk=submission_id)
    evidence = Evidence.objects.filter(submission_id=submission_id).values_list("data", flat=True).first()
    version = submission.invitation.packet_version
    if submission.status != Submission.Status.GRADED or not evidence:
        with transaction.atomic():
            clear(submission_id)
        return 0
    prints = similarity.fingerprint_evidence(evidence, base_of_version(version.pk))
    packet_id = version.packet_id
    with transaction.atomic():
        # why the packet's row locked: two workers finishing two submissions of one packet at once would
        # each look the other up before it was written, and miss the pair (PostgreSQL; SQLite's writes
        # are one at a time already)
        Packet.objects.select_for_update().filter(pk=packet_id).first()
        clear(submission_id)
        SimilarityProfile.objects.create(
            submission_id=submission_id, packet_id=packet_id, measure_version=similarity.MEASURE_VERSION,
            sizes={channel: len(prints[channel]) for channel in similarity.CHANNELS})
        Fingerprint.objects.bulk_create(
            [Fingerprint(submission_id=submission_id, packet_id=packet_id, channel=channel, value=value)
             for channel in similarity.CHANNELS for value in sorted(prints[channel])],
            batch_size=1000)
        scores = _matches(submission, packet_id, prints)
        SimilarMatch.objects.bulk_create(
            [SimilarMatch(submission_id=a, other_id=b, channel=channel, score=score)
             for other, channels in scores.items() for channel, score in channels.items()
             for a, b in ((submission_id, other), (other, submission_id))],
            batch_size=1000)
    return len(scores)


def _matches(submission: Submission, packet_id: int, prints: dict) -> dict[int, dict[str, float]]:
    """Per other submission of the packet, the channels it is near-identical in, with their scores."""
    own = set(Submission.objects.filter(invitation_id=submission.invitation_id).values_list("pk", flat=True))
    shared: dict[int, dict[str, int]] = defaultdict(dict)
    for channel in similarity.CHANNELS:
        values = sorted(prints[channel])
        if len(values) < similarity.MIN_FINGERPRINTS:
            continue  # too short to be near-identical to anything
        for start in range(0, len(values), LOOKUP_CHUNK):
            found = (Fingerprint.objects
                     .filter(packet_id=packet_id, channel=channel, value__in=values[start:start + LOOKUP_CHUNK])
                     .values("submission_id").annotate(n=Count("id")).values_list("submission_id", "n"))
            for other, n in found:
                if other not in own:
                    shared[other][channel] = shared[other].get(channel, 0) + n
    if not shared:
        return {}
    sizes = dict(SimilarityProfile.objects.filter(submission_id__in=shared).values_list("submission_id", "sizes"))
    result: dict[int, dict[str, float]] = {}
    for other, per_channel in shared.items():
        theirs = sizes.get(other) or {}
        for channel, n in per_channel.items():
            mine, their_size = len(prints[channel]), int(theirs.get(channel, 0))
            if similarity.is_similar(n, mine, their_size):
                result.setdefault(other, {})[channel] = round(similarity.jaccard(n, mine, their_size), 3)
    return result


def record_quietly(submission_id: int) -> None:
    """record(), for the worker: a failure here is logged and never fails the grading it follows."""
    try:
        record(submission_id)
    except Exception:
        # why: similarity helps a reviewer; a grading whose evidence is saved must stay graded
        log.exception("similar submissions of %s not computed; `manage.py rebuild_similarity` computes them",
                      submission_id)


def rebuild(packet: Packet | None = None, progress=None) -> int:
    """Fingerprint and match every graded submission (of one packet, or of all) again; returns how many."""
    qs = Submission.objects.filter(status=Submission.Status.GRADED)
    if packet is not None:
        qs = qs.filter(invitation__packet_version__packet=packet)
    stale = SimilarityProfile.objects.exclude(submission__status=Submission.Status.GRADED)
    if packet is not None:
        stale = stale.filter(packet=packet)
    for submission_id in stale.values_list("submission_id", flat=True):
        with transaction.atomic():
            clear(submission_id)
    done = 0
    for submission_id in qs.order_by("pk").values_list("pk", flat=True).iterator():
        record(submission_id)
        done += 1
        if progress:
            progress(done)
    return done


# --- what the pages read ----------------------------------------------------------------


@dataclass
class SimilarRow:
    """Another submission near-identical to the one shown, and in what."""

    other: Submission
    candidate: str
    channels: list[tuple[str, float]] = field(default_factory=list)  # (label, score), best first

    @property
    def best(self) -> float:
        return max(score for _, score in self.channels)

    def summary(self) -> str:
        """'test diff 1.00, refuse.md 0.93'."""
        return ", ".join(f"{label} {score:.2f}" for label, score in self.channels)


def similar_for(submission_ids: list[int], label) -> dict[int, list[SimilarRow]]:
    """Per submission, the packet's other submissions near-identical to it, most similar first (two queries).

    ``label(invitation, packet)`` names the other candidate as the viewer may see them.
    """
    # why two queries, not one join: filtered on the other submission's status, the database may start from
    # every graded submission and look each one's matches up; the matches of a page's uploads are few.
    found = list(SimilarMatch.objects.filter(submission_id__in=submission_ids)
                 .only("submission_id", "other_id", "channel", "score"))
    others = (Submission.objects.filter(pk__in={m.other_id for m in found}, status=Submission.Status.GRADED)
              .select_related("invitation__candidate", "invitation__packet_version__packet")
              .only("uploaded_at", "invitation__candidate__name",
                    "invitation__packet_version__packet__hide_candidate_names")
              .in_bulk())
    rows: dict[int, dict[int, SimilarRow]] = defaultdict(dict)
    order = {channel: i for i, channel in enumerate(similarity.CHANNELS)}
    for match in sorted(found, key=lambda m: (m.submission_id, m.other_id, order[m.channel])):
        other = others.get(match.other_id)
        if other is None:
            continue  # not graded (any more): not shown
        per = rows[match.submission_id]
        if match.other_id not in per:
            per[match.other_id] = SimilarRow(
                other, label(other.invitation, other.invitation.packet_version.packet))
        per[match.other_id].channels.append((similarity.CHANNEL_LABELS[match.channel], match.score))
    return {
        pk: sorted(per.values(), key=lambda r: (-r.best, r.other.pk)) for pk, per in rows.items()
    }


def computed(submission: Submission) -> bool:
    """Whether the submission was fingerprinted (read from the row that grading.pages.load_submission joins)."""
    try:
        submission.similarity_profile  # noqa: B018
    except SimilarityProfile.DoesNotExist:
        return False
    return True
