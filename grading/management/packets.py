"""What the grading commands share: finding a packet version by slug and number, with clear refusals."""

from __future__ import annotations

from django.core.management.base import CommandError

from takehome.models import Packet, PacketVersion


def find_packet_version(slug: str, number: int | None) -> PacketVersion:
    """The packet's version ``number`` (its latest when None); CommandError saying what exists otherwise."""
    packet = Packet.objects.filter(slug=slug).first()
    if packet is None:
        known = ", ".join(Packet.objects.values_list("slug", flat=True)) or "none"
        raise CommandError(f"No packet with slug {slug!r} (known: {known}).")
    versions = packet.versions.order_by("-number")
    version = versions.filter(number=number).first() if number else versions.first()
    if version is None:
        raise CommandError(f"Packet {packet.slug} has no version {number}." if number else
                           f"Packet {packet.slug} has no version yet.")
    return version
