"""Finding the invitation behind a link's token, with a per-address limit on look-ups."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

from takehome.models import Invitation


class TooManyLookups(Exception):
    """This client address has used up its look-ups for the current minute."""


def client_address(request: HttpRequest) -> str:
    """The address the limit counts against.

    why REMOTE_ADDR and not X-Forwarded-For: the header is set by the client
    and would let anyone pick a fresh address per request. Behind a proxy,
    have the proxy (or a middleware you trust) set REMOTE_ADDR.
    """
    return request.META.get("REMOTE_ADDR") or "unknown"


def count_lookup(request: HttpRequest) -> None:
    """Count one token look-up for this address; raise TooManyLookups past the limit.

    A fixed one-minute window in the cache: cheap, shared between processes
    when CACHE_URL names a shared cache, and forgiving of a short burst.
    """
    limit = settings.TOKEN_LOOKUPS_PER_MINUTE
    if limit <= 0:
        return
    key = f"th:lookups:{client_address(request)}:{int(time.time() // 60)}"
    # why add-then-incr: two processes racing on the first look-up both count.
    cache.add(key, 0, timeout=120)
    try:
        used = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=120)
        used = 1
    if used > limit:
        raise TooManyLookups()


def invitation_for(request: HttpRequest, token: str) -> Invitation | None:
    """The live invitation behind ``token`` (None when unknown or revoked), counted against the limit."""
    count_lookup(request)
    return Invitation.objects.select_related("candidate", "packet_version__packet").by_token(token)
