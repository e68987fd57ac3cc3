import re
from datetime import UTC, datetime

from django import template
from django.template.defaultfilters import date as date_filter
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.safestring import SafeData, mark_safe

from shared import access
from takehome.markup import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str):
    return render_markdown(text)


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


@register.filter
def code_spans(text):
    """Plain-text words (a message, a refusal) as HTML: escaped, each `backticked` part in <code>.

    why: the same words go to the terminal (the `gate` command), where backticks read as code.
    Text already marked safe (a message's too) is left as it is.
    """
    if not isinstance(text, str):
        text = str(text)  # a message: its words, marked safe where they were written as HTML
    if isinstance(text, SafeData):
        return text
    parts = _CODE_SPAN.split(str(text))
    return mark_safe("".join(f"<code>{escape(part)}</code>" if i % 2 else escape(part)
                             for i, part in enumerate(parts)))


@register.filter
def in_group(user, name: str) -> bool:
    return access.in_group(user, name)


@register.filter
def utc_time(value, fmt: str = "Y-m-d H:i T"):
    """A time as the server's UTC text (the no-JS fallback) in a <time> element.

    static/takehome/localtime.js adds the viewer's local time beside it, in
    the same Django format (Y, m, d, H, i and s are read; T is left out).
    """
    if not value:
        return ""
    local = timezone.localtime(value)
    strftime = _strftime_format(fmt)
    return format_html('<time datetime="{}" data-format="{}">{}</time>',
                       value.astimezone(UTC).isoformat(timespec="seconds"), fmt,
                       local.strftime(strftime) if strftime else date_filter(local, fmt))


# Django's date format letters that strftime writes the same way (T: the zone's abbreviation).
_STRFTIME = {"Y": "%Y", "m": "%m", "d": "%d", "H": "%H", "i": "%M", "s": "%S", "T": "%Z"}


def _strftime_format(fmt: str) -> str | None:
    """The strftime format that writes what Django's ``fmt`` does, or None when it holds another letter.

    why: a page of the board or the queue shows a hundred times; Django's date formatter costs about
    ten times strftime each, for the same text.
    """
    if any(c.isalpha() and c not in _STRFTIME for c in fmt) or "\\" in fmt or "%" in fmt:
        return None
    return "".join(_STRFTIME.get(c, c) for c in fmt)


@register.filter
def server_time(text):
    """A time the evidence keeps as ISO text, shown as written; one with a zone (a server's clock)
    also in a <time> element, so localtime.js adds the viewer's local time beside it.

    A zip's DOS time has no zone: it cannot be moved into anyone's time and stays as written.
    """
    try:
        value = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return text
    if value.tzinfo is None:
        return text
    return format_html('<time datetime="{}" data-format="Y-m-d H:i:s">{}</time>',
                       value.astimezone(UTC).isoformat(timespec="seconds"), text)


@register.filter
def manages_team(user) -> bool:
    return access.manages_team(user)
