"""Who a provider's answer signs on, and with which roles; and the password backend that can be turned off.

The ID token is checked here in full (mozilla-django-oidc's own check leaves the audience and the issuer
out and lets an expired token's error escape): its RS256 signature against the provider's published keys,
its issuer, its audience (and `azp` when it names several), its expiry and issue time, and the nonce this
browser's sign-in was started with. The userinfo endpoint's claims join the ID token's only for the same
subject.
"""

from __future__ import annotations

import logging

import jwt
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from takehome.team.actions import ROLES, TeamError, do_sign_on

from . import provider

log = logging.getLogger(__name__)

SIGNING_ALGORITHMS = ["RS256"]
# Clocks of the provider and this server may differ by this much.
LEEWAY_S = 60


class SignOnRefused(Exception):
    """The provider vouched for someone this site will not sign on; the message tells them why and what to do."""


class PasswordBackend(ModelBackend):
    """Django's username and password check, refusing every password while TAKEHOME_PASSWORD_LOGIN is false."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if not settings.PASSWORD_LOGIN:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    def get_user(self, user_id):
        # why: turning password login off ends the sessions a password opened, at their next request.
        return super().get_user(user_id) if settings.PASSWORD_LOGIN else None


def email_is_verified(claims: dict) -> bool:
    """Whether the provider vouches for the claims' email: `email_verified` true (some send the word), or
    absent where TAKEHOME_OIDC_TRUST_EMAILS says this provider never sends it."""
    verified = claims.get("email_verified")
    if verified is None:
        return settings.OIDC_TRUST_EMAILS
    return verified is True or (isinstance(verified, str) and verified.strip().lower() == "true")


def claim_values(claims: dict, name: str) -> list[str]:
    """The values of claim `name` as strings: a list's items, or a single value. A dotted name reaches into
    objects (`realm_access.roles`) unless a claim has that very name (URL-like names have dots)."""
    if name in claims:
        value = claims[name]
    else:
        value = claims
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return [str(value)]
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value if isinstance(item, (str, int)) and not isinstance(item, bool)]
    return []


def roles_from_claims(claims: dict, name: str, role_map: dict[str, list[str]]) -> list[str]:
    """The roles the claim's values give through the map, in the Team page's order."""
    given = {role for value in claim_values(claims, name) for role in role_map.get(value, ())}
    return [role for role in ROLES if role in given]


class SignOnBackend(OIDCAuthenticationBackend):
    """The provider's callback, checked; answers nothing else (its keyword names bind no password login)."""

    def __init__(self, *args, **kwargs):
        # why not the parent's: it reads the endpoints from the settings when built, and Django builds every
        # backend for every password login too; ours are read (perhaps discovered) when a sign-in needs them.
        from django.contrib.auth import get_user_model

        self.UserModel = get_user_model()
        self.id_token = ""

    def authenticate(self, request, *, sso_nonce: str, sso_code_verifier: str | None = None):
        """The account the callback's code signs on to. Raises SuspiciousOperation for an answer that does
        not check out, SignOnRefused for a person this site will not sign on, ProviderUnavailable and
        requests' errors when the provider cannot be reached."""
        if not settings.OIDC_ENABLED:
            return None
        points = provider.endpoints()
        self.OIDC_OP_TOKEN_ENDPOINT = points.token
        self.OIDC_OP_USER_ENDPOINT = points.userinfo
        self.OIDC_OP_JWKS_ENDPOINT = points.jwks
        self.OIDC_RP_CLIENT_ID = settings.OIDC_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = SIGNING_ALGORITHMS[0]
        self.OIDC_RP_IDP_SIGN_KEY = None
        return super().authenticate(request, nonce=sso_nonce, code_verifier=sso_code_verifier)

    def verify_token(self, token, **kwargs):
        """The ID token's claims once every check passes; SuspiciousOperation naming the one that failed."""
        if not token:
            raise SuspiciousOperation("The provider's answer held no ID token.")
        try:
            key = self.retrieve_matching_jwk(token)
            claims = jwt.decode(token, key, algorithms=SIGNING_ALGORITHMS, audience=settings.OIDC_CLIENT_ID,
                                issuer=settings.OIDC_ISSUER, leeway=LEEWAY_S,
                                options={"require": ["iss", "aud", "exp", "iat", "sub"]})
        except (jwt.PyJWTError, KeyError) as exc:
            raise SuspiciousOperation(f"The ID token was refused: {exc or type(exc).__name__}.") from exc
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != settings.OIDC_CLIENT_ID:
            raise SuspiciousOperation("The ID token names several audiences but was not issued to this site.")
        # why: the nonce binds the token to the sign-in this browser started; a token taken from another
        # sign-in (or replayed) carries another.
        if "nonce" in kwargs and claims.get("nonce") != kwargs["nonce"]:
            raise SuspiciousOperation("The ID token's nonce is not this sign-in's.")
        return claims

    def get_user(self, user_id):
        # why: the parent's returns a deactivated account too, which would keep its sessions alive.
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None

    def store_tokens(self, access_token, id_token):
        # why not in the session here: logging in may start a new session; the view keeps it after.
        self.id_token = id_token

    def get_or_create_user(self, access_token, id_token, payload):
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            info = self.get_userinfo(access_token, id_token, payload)
            # why: userinfo's claims count only for the person the ID token names (OIDC Core 5.3.2).
            if info.get("sub") != payload["sub"]:
                raise SuspiciousOperation("The userinfo endpoint answered for another subject than the ID token's.")
            claims.update(info)
        return sign_on(claims)


def sign_on(claims: dict):
    """The account these (checked) claims sign on to, its roles set from the claim when one is configured."""
    email = claims.get("email")
    if not email or not isinstance(email, str):
        raise SignOnRefused("Your identity provider sent no email address, which is how this site finds your "
                            "account. Ask your provider's administrator to release the `email` claim to it.")
    # why: an unverified email is only what someone typed; linking it would let them take over the account
    # (a staff one too) of whoever owns the address here, and a new account would sit under another's name.
    if not email_is_verified(claims):
        log.warning("single sign-on refused: the provider did not verify the email %s (subject %s)",
                    email, claims.get("sub"))
        raise SignOnRefused(f"Your identity provider has not verified the email address {email}, so this site "
                            "does not sign you on with it. Verify it with your provider, then try again.")
    roles = None
    if settings.OIDC_ROLES_CLAIM:
        roles = roles_from_claims(claims, settings.OIDC_ROLES_CLAIM, settings.OIDC_ROLE_MAP)
    try:
        return do_sign_on(email, roles, claim=settings.OIDC_ROLES_CLAIM)
    except TeamError as exc:
        raise SignOnRefused(str(exc)) from exc
