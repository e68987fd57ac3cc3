"""Writes on the recruiter's side: packets, versions, invitations, emails."""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Max
from django.template.loader import render_to_string
from django.utils import timezone

from grading.engine.archive import Limits, UnsafeArchive, safe_extract
from grading.engine.spec import (
    DECOY_NAME_RE,
    SAMPLE_PACKET_DIR,
    SAMPLE_PACKETS_DIR,
    join_decoys,
    load_spec_dir,
    split_decoys,
)
from shared.words import counted

from . import funnel
from .audit import record
from .content import VersionContent, content_cells, content_of, fingerprint, same_content
from .invites import InviteRow
from .models import (
    MAX_REVIEWERS_PER_SUBMISSION,
    Candidate,
    Decision,
    Invitation,
    Packet,
    PacketCheck,
    PacketFile,
    PacketVersion,
)
from .signals import decision_recorded, invitation_revoked

log = logging.getLogger(__name__)

# Packets are small by design ("ship a tiny tree"): tighter than uploads.
PACKET_ZIP_LIMITS = Limits(max_entries=500, max_total_bytes=5 * 1024 * 1024, max_file_bytes=1024 * 1024)


class PacketError(Exception):
    """A recruiter's packet input that cannot be used; the message says why."""


def read_zip_tree(uploaded, what: str) -> dict[str, bytes]:
    """Unpack a recruiter's zip with the same safe unpacker candidates' uploads go through."""
    return read_zip_report(uploaded, what)[0]


def read_decoys_zip(uploaded) -> dict[str, dict[str, bytes]]:
    """Decoys from a zip with one folder per decoy (``drop-refund-rows/invoices.py``...).

    A zip holding a single decoy folder has that folder stripped by the
    unpacker, like any wrapping folder; its name becomes the decoy's name.
    """
    files, stripped = read_zip_report(uploaded, "decoys")
    if stripped and not any("/" in p for p in files):
        return {stripped.strip("/"): files}
    loose = sorted(p for p in files if "/" not in p)
    if loose:
        raise PacketError("The decoys zip must hold one folder per decoy (for example drop-refund-rows/invoices.py); "
                          "these files are not in a folder: " + ", ".join(loose))
    return split_decoys(files)


def read_zip_report(uploaded, what: str) -> tuple[dict[str, bytes], str | None]:
    """The files of a recruiter's zip, and the wrapping folder the unpacker stripped (if any)."""
    with tempfile.TemporaryDirectory(prefix="packet-") as tmp:
        archive = Path(tmp) / "upload.zip"
        with archive.open("wb") as out:
            for chunk in uploaded.chunks():
                out.write(chunk)
        try:
            report = safe_extract(archive, Path(tmp) / "tree", PACKET_ZIP_LIMITS)
        except UnsafeArchive as exc:
            raise PacketError(f"The {what} zip cannot be used: {exc.reason}") from exc
        return {path: (report.root / path).read_bytes() for path in report.kept}, report.stripped_prefix


def validate_content(content: VersionContent) -> None:
    """Refuse a version the grader could not use, with a sentence saying why."""
    from shared.environments import environment_problems

    if not content.fixture:
        raise PacketError("The fixture has no files.")
    problems = environment_problems(content.requirements, content.python_version)
    if problems:
        raise PacketError(" ".join(problems))
    missing = [p for p in content.solution if p not in content.fixture]
    if missing:
        raise PacketError(
            "The reference solution must replace files of the fixture; these are not in it: "
            + ", ".join(sorted(missing))
        )
    missing = [p for p in content.protected_paths if p not in content.fixture]
    if missing:
        raise PacketError("Protected paths must be fixture files; not found: " + ", ".join(missing))
    for name, files in (content.decoys or {}).items():
        if not DECOY_NAME_RE.match(name):
            raise PacketError(f"A decoy's folder name must be letters, digits, '.', '_' or '-': {name!r}.")
        if not files:
            raise PacketError(f"The decoy {name} has no files.")
        missing = [p for p in files if p not in content.fixture]
        if missing:
            raise PacketError(f"A decoy replaces files of the fixture, as the solution does; the decoy {name} "
                              "has files that are not in it: " + ", ".join(sorted(missing)))


