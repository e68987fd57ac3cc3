"""What the packet commands share: finding the version a command names, with messages a person can act on."""

from __future__ import annotations

from django.core.management.base import CommandError

from takehome.models import Packet, PacketVersion


def packet_version(slug: str, number: int | None = None) -> tuple[Packet, PacketVersion]:
    """The packet `slug` and its version `number` (the latest when None); CommandError names what exists."""
    packet = Packet.objects.filter(slug=slug).first()
    if packet is None:
        known = ", ".join(Packet.objects.values_list("slug", flat=True)) or "none"
        raise CommandError(f"No packet with slug {slug!r} (known: {known}).")
    versions = packet.versions.all()
    version = versions.filter(number=number).first() if number else versions.order_by("-number").first()
    if version is None:
        numbers = ", ".join(str(n) for n in versions.order_by("number").values_list("number", flat=True))
        raise CommandError(f"Packet {packet.slug} has no version {number} (versions: {numbers or 'none'}).")
    return packet, version
