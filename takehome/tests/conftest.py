"""Fixtures of the recruiter's side: a real OpenID Connect provider for single sign-on."""

from __future__ import annotations

import pytest

from conftest import free_port
from takehome.settings import sign_on_form_action
from takehome.tests.oidc_provider import Provider


@pytest.fixture
def oidc_provider(settings):
    """A provider serving on a local port (takehome/tests/oidc_provider.py), and this site set to sign on
    through it, its endpoints found by discovery; roles from the Team page until a test sets a claim."""
    from takehome.sso import provider as endpoints

    running = Provider(free_port()).start()
    for name, value in running.settings().items():
        setattr(settings, name, value)
    settings.CONTENT_SECURITY_POLICY = sign_on_form_action(settings.CONTENT_SECURITY_POLICY, running.issuer, "")
    endpoints.forget()
    yield running
    running.stop()
    endpoints.forget()