@transaction.atomic
def do_create_version(packet: Packet, content: VersionContent, user=None, send_check: bool = True) -> PacketVersion:
    """Write a new immutable version of a packet, numbered after the last one.

    The version starts unpublished: its self-check is queued for a worker
    (after commit) and it can be invited to once every check passes.
    """
    validate_content(content)
    # why: lock the packet row so two editors saving at once get numbers 2 and 3.
    Packet.objects.select_for_update().get(pk=packet.pk)
    last = packet.versions.aggregate(n=Max("number"))["n"] or 0
    rubric_cells = content_cells(content)
    version = PacketVersion.objects.create(
        packet=packet,
        number=last + 1,
        prompt=content.prompt,
        test_command=content.test_command,
        protected_paths=list(content.protected_paths),
        forbidden_patterns=dict(content.forbidden_patterns or {}),
        refusal_hints=dict(content.refusal_hints or {}),
        time_limit_minutes=content.time_limit_minutes,
        requirements=content.requirements,
        python_version=content.python_version,
        model_policy=content.model_policy,
        model_name=content.model_name,
        work_mode=content.work_mode,
        # why every cell written out: a version carries its whole rubric, whatever the defaults become.
        rubric={c.key: c.label for c in rubric_cells},
        rubric_definitions={c.key: c.definition for c in rubric_cells},
        created_by=user,
    )
    PacketFile.objects.bulk_create(
        PacketFile(version=version, kind=kind, path=path, content=data)
        for kind, files in (
            (PacketFile.Kind.FIXTURE, content.fixture),
            (PacketFile.Kind.SOLUTION, content.solution),
            (PacketFile.Kind.REFERENCE_TEST, content.reference_tests),
            (PacketFile.Kind.DECOY, join_decoys(content.decoys or {})),
        )
        for path, data in sorted(files.items())
    )
    do_queue_packet_check(version, user, send=send_check)
    return version


@dataclass(frozen=True)
class SavedVersion:
    version: PacketVersion  # the new version; or, when nothing was written, the latest, which holds the content
    created: bool


@transaction.atomic
def do_save_version(packet: Packet, content: VersionContent, user=None) -> SavedVersion:
    """A new version of the packet from ``content``, unless its latest version holds the same already.

    "The same" is takehome.content.fingerprint: then nothing is written (no
    version, no self-check) and the latest is returned, so saving a form
    unchanged or importing an export again does not pile up versions. Any
    earlier version that holds the same is no matter: going back to it is a
    change, and gets a version of its own.
    """
    # why the lock first: two identical saves at once must make one version, not two.
    Packet.objects.select_for_update().get(pk=packet.pk)
    latest = packet.versions.order_by("-number").prefetch_related("files").first()
    if latest is not None and same_content(latest, content):
        return SavedVersion(latest, False)
    return SavedVersion(do_create_version(packet, content, user), True)


@transaction.atomic
def do_create_packet(slug: str, title: str, content: VersionContent, user=None, send_check: bool = True) -> Packet:
    packet = Packet.objects.create(slug=slug, title=title, created_by=user)
    do_create_version(packet, content, user, send_check=send_check)
    return packet


@dataclass(frozen=True)
class ImportedPacket:
    packet: Packet
    version: PacketVersion  # the zip's top level: the latest
    new_packet: bool
    earlier: tuple[PacketVersion, ...] = ()  # versions/<n>/, recreated for a new packet
    history_skipped: int = 0  # versions/<n>/ not imported: the packet existed here
    unchanged: bool = False  # the packet's latest version held the zip already: nothing was written


