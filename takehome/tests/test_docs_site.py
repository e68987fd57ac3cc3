"""The README is a front door and the rest is a documentation site that builds without a warning.

mkdocs.yml is strict and validates links, anchors and the nav, so a page that links to a missing
page or heading, or a page left out of the nav, fails `mkdocs build --strict` here (a second or
two) rather than on the published site. The README is not part of the site: its links are checked
here. What the pages' commands do is held by test_readme_commands.py. A figure is stated once: the hosted
sessions' capacity is on the benchmarks page, and operations links to it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_docs_build_strictly(tmp_path):
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "when-not-to-use.html").is_file()


def test_the_config_is_strict_and_lists_every_page():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True and config["docs_dir"] == "docs"
    assert config["validation"]["anchors"] == "warn" and config["validation"]["omitted_files"] == "warn"

    def pages(nav):
        for entry in nav:
            for value in entry.values():
                yield from pages(value) if isinstance(value, list) else [value]

    assert sorted(pages(config["nav"])) == sorted(p.name for p in DOCS.glob("*.md"))


def test_the_readme_stays_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, over {README_MAX_LINES}: what it does not need to say on the front door "
        "belongs on a page under docs/")


def test_every_link_of_the_readme_reaches_a_file_and_every_page_is_linked():
    text = README.read_text()
    targets = [t for t in LINK.findall(text) if "://" not in t and not t.startswith("#")]
    missing = [t for t in targets if not (ROOT / t.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
    linked = {Path(t.split("#")[0]).name for t in targets if t.startswith("docs/")}
    assert linked >= {p.name for p in DOCS.glob("*.md")} - {"index.md"}, "the README's list of pages misses one"


def section(page: Path, heading: str) -> str:
    """The text of ``page`` under its ``## heading``, down to the next heading of that level."""
    text = page.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


# A measured figure: a number of sessions or candidates, a size, a time or a share.
FIGURE = re.compile(r"\b\d[\d,.]*\s*(?:candidates|sessions|MiB|GiB|ms|%)")


def test_the_hosted_sessions_figures_are_stated_on_the_benchmarks_page_only():
    operations = section(DOCS / "operations.md", "Hosted sessions: how many, and on how many hosts")
    assert "(benchmarks.md#hosted-sessions)" in operations
    assert FIGURE.findall(operations) == [], "operations.md states figures the benchmarks page holds: link to them"
    assert FIGURE.search(section(DOCS / "benchmarks.md", "Hosted sessions"))
