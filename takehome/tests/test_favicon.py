"""The site's icon: linked from every page, and /favicon.ico answered rather than a 404."""

import pytest
from django.contrib.staticfiles import finders
from django.templatetags.static import static


def test_favicon_ico_redirects_to_the_icon_in_static(client):
    r = client.get("/favicon.ico")
    assert r.status_code == 302
    assert r["Location"] == static("takehome/favicon.svg")


def test_the_icon_is_a_static_svg():
    path = finders.find("takehome/favicon.svg")
    assert path is not None
    with open(path, encoding="utf-8") as f:
        assert f.read().startswith("<svg")


@pytest.mark.django_db
def test_every_page_links_the_icon(client):
    html = client.get("/accounts/login/").content.decode()
    assert f'<link rel="icon" href="{static("takehome/favicon.svg")}" type="image/svg+xml">' in html