def do_import_packet(uploaded, user=None) -> ImportedPacket:
    """Import a packet zip (the layout of ``takehome/sample_packets/refund-sum/``), all or nothing.

    A slug this installation has already gets a new version (never an
    overwrite) from the zip's top level, unless its latest version holds the
    same already (``do_save_version``: then nothing); a new slug, a new packet, with the
    earlier versions under ``versions/<n>/`` recreated first, in order. Every
    version made is self-checked (queued), so it is invitable only once it
    passes. PacketError says why a zip cannot be used, and nothing is stored then.
    """
    from .packet_zip import parse_history, parse_packet

    files = read_zip_tree(uploaded, "packet")
    slug, title, content = parse_packet(files)
    history = parse_history(files, slug)
    with transaction.atomic():
        packet = Packet.objects.filter(slug=slug).first()
        if packet is not None:
            saved = do_save_version(packet, content, user)
            return ImportedPacket(packet, saved.version, False, history_skipped=len(history),
                                  unchanged=not saved.created)
        packet = Packet.objects.create(slug=slug, title=title, created_by=user)
        earlier = tuple(do_create_version(packet, old, user) for _, old in history)
        return ImportedPacket(packet, do_create_version(packet, content, user), True, earlier)


def sample_packet_dirs() -> list[Path]:
    """The built-in sample packets, refund-sum first (the one ``load_sample_packet`` loads alone)."""
    others = sorted(p for p in SAMPLE_PACKETS_DIR.iterdir()
                    if (p / "packet.json").is_file() and p != SAMPLE_PACKET_DIR)
    return [SAMPLE_PACKET_DIR, *others]


def sample_content(folder: Path = SAMPLE_PACKET_DIR) -> tuple[str, str, VersionContent]:
    """A built-in sample packet (refund-sum by default) as (slug, title, content)."""
    meta = json.loads((folder / "packet.json").read_text())
    spec = load_spec_dir(folder)
    content = VersionContent(
        prompt=(folder / "prompt.md").read_text(),
        fixture=spec.fixture,
        solution=spec.solution,
        reference_tests=spec.reference_tests,
        test_command=meta.get("test_command", "python -m pytest -q"),
        protected_paths=spec.protected_paths,
        forbidden_patterns=spec.forbidden_patterns,
        refusal_hints=spec.refusal_hints,
        time_limit_minutes=spec.time_limit_minutes,
        rubric=meta.get("rubric"),
        rubric_definitions=meta.get("rubric_definitions"),
        decoys=spec.decoys,
        requirements=spec.requirements,
        python_version=spec.python,
        work_mode=meta.get("work_mode", PacketVersion.WorkMode.ZIP),
    )
    return meta["slug"], meta["title"], content


@transaction.atomic
def do_load_sample_packet(send_check: bool = True, folder: Path = SAMPLE_PACKET_DIR) -> tuple[Packet, bool]:
    """Create a sample packet (refund-sum by default), or a new version if its files changed since
    every version it has. Idempotent.

    Returns the packet and whether anything was written. `send_check`: False
    when the caller runs the new version's self-check itself.
    """
    slug, title, content = sample_content(folder)
    packet = Packet.objects.filter(slug=slug).first()
    if packet is None:
        return do_create_packet(slug, title, content, send_check=send_check), True
    # why any version, not only the latest: a recruiter's own later version of a sample packet
    # stays the latest; only a release that changes the sample's files adds a version.
    wanted = fingerprint(content)
    if any(fingerprint(content_of(version)) == wanted for version in packet.versions.prefetch_related("files")):
        return packet, False
    do_create_version(packet, content, send_check=send_check)
    return packet, True


def do_queue_packet_check(version: PacketVersion, user=None, send: bool = True) -> PacketCheck:
    """Ask a worker to run this version's self-check; the message is sent after commit.

    A broker that is down loses nothing: the check stays queued and the
    sweep (takehome.tasks.sweep_packet_checks) sends it again. `send`: False
    when the caller runs the check itself (and sends it only if it cannot).
    """
    check = PacketCheck.objects.create(version=version, requested_by=user)
    if send:
        transaction.on_commit(lambda: _send_check(check.pk))
    return check


def do_send_packet_check(check_id: int) -> bool:
    """Send a queued check to a worker now; False when the broker did not take it (the sweep will)."""
    return _send_check(check_id)


