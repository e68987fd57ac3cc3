"""A table too wide for a phone scrolls in its own box (`.table-scroll`); a keyboard must reach that box
to scroll it, and a screen reader must be able to say what it holds (axe's scrollable-region-focusable).
The browser walk (browser/test_every_page.py) runs axe at a phone's width too; this is the fast guard."""

import re

from conftest import ROOT
from takehome.tests.test_content_security_policy import template_files

BOX = re.compile(r"<div\b[^>]*\bclass=\"table-scroll\"[^>]*>")


def test_every_scroll_box_takes_the_focus_and_has_a_name():
    found, boxes = [], 0
    for path in template_files():
        text = path.read_text()
        for match in BOX.finditer(text):
            boxes += 1
            tag, line = match.group(), text.count("\n", 0, match.start()) + 1
            if 'tabindex="0"' not in tag or 'role="region"' not in tag or not re.search(r'aria-label="[^"{]+', tag):
                found.append(f"{path.relative_to(ROOT)}:{line}: {tag}")
    assert boxes >= 10, "no scroll boxes found: has the class changed?"
    assert not found, 'a scroll box needs tabindex="0" role="region" aria-label="what it holds":\n' + "\n".join(found)


def test_every_preformatted_block_takes_the_focus():
    """Logs, code and diffs scroll when long (site.css gives each a height or width limit)."""
    found = []
    for path in template_files():
        text = path.read_text()
        for match in re.finditer(r"<pre\b[^>]*>", text):
            if 'tabindex="0"' not in match.group():
                found.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}: {match.group()}")
    assert not found, 'a <pre> that scrolls needs tabindex="0":\n' + "\n".join(found)
