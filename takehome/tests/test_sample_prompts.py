"""The sample packets' prompts read in the workspace's task pane as they were written: every nested list a list.

The pane renders a prompt with the `markdown` filter (Python-Markdown), which nests a list only when it is
indented by four spaces; a list indented by two or three, as CommonMark allows, runs into its parent item's
paragraph. Each prompt's lists are compared with CommonMark's reading of the same text (markdown-it-py).
"""

from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.template import Context, Template
from markdown_it import MarkdownIt

from takehome.actions import sample_packet_dirs

PANE = Template("{% load takehome_tags %}{{ prompt|markdown }}")  # as templates/sessions_app/workspace.html


class _Lists(HTMLParser):
    """The list elements of an HTML fragment, in order: "ol", "li", "/li", ..."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        if tag in ("ul", "ol", "li"):
            self.tags.append(tag)

    def handle_endtag(self, tag) -> None:
        if tag in ("ul", "ol", "li"):
            self.tags.append(f"/{tag}")


def lists(html: str) -> list[str]:
    parser = _Lists()
    parser.feed(html)
    return parser.tags


def nested(tags: list[str]) -> int:
    """How many lists open inside a list item."""
    depth, count = 0, 0
    for tag in tags:
        if tag in ("ul", "ol") and depth:
            count += 1
        depth += {"li": 1, "/li": -1}.get(tag, 0)
    return count


@pytest.mark.parametrize("folder", sample_packet_dirs(), ids=lambda p: p.name)
def test_the_task_pane_keeps_each_sample_prompts_nested_lists(folder: Path):
    prompt = (folder / "prompt.md").read_text()
    pane = lists(PANE.render(Context({"prompt": prompt})))
    assert pane == lists(MarkdownIt("commonmark").render(prompt))
    assert nested(pane) >= 1  # step 3's two ways to ask the model
