"""Reminders to candidates who have not pressed Start, at the hours after the link went out that a packet sets.

A beat sweep (takehome.tasks.send_reminders) finds each invitation whose time has come: sent, not
started, not revoked, with a reminder time passed that has no Reminder row yet. The row is the claim
(one per invitation and time), written with the email and the audit event in one transaction, so a
failed send leaves nothing and the next sweep tries again. Several times due at once (a packet given
reminders after its links went out) send the latest alone; the earlier are kept as passed over.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.utils import timezone

from .audit import record
from .models import Invitation, Packet, Reminder

log = logging.getLogger(__name__)

MAX_REMINDERS = 5
MAX_HOURS = 30 * 24


class ReminderError(ValueError):
    """Reminder times that cannot be used; the message says why, and nothing was changed."""


def parse_hours(text: str) -> list[int]:
    """'24, 72' -> [24, 72]: whole hours after the link was sent, ascending, each once."""
    parts = [p for p in re.split(r"[,\s]+", (text or "").strip()) if p]
    hours = []
    for part in parts:
        if not part.isdigit():
            raise ReminderError(f"{part!r} is not a whole number of hours: write e.g. 24, 72.")
        value = int(part)
        if not 1 <= value <= MAX_HOURS:
            raise ReminderError(f"{value} hours is out of range: each reminder is 1 to {MAX_HOURS} hours "
                                "(30 days) after the link was sent.")
        hours.append(value)
    hours = sorted(set(hours))
    if len(hours) > MAX_REMINDERS:
        raise ReminderError(f"{len(hours)} reminders is too many: at most {MAX_REMINDERS}.")
    return hours


@transaction.atomic
def do_set_reminders(packet: Packet, text: str, actor=None) -> list[int]:
    hours = parse_hours(text)
    if hours != packet.reminder_hours:
        before = ", ".join(map(str, packet.reminder_hours)) or "none"
        packet.reminder_hours = hours
        packet.save(update_fields=["reminder_hours"])
        record(actor, "reminders_set", packet, f"hours after the link: {before} -> {', '.join(map(str, hours)) or 'none'}")
    return hours


def _due(invitation: Invitation, hours: list[int], done: set[int], now: datetime) -> tuple[int | None, list[int]]:
    """The reminder to send now (or None), and the earlier due ones to pass over."""
    due = [h for h in hours if invitation.sent_at + timedelta(hours=h) <= now and h not in done]
    if not due:
        return None, []
    latest = max(due)
    if any(h > latest for h in done):  # a later one went out already (the times were changed since)
        return None, due
    return latest, [h for h in due if h != latest]


def _send(invitation: Invitation, hours: int, link: str) -> None:
    version = invitation.packet_version
    send_mail(
        subject=f"Reminder: your take-home, {version.packet.title}",
        message=render_to_string("takehome/email/reminder.txt",
                                 {"invitation": invitation, "link": link, "packet": version.packet, "version": version}),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[invitation.candidate.email],
    )


def sweep(now: datetime | None = None) -> int:
    """Send the reminders that are due; returns how many were emailed."""
    now = now or timezone.now()
    packets = {p.pk: p.reminder_hours for p in Packet.objects.exclude(reminder_hours=[]) if p.reminder_hours}
    if not packets:
        return 0
    waiting = (Invitation.objects
               .filter(board_packet__in=packets, sent_at__isnull=False, started_at__isnull=True,
                       revoked_at__isnull=True, submitted_at__isnull=True,
                       sent_at__lte=now - timedelta(hours=min(min(h) for h in packets.values())))
               .select_related("candidate", "packet_version__packet").prefetch_related("reminders"))
    sent = 0
    for invitation in waiting.iterator(chunk_size=500):
        done = {r.after_hours for r in invitation.reminders.all()}
        hours, passed = _due(invitation, packets[invitation.board_packet_id], done, now)
        if hours is None and not passed:
            continue
        try:
            with transaction.atomic():
                for h in passed:
                    Reminder.objects.create(invitation=invitation, after_hours=h, at=now, sent=False)
                if hours is None:
                    continue
                link = invitation.link()
                if link is None:
                    # why not a new token: that would silently stop the link the candidate already has.
                    Reminder.objects.create(invitation=invitation, after_hours=hours, at=now, sent=False)
                    record(None, "reminder", invitation, f"{hours} h after the link: not sent, the link cannot be "
                           "rebuilt (SECRET_KEY changed); resend it from the board")
                    continue
                Reminder.objects.create(invitation=invitation, after_hours=hours, at=now)
                _send(invitation, hours, link)
                record(None, "reminder", invitation, f"{hours} h after the link, to {invitation.candidate.email}")
                sent += 1
        except IntegrityError:
            continue  # another sweep claimed it
        except Exception:  # the mail server refused or is away: nothing was kept, the next sweep tries again
            log.exception("reminder for invitation %s not sent; the next sweep tries again", invitation.pk)
    return sent