def _send_check(check_id: int) -> bool:
    from shared import publish

    from .tasks import check_packet_version

    return publish.send(check_packet_version, (check_id,))


def do_resend_stale_checks(queued_for_s: int = 60, running_for_s: int = 600) -> int:
    """Send again checks queued longer than ``queued_for_s`` and put back those running past ``running_for_s``.

    why: the broker is only the doorbell; a message lost while it was down,
    or a worker killed mid-check, must not leave a version checking for ever.
    """
    now = timezone.now()
    PacketCheck.objects.filter(status=PacketCheck.Status.RUNNING,
                               started_at__lt=now - timedelta(seconds=running_for_s)).update(
        status=PacketCheck.Status.QUEUED, started_at=None)
    stale = PacketCheck.objects.filter(status=PacketCheck.Status.QUEUED,
                                       created_at__lt=now - timedelta(seconds=queued_for_s))
    return sum(_send_check(pk) for pk in stale.values_list("pk", flat=True))


def claim_packet_check(check_id: int) -> PacketCheck | None:
    """Move a queued check to running for this process, or None when another took it (or it is done)."""
    # why a conditional update: two workers (or a worker and the command line) may hold the same message.
    claimed = PacketCheck.objects.filter(pk=check_id, status=PacketCheck.Status.QUEUED).update(
        status=PacketCheck.Status.RUNNING, started_at=timezone.now())
    if not claimed:
        return None
    return PacketCheck.objects.select_related("version__packet").get(pk=check_id)


def do_run_packet_check(check_id: int, final: bool = True) -> PacketCheck | None:
    """Run a queued self-check in the sandbox and store each check's outcome and log.

    Returns the finished check, or None when it was not queued (taken by
    another process, or done). If the sandbox cannot start, the check goes
    back to the queue (``final=False``, the task retries) or ends in error,
    saying why; the version stays unpublished either way.
    """
    from grading.engine.pythons import PythonUnavailable
    from grading.engine.requirements import RequirementsRefused
    from grading.engine.runner import RunnerUnavailable
    from grading.engine.sandbox import SandboxUnavailable
    from shared.environments import sandbox_for
    from shared.sandboxes import sandbox_from_settings

    from .selfcheck import check_packet, environment_failed, environment_result

    check = claim_packet_check(check_id)
    if check is None:
        return None
    spec = check.version.to_spec()
    try:
        # why first and outside the sandbox: pip needs the network, and the packet's
        # code never runs while its environment is built (only wheels are installed).
        sandbox = sandbox_for(sandbox_from_settings(), spec)
        results = [environment_result(spec, runner=str(sandbox.runner_dir)),
                   *check_packet(spec, sandbox)]
    except (RequirementsRefused, PythonUnavailable) as exc:
        results = environment_failed(spec, str(exc))
    except (SandboxUnavailable, RunnerUnavailable) as exc:
        if not final:
            PacketCheck.objects.filter(pk=check.pk).update(status=PacketCheck.Status.QUEUED, started_at=None)
            raise SandboxUnavailable(str(exc)) from exc
        return _finish_check(check, PacketCheck.Status.ERROR, [],
                             f"The sandbox could not start, so nothing was checked: {exc}. "
                             "Run the self-check again once a worker with bubblewrap is running.")
    status = PacketCheck.Status.PASSED if all(r.passed for r in results) else PacketCheck.Status.FAILED
    return _finish_check(check, status, [r.to_dict() for r in results], "")


def _finish_check(check: PacketCheck, status: str, results: list[dict], error: str) -> PacketCheck:
    from grading.engine.core import clean_evidence

    check.status, check.results, check.error = status, clean_evidence(results), error
    check.finished_at = timezone.now()
    check.save(update_fields=["status", "results", "error", "finished_at"])
    log.info("self-check of %s: %s", check.version, status)
    return check


def do_check_version_now(version: PacketVersion, user=None) -> PacketCheck:
    """Run a new self-check of ``version`` in this process (the command line); returns it finished.

    Raises SandboxUnavailable when this machine cannot run the sandbox; the
    check then stays queued for a worker.
    """
    with transaction.atomic():
        check = PacketCheck.objects.create(version=version, requested_by=user)
    done = do_run_packet_check(check.pk, final=False)
    return done or PacketCheck.objects.get(pk=check.pk)


