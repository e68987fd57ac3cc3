"""Markdown written by people, rendered safely."""

import markdown
import nh3
from django.utils.safestring import SafeString, mark_safe

ALLOWED_TAGS = {
    "a", "p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
}


def render_markdown(text: str) -> SafeString:
    """Markdown to HTML, then sanitised: no scripts, no attributes beyond safe links."""
    html = markdown.markdown(text or "", extensions=["fenced_code", "tables", "sane_lists"])
    # why: prompts and refusals are written by people we do not control; nh3
    # keeps only the listed tags and strips javascript: links and handlers.
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes={"a": {"href", "title"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        # why: a long code line scrolls inside its block, which keyboard users must be able to reach.
        set_tag_attribute_values={"pre": {"tabindex": "0"}},
    )
    return mark_safe(clean)
