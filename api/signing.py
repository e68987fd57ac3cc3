"""Webhook signatures and the addresses webhooks may go to: plain Python, no database.

The signature is Stripe's scheme: the header ``Takehome-Signature: t=<unix time>,v1=<hex>`` where the hex
is HMAC-SHA256, keyed with the endpoint's secret, of ``"<t>.<body>"``. A receiver recomputes it over the
raw body and refuses a signature older than a few minutes (a replay).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import socket
import time
from urllib.parse import urlsplit

HEADER = "Takehome-Signature"
TOLERANCE_S = 300


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under ``secret``."""
    return hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def signature_header(secret: str, body: bytes, timestamp: int | None = None) -> str:
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={signature(secret, t, body)}"


def verify(header: str, body: bytes, secret: str, now: float | None = None, tolerance: int = TOLERANCE_S) -> bool:
    """True when ``header`` signs ``body`` with ``secret`` and is at most ``tolerance`` seconds old."""
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        parts.setdefault(key, []).append(value)
    try:
        t = int(parts["t"][0])
    except (KeyError, ValueError):
        return False
    # why the age: a signed body captured once must not be accepted again later.
    if abs((time.time() if now is None else now) - t) > tolerance:
        return False
    expected = signature(secret, t, body)
    # why compare_digest: a plain == answers faster the earlier the first wrong character.
    return any(hmac.compare_digest(expected, candidate) for candidate in parts.get("v1", []))


class RefusedAddress(Exception):
    """A webhook address we will not post to; the message says why."""


def _resolve(host: str, port: int) -> list[str]:
    try:
        return sorted({info[4][0] for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)})
    except (OSError, UnicodeError) as exc:
        raise RefusedAddress(f"The host {host} cannot be resolved ({exc}).") from exc


def check_address(url: str, *, allow_private: bool, own_hosts: tuple[str, ...] = ()) -> None:
    """Refuse an address a webhook must not be sent to, or return.

    why: the server posts wherever a recruiter says, from inside the network it runs in; without this an
    endpoint could reach the server itself, its database or Redis, or a cloud's metadata address
    (server-side request forgery). Every address the host resolves to must be public: neither loopback,
    private, link-local, shared (CGNAT), multicast, reserved nor unspecified. ``allow_private`` lifts
    that, for a site whose receivers are on its own network. ``own_hosts``: the site's own names,
    refused whatever they resolve to.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RefusedAddress("A webhook address starts with https:// (or http://) and names a host.")
    if parts.username or parts.password:
        raise RefusedAddress("A webhook address carries no user name or password; sign-in is the signature.")
    if allow_private:
        return
    host = parts.hostname.lower().rstrip(".")
    if host in {h.lower() for h in own_hosts} or host == "localhost" or host.endswith(".localhost"):
        raise RefusedAddress(f"{host} is this server itself.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise RefusedAddress("The port is not a number from 1 to 65535.") from exc
    for address in _resolve(host, port):
        ip = ipaddress.ip_address(address.split("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        if not ip.is_global or ip.is_multicast:
            raise RefusedAddress(f"{host} points at {ip}, an address inside a private network or this "
                                 "machine; webhooks go to public addresses only.")