class InviteError(Exception):
    """Invitations that cannot be created; `.messages` has one sentence per problem."""

    def __init__(self, messages: list[str]):
        super().__init__("; ".join(messages))
        self.messages = messages


@dataclass(frozen=True)
class NewInvitation:
    invitation: Invitation
    link: str


def _duplicates(version: PacketVersion, rows: Iterable[InviteRow]) -> list[str]:
    emails = {row.email: row for row in rows}
    taken = Invitation.objects.filter(
        packet_version__packet=version.packet,
        candidate__email__in=list(emails),
        revoked_at__isnull=True,
    ).select_related("candidate")
    return [
        f"Line {emails[inv.candidate.email].line}: {inv.candidate.email} already has an "
        f"invitation to {version.packet.title}."
        for inv in taken
    ]


@transaction.atomic
def do_invite_candidates(
    version: PacketVersion, rows: list[InviteRow], user=None, send: bool = True
) -> list[NewInvitation]:
    """Create one invitation per row, all or nothing, and email each link after commit.

    A candidate already invited to this packet (any version, not revoked) is a
    duplicate: raise InviteError and create nothing.
    """
    refusal = version.refusal_to_invite()
    if refusal:
        raise InviteError([refusal])
    problems = _duplicates(version, rows)
    if problems:
        raise InviteError(problems)
    created = []
    for row in rows:
        candidate, _ = Candidate.objects.get_or_create(email=row.email, defaults={"name": row.name})
        if candidate.name != row.name:
            candidate.name = row.name
            candidate.save(update_fields=["name"])
        invitation = Invitation(candidate=candidate, packet_version=version, invited_by=user)
        invitation.issue_token()
        invitation.save()
        record(user, "invite", invitation, f"to {version}" + (", link emailed" if send else ", link not emailed"))
        created.append(NewInvitation(invitation, invitation.link()))
    funnel.touch(*(new.invitation.pk for new in created))
    if send:
        ids = [new.invitation.pk for new in created]
        transaction.on_commit(lambda: [do_send_invitation(Invitation.objects.get(pk=pk)) for pk in ids])
    return created


