from datetime import UTC

from django import template
from django.template.defaultfilters import date as date_filter
from django.utils import timezone
from django.utils.html import format_html

from shared import access
from takehome.markup import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str):
    return render_markdown(text)


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
    return format_html('<time datetime="{}" data-format="{}">{}</time>',
                       value.astimezone(UTC).isoformat(timespec="seconds"), fmt,
                       date_filter(timezone.localtime(value), fmt))
