"""Geometry of the server-drawn SVG charts on the packet page. Pure: numbers in, numbers out.

The templates draw the shapes (takehome/_chart_*.html); this module only
says where each bar goes, so it is tested without Django. No chart library,
no JavaScript: a reader without the picture gets the same numbers as a table.
"""

from __future__ import annotations

from dataclasses import dataclass

LABEL_W = 150  # room for the step names, left of the funnel's bars
BAR_AREA_W = 300
COUNT_W = 70  # room for "123 (45%)" right of a bar
ROW_H = 26
BAR_H = 18

HIST_W = 420
HIST_H = 160
HIST_TOP = 16  # room for the count above the tallest bar
HIST_AXIS = 34  # room for the bucket labels under the bars


@dataclass(frozen=True)
class Bar:
    label: str
    count: int
    x: float
    y: float
    w: float
    h: float
    text_x: float  # where the bar's label or count is written
    text_y: float
    percent: int | None = None  # of the first step (funnel only)


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: tuple[Bar, ...]
    total: int  # the funnel's first step; a histogram's number of candidates measured
    axis_y: float = 0  # histogram: where the baseline is drawn


def funnel_chart(steps: list[tuple[str, str, int]]) -> Chart:
    """Horizontal bars, one per step, each as long as its count relative to the first step's."""
    top = max((count for _, _, count in steps), default=0)
    bars = []
    for i, (_, label, count) in enumerate(steps):
        w = BAR_AREA_W * count / top if top else 0
        y = i * ROW_H + (ROW_H - BAR_H) / 2
        percent = round(100 * count / steps[0][2]) if steps and steps[0][2] else None
        bars.append(Bar(label, count, LABEL_W, y, round(w, 1), BAR_H, LABEL_W + w + 6, y + BAR_H - 4, percent))
    return Chart(LABEL_W + BAR_AREA_W + COUNT_W, max(len(steps), 1) * ROW_H, tuple(bars),
                 steps[0][2] if steps else 0)


def buckets(edges: tuple[int, ...], at_most: list[int], total: int) -> list[tuple[str, int]]:
    """Histogram buckets from cumulative counts: ``at_most[i]`` is how many took at most ``edges[i]`` minutes.

    >>> buckets((5, 10), [2, 5], 6)
    [("≤5", 2), ("5–10", 3), (">10", 1)]
    """
    result = []
    below = 0
    for i, (edge, count) in enumerate(zip(edges, at_most)):
        label = f"≤{edge}" if i == 0 else f"{edges[i - 1]}–{edge}"
        result.append((label, max(count - below, 0)))
        below = max(count, below)
    result.append((f">{edges[-1]}", max(total - below, 0)))
    return result


def histogram(counts: list[tuple[str, int]]) -> Chart:
    """Vertical bars, one per bucket, the tallest one filling the chart's height."""
    top = max((count for _, count in counts), default=0)
    n = max(len(counts), 1)
    slot = HIST_W / n
    plot_h = HIST_H - HIST_TOP - HIST_AXIS
    baseline = HIST_TOP + plot_h
    bars = []
    for i, (label, count) in enumerate(counts):
        h = plot_h * count / top if top else 0
        x = i * slot + slot * 0.15
        bars.append(Bar(label, count, round(x, 1), round(baseline - h, 1), round(slot * 0.7, 1), round(h, 1),
                        round(i * slot + slot / 2, 1), round(baseline - h - 4, 1)))
    return Chart(HIST_W, HIST_H, tuple(bars), sum(c for _, c in counts), axis_y=baseline)
