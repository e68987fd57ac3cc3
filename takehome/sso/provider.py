"""The provider's endpoints: the settings' own, or its discovery document's, read once an hour."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import requests
from django.conf import settings

DISCOVERY_PATH = "/.well-known/openid-configuration"
DISCOVERY_KEPT_S = 3600


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be read or is not the issuer's; the message says which."""


@dataclass(frozen=True)
class Endpoints:
    authorization: str
    token: str
    jwks: str
    userinfo: str = ""
    end_session: str = ""


_cache: dict[str, tuple[float, Endpoints]] = {}
_lock = threading.Lock()


def endpoints() -> Endpoints:
    """The endpoints to use now; ProviderUnavailable when discovery is needed and fails."""
    given = settings.OIDC_ENDPOINTS
    if given:
        return Endpoints(**{key: given.get(key) or "" for key in ("authorization", "token", "jwks", "userinfo",
                                                                  "end_session")})
    issuer = settings.OIDC_ISSUER
    with _lock:
        kept = _cache.get(issuer)
        if kept and time.monotonic() - kept[0] < DISCOVERY_KEPT_S:
            return kept[1]
    found = discover(issuer)
    with _lock:
        _cache[issuer] = (time.monotonic(), found)
    return found


def discover(issuer: str) -> Endpoints:
    """Read `issuer`'s discovery document (OpenID Connect Discovery 1.0)."""
    url = issuer + DISCOVERY_PATH
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"The provider's discovery document ({url}) could not be read: {exc}") from exc
    # why: the spec asks for it; a document naming another issuer would have us trust another's tokens.
    if document.get("issuer", "").rstrip("/") != issuer:
        raise ProviderUnavailable(f"The discovery document at {url} names the issuer {document.get('issuer')!r}, "
                                  f"not {issuer!r}: check TAKEHOME_OIDC_ISSUER.")
    missing = [key for key in ("authorization_endpoint", "token_endpoint", "jwks_uri") if not document.get(key)]
    if missing:
        raise ProviderUnavailable(f"The discovery document at {url} has no {missing[0]}.")
    return Endpoints(authorization=document["authorization_endpoint"], token=document["token_endpoint"],
                     jwks=document["jwks_uri"], userinfo=document.get("userinfo_endpoint") or "",
                     end_session=document.get("end_session_endpoint") or "")


def forget() -> None:
    """Drop the documents read (the tests' providers change between tests)."""
    with _lock:
        _cache.clear()