def do_send_invitation(invitation: Invitation) -> str:
    """Email the candidate their link; returns the link. Also used to resend.

    If the link can no longer be rebuilt (SECRET_KEY changed), a new token is
    issued first: the old link stops working, the new one is what is sent.
    """
    link = invitation.link()
    if link is None:
        invitation.issue_token()
        invitation.save(update_fields=["token_nonce", "token_hash"])
        link = invitation.link()
    version = invitation.packet_version
    context = {"invitation": invitation, "link": link, "packet": version.packet, "version": version}
    now = timezone.now()
    phase = invitation.phase_at(now)
    if phase != Invitation.NOT_STARTED:
        # why: a resend after Start must not promise that the clock waits for Start.
        context["deadline_passed"] = phase != Invitation.RUNNING
        context["time_left"] = _minutes_in_words(invitation.seconds_left_at(now) // 60)
    send_mail(
        subject=f"Your take-home: {version.packet.title}",
        message=render_to_string("takehome/email/invitation.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[invitation.candidate.email],
    )
    invitation.mark_sent()
    return link


def _minutes_in_words(minutes: int) -> str:
    """'2 hours 5 minutes', '1 hour', '40 minutes'; under a minute reads as 'less than a minute'."""
    if minutes < 1:
        return "less than a minute"
    hours, rest = divmod(minutes, 60)
    parts = []
    if hours:
        parts.append(counted(hours, "hour"))
    if rest:
        parts.append(counted(rest, "minute"))
    return " ".join(parts)


@transaction.atomic
def do_resend_invitation(invitation: Invitation, actor=None) -> str:
    """Email the candidate their link again, on a recruiter's request; returns the link."""
    had_link = invitation.link() is not None
    link = do_send_invitation(invitation)
    renewed = "" if had_link else "; a new link was issued, the old one stopped working"
    record(actor, "resend", invitation, f"to {invitation.candidate.email}{renewed}")
    return link


@transaction.atomic
def do_revoke_invitation(invitation: Invitation, actor=None) -> None:
    """Make the candidate's link stop working. Revoking twice changes (and records) nothing."""
    if invitation.revoke():
        record(actor, "revoke", invitation, "the link no longer works")
        pk = invitation.pk
        # why robust: the revocation has committed; a receiver that fails (and logs why) must not undo it in the
        # recruiter's eyes. The hosted session closes the invitation's terminals (sessions_app.apps).
        transaction.on_commit(lambda: invitation_revoked.send_robust(sender=Invitation, invitation_id=pk))


def do_set_candidate_names_hidden(packet: Packet, hidden: bool) -> None:
    """Hide (or show) candidate names from reviewers on this packet; takes effect on their next page."""
    packet.hide_candidate_names = hidden
    packet.save(update_fields=["hide_candidate_names"])


@transaction.atomic
def do_set_reviewers_per_submission(packet: Packet, count: int, actor=None) -> None:
    """Set how many reviewers each of the packet's graded submissions is assigned (in the audit trail).

    Submissions already graded get the reviewers they now lack at grading's next sweep; a lower count
    takes no assignment away.
    """
    if not 1 <= count <= MAX_REVIEWERS_PER_SUBMISSION:
        raise PacketError(f"Reviewers per submission: 1 to {MAX_REVIEWERS_PER_SUBMISSION}.")
    if count != packet.reviewers_per_submission:
        record(actor, "reviewers_set", packet, f"reviewers per submission: {packet.reviewers_per_submission} -> {count}")
        packet.reviewers_per_submission = count
        packet.save(update_fields=["reviewers_per_submission"])


class ExtendError(Exception):
    """A deadline that cannot be extended; the message says why."""


@transaction.atomic
def do_extend_deadline(invitation: Invitation, minutes: int, actor=None) -> Invitation:
    """Give a candidate more time: move the deadline later by ``minutes``.

    Only a running or finished clock has a deadline to move; a revoked link
    stays revoked.
    """
    # why lock: two recruiters extending at once must add up, not overwrite.
    invitation.lock()
    if invitation.revoked_at is not None:
        raise ExtendError("This invitation was revoked; its deadline cannot change.")
    if invitation.deadline is None:
        raise ExtendError("The candidate has not started yet; the full time limit still applies from Start.")
    invitation.extend_deadline(minutes)  # a passed deadline reopens from now
    record(actor, "extend", invitation, f"+{minutes} min, deadline now {invitation.deadline:%Y-%m-%d %H:%M} UTC")
    return invitation


class DecisionError(Exception):
    """A hiring decision that cannot be recorded; the message says why."""


@transaction.atomic
def do_decide(invitation: Invitation, outcome: str, note: str, actor) -> Decision:
    """Record a person's hiring decision (advance, decline, undecided) on a candidate, with a note.

    The decision is the recruiter's own: nothing here reads the reviewers'
    marks. A revoked (withdrawn) invitation takes no decision; the previous
    one, if any, stays as it was.
    """
    if outcome not in Decision.Choice.values:
        raise DecisionError("Choose advance, decline or undecided.")
    # why lock: two recruiters deciding at once leave one decision and two audit events, in order.
    locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if locked.revoked_at is not None:
        raise DecisionError(f"{invitation.candidate.name}'s invitation was revoked, so no decision can be "
                            "recorded on it; invite them again first if they are back in the process.")
    note = (note or "").strip()
    decision, _ = Decision.objects.update_or_create(
        invitation=locked, defaults={"choice": outcome, "note": note, "decided_by": actor, "decided_at": timezone.now()}
    )
    label = Decision.Choice(outcome).label
    record(actor, "decision", locked, label + (f": {note}" if note else ""))
    funnel.touch(locked.pk)
    decision_recorded.send(sender=Decision, invitation_id=locked.pk, decision_id=decision.pk)
    return decision
