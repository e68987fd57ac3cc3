"""Filters for the reviewer's pages."""

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from grading.engine import display
from grading.engine.agreement import describe_kappa

register = template.Library()


@register.simple_tag
def mark_badge(name: str, mark) -> str:
    """One reviewer's mark on one cell, for the review page (after submitting) and the debrief.

    why a tag, not an included template: the debrief draws up to twelve per
    row and 25 rows a page, and an include costs a template context each.
    """
    verdict = "pass" if mark.passed else "fail"
    if not mark.note:
        return format_html('<span class="mark-badge {}" data-reviewer="{}"><span class="who">{}</span> {}</span>',
                           verdict, name, name, verdict)
    note = display.clean_terminal_text(mark.note)
    return format_html('<span class="mark-badge {}" data-reviewer="{}" title="{}"><span class="who">{}</span> {}'
                       '<span class="note">{}</span></span>', verdict, name, note, name, verdict, note)


@register.simple_tag
def candidate_name(label: str) -> str:
    """The candidate as a reviewer may see them: the name, or a short code when the packet hides names."""
    return format_html('<span class="candidate">{}</span>', label)


@register.filter
def terminal(text: str | None) -> str:
    """A log as text (colour codes dropped, controls visible); still escaped by the template."""
    return display.clean_terminal_text(text)


@register.filter
def diff_html(text: str | None):
    """A unified diff highlighted by Pygments."""
    # why mark_safe is sound here: Pygments' HtmlFormatter escapes every
    # character of the candidate's diff; the only markup is its own spans.
    return mark_safe(display.highlight_diff(text or ""))


@register.filter
def kappa(value: float | None) -> str:
    if value is None:
        return "undefined"
    return f"{value:.2f} ({describe_kappa(value)})"


@register.filter
def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}%"


@register.filter
def get_item(mapping, key: str):
    """mapping[key] for keys a template cannot spell (``red.log``); None when absent."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None
