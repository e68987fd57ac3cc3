from django import template

from takehome import access
from takehome.markup import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str):
    return render_markdown(text)


@register.filter
def in_group(user, name: str) -> bool:
    return access.in_group(user, name)
