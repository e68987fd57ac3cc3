"""Finding the invitation behind a link's token, with a per-address limit on look-ups."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

from takehome.models import Invitation


class TooManyLookups(Exception):
    """This client address has missed too many links this minute; ``retry_after``: seconds to the next."""

    def __init__(self, retry_after: int):
        super().__init__(f"retry after {retry_after} s")
        self.retry_after = retry_after


def client_address(request: HttpRequest) -> str:
    """The address the limit counts against.

    why REMOTE_ADDR and not X-Forwarded-For: the header is set by the client
    and would let anyone pick a fresh address per request. Behind a proxy,
    have the proxy (or a middleware you trust) set REMOTE_ADDR.
    """
    return request.META.get("REMOTE_ADDR") or "unknown"


def _misses_key(request: HttpRequest, now: float) -> str:
    return f"th:link-misses:{client_address(request)}:{int(now // 60)}"


def count_miss(request: HttpRequest, now: float) -> None:
    """Count one look-up of a token that found no live invitation, for this address and minute.

    A fixed one-minute window in the cache: cheap, shared between processes
    when CACHE_URL names a shared cache, and forgiving of a short burst.
    """
    key = _misses_key(request, now)
    # why add-then-incr: two processes racing on the first miss both count.
    cache.add(key, 0, timeout=120)
    try:
        cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=120)


def invitation_for(request: HttpRequest, token: str) -> Invitation | None:
    """The live invitation behind ``token`` (None when unknown or revoked).

    Only misses count against the per-address limit: forty candidates behind
    one office address, or a load test on loopback, use valid links, and those
    have their own per-invitation limits. Once an address has used up its
    misses, every look-up from it is refused until the minute ends, valid
    tokens too. why: answering a valid token while refusing the others would
    tell a guesser which of its guesses hit, which is what the limit prevents.
    """
    limit = settings.TOKEN_LOOKUPS_PER_MINUTE
    now = time.time()
    if limit > 0 and (cache.get(_misses_key(request, now)) or 0) >= limit:
        raise TooManyLookups(retry_after=60 - int(now) % 60)
    invitation = Invitation.objects.select_related("candidate", "packet_version__packet").by_token(token)
    if invitation is None and limit > 0:
        count_miss(request, now)
    return invitation
