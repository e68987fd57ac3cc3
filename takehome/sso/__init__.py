"""Single sign-on for staff through OpenID Connect (mozilla-django-oidc's code flow, with PKCE).

- `provider`: the provider's endpoints, from the settings or its discovery document.
- `backend`: the ID token's checks (signature against the provider's keys, issuer, audience, expiry,
  nonce), the account its verified email finds or makes, and its roles from a claim; and the password
  backend, which refuses every password while password login is off.
- `views`: the login page, the start and the callback of a sign-in, and the logout.

Who decides what: the provider vouches for the person and their email; the roles come from the claim
the settings name (each sign-in sets them) or, with no claim set, from the Team page.
"""
