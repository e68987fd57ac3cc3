"""Permissions-Policy: every response denies the browser features the site never uses, and only those.

The app sets it (shared.http.PermissionsPolicyMiddleware), so it holds behind Caddy or any other proxy.
"""

import re

import pytest
from django.urls import reverse

from conftest import ROOT
from shared.http import PERMISSIONS_POLICY

pytestmark = pytest.mark.django_db
DENIED = {"camera", "microphone", "geolocation", "payment", "usb", "serial", "hid", "bluetooth", "midi",
          "display-capture"}


def features(header: str) -> dict[str, str]:
    return dict(part.strip().split("=", 1) for part in header.split(","))


def test_the_policy_denies_what_the_site_never_uses():
    policy = features(PERMISSIONS_POLICY)
    assert DENIED <= set(policy)
    assert all(allowed == "()" for allowed in policy.values())


def test_the_policy_leaves_alone_what_the_pages_use():
    # The terminal's copy and paste, and the replay player's full screen.
    scripts = "".join(path.read_text() for path in (ROOT / "static").rglob("*.js"))
    assert "navigator.clipboard" in scripts and "requestFullscreen" in scripts
    assert not {"clipboard-read", "clipboard-write", "fullscreen"} & set(features(PERMISSIONS_POLICY))


@pytest.mark.parametrize("path", ["/accounts/login/", "/no-such-page/", "/t/no-such-token/"])
def test_every_page_carries_the_policy(client, path):
    assert client.get(path)["Permissions-Policy"] == PERMISSIONS_POLICY


def test_a_signed_in_page_and_a_form_answer_carry_it_too(recruiter_client):
    assert recruiter_client.get(reverse("takehome:packet-list"))["Permissions-Policy"] == PERMISSIONS_POLICY
    refused = recruiter_client.post("/accounts/login/", {"username": "nobody", "password": "x"})
    assert re.search(r"\bcamera=\(\)", refused["Permissions-Policy"])
