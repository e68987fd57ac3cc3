"""The API's limit per token: a fixed one-minute window counted in the cache, as link look-ups are counted."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache


def over_limit(token_id: int, now: float | None = None) -> int | None:
    """Count one request of the token; None while within TAKEHOME_API_REQUESTS_PER_MINUTE, else the seconds to wait.

    why a fixed window in the cache: cheap, shared between web processes when CACHE_URL names a shared
    cache, and a burst at a minute's edge costs at most twice the limit.
    """
    limit = settings.API_REQUESTS_PER_MINUTE
    if limit <= 0:
        return None
    now = time.time() if now is None else now
    key = f"th:api-calls:{token_id}:{int(now // 60)}"
    # why add-then-incr: two processes racing on the first request both count.
    cache.add(key, 0, timeout=120)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=120)
        count = 1
    if count > limit:
        return max(1, 60 - int(now) % 60)
    return None
