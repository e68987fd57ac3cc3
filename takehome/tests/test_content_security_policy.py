"""The Content-Security-Policy header, and templates that can live under it.

The browser walk (browser/test_every_page.py) proves the pages pass in Chromium;
these are the fast guards: the header is sent, and no template brings back an
inline script, an inline style or an inline event handler.
"""

import re
from pathlib import Path

import pytest

from conftest import ROOT

COMMENT = re.compile(r"{#.*?#}|{% comment %}.*?{% endcomment %}", re.S)
TEMPLATE_DIRS = [ROOT / "templates", *ROOT.glob("*/templates")]
INLINE = [
    (re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I), "an inline <script> (put it in a static .js file)"),
    (re.compile(r"<style\b", re.I), "a <style> element (put it in static/takehome/site.css)"),
    (re.compile(r"\sstyle=", re.I), "a style= attribute (use a class from site.css)"),
    (re.compile(r"\son[a-z]+=", re.I), "an inline event handler (listen from a static .js file)"),
    (re.compile(r"javascript:", re.I), "a javascript: URL"),
]


@pytest.mark.django_db
def test_every_response_carries_a_policy_without_inline_exceptions(client):
    policy = client.get("/accounts/login/")["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy


@pytest.mark.django_db
def test_error_pages_carry_the_policy_too(client):
    assert "script-src 'self'" in client.get("/no-such-page/")["Content-Security-Policy"]


def template_files() -> list[Path]:
    return sorted(p for folder in TEMPLATE_DIRS for p in folder.rglob("*.html"))


def test_no_template_has_inline_script_style_or_handlers():
    found = []
    for path in template_files():
        # Template comments say what not to do; blank them, keeping the line numbers.
        text = COMMENT.sub(lambda m: "\n" * m.group().count("\n"), path.read_text())
        for pattern, what in INLINE:
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert template_files(), "no templates found"
    assert not found, "\n".join(found)
