"""Keyset pages for the long lists: the review queue, the debrief and the invitations board.

A page is found from the row it follows (or precedes) in the list's order,
never by an offset, so page 500 costs what page 1 costs: an index walk from
that row. The total is counted only up to a limit ("more than 1,000"), for
the same reason: an exact count of 100,000 filtered rows reads them all.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

COUNT_LIMIT = 1000


@dataclass(frozen=True)
class KeysetPage:
    """One page of ids in the list's order, with what the pager needs to link around it."""

    ids: list[int]
    has_previous: bool
    has_next: bool
    total: int  # exact when not total_is_more
    total_is_more: bool  # the list holds more than `total` rows

    @property
    def first_id(self) -> int | None:
        return self.ids[0] if self.ids else None

    @property
    def last_id(self) -> int | None:
        return self.ids[-1] if self.ids else None


def beyond(qs: QuerySet, key: str, value, pk: int, lower: bool) -> QuerySet:
    """The rows whose (key, pk) sorts below (or above) (value, pk), written so an index on key serves it."""
    if lower:
        return qs.filter(**{f"{key}__lte": value}).exclude(**{key: value, "pk__gte": pk})
    return qs.filter(**{f"{key}__gte": value}).exclude(**{key: value, "pk__lte": pk})


def cursor_from(params) -> tuple[str, int | None]:
    """("after" | "before", id) from the query string, ("last", None) or ("first", None)."""
    for direction in ("after", "before"):
        raw = params.get(direction, "")
        if raw.isdigit():
            return direction, int(raw)
    return ("last", None) if params.get("last") else ("first", None)


def limited_count(qs: QuerySet, limit: int | None = None) -> tuple[int, bool]:
    """(rows, False) when the list holds at most `limit` (COUNT_LIMIT) rows, else (limit, True)."""
    limit = limit or COUNT_LIMIT
    n = qs.order_by()[: limit + 1].count()
    return (limit, True) if n > limit else (n, False)


def keyset_page(qs: QuerySet, key: str, descending: bool, size: int, params,
                counted: QuerySet | None = None) -> KeysetPage:
    """The page the query string names, in (key, pk) order (newest first when descending).

    `counted`: the rows to count for the total when counting `qs` itself
    costs more (the same rows, reached from a narrower index).

    `after=<id>`: the page after that row; `before=<id>`: the page before it;
    `last=1`: the list's last page; nothing: the first. The cursor row need
    not be in the list any more (reviewed since, say): its place in the order
    is enough. An unknown id gives the first page.
    """
    forward = (f"-{key}", "-pk") if descending else (key, "pk")
    backward = (key, "pk") if descending else (f"-{key}", "-pk")
    direction, cursor = cursor_from(params)
    value = None
    if cursor is not None:
        value = qs.model._base_manager.filter(pk=cursor).values_list(key, flat=True).first()
        if value is None:
            direction = "first"
    ids = qs.values_list("pk", flat=True)
    if direction in ("first", "after"):
        rest = ids if direction == "first" else beyond(ids, key, value, cursor, lower=descending)
        found = list(rest.order_by(*forward)[: size + 1])
        if direction == "after" and not found:  # past the end (its rows went away): the last page instead
            return keyset_page(qs, key, descending, size, {"last": "1"}, counted)
        # why no query for the way back: a page reached from another one has one before it.
        page, has_previous, has_next = found[:size], direction == "after", len(found) > size
    else:
        rest = ids if direction == "last" else beyond(ids, key, value, cursor, lower=not descending)
        found = list(rest.order_by(*backward)[: size + 1])
        if direction == "before" and len(found) <= size:  # back at the start: the first page, full
            return keyset_page(qs, key, descending, size, {}, counted)
        page, has_previous, has_next = found[:size][::-1], len(found) > size, direction == "before"
    total, more = limited_count(qs if counted is None else counted)
    return KeysetPage(page, has_previous, has_next, total, more)
