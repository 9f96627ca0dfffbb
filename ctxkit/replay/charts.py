"""The replay page's plots as inline SVG: no script, no library, nothing fetched. Labels are
escaped here, so the markup is safe to place in an autoescaping template as it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["COLOURS", "bars", "lines"]

COLOURS = ("#5b6472", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
"""``recorded`` first (grey), then each candidate."""

_WIDTH, _HEIGHT, _LEFT, _BOTTOM, _TOP = 560, 180, 56, 24, 10
_BARS_WIDTH = 480


def lines(
    series: Mapping[str, Sequence[int]],
    budgets: Sequence[int | None] = (),
    *,
    breaks: Mapping[str, Sequence[int]] | None = None,
) -> str:
    """Tokens per request, one line per manager, the budget dashed, and a ring at each
    request where a manager has a required finding."""
    longest = max((len(v) for v in series.values()), default=0)
    sent = max([1, *(max(v, default=0) for v in series.values())])
    budget = max((b for b in budgets if b), default=None)
    drawn = budget is not None and budget <= 2 * sent  # a window far above is said, not drawn
    top = max(sent, budget) if drawn and budget else sent
    plot_w, plot_h = _WIDTH - _LEFT - 8, _HEIGHT - _BOTTOM - _TOP

    def x(index: int) -> float:
        return _LEFT + (plot_w * index / (longest - 1) if longest > 1 else plot_w / 2)

    def y(value: float) -> float:
        return _TOP + plot_h * (1 - value / top)

    parts = [_axes(top, longest, plot_w, plot_h)]
    if budget is not None and not drawn:
        parts.append(
            f'<text x="{_LEFT + plot_w}" y="{_TOP + 8}" font-size="11" text-anchor="end" '
            f'fill="#777">budget {budget:,}, off the scale</text>'
        )
    if drawn:
        points = " ".join(f"{x(i):.1f},{y(b):.1f}" for i, b in enumerate(budgets) if b)
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="#999" stroke-dasharray="4 3"/>'
        )
    for colour, (name, values) in zip(COLOURS * 4, series.items(), strict=False):
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2">'
            f"<title>{escape(name)}</title></polyline>"
        )
        for index in (breaks or {}).get(name, ()):
            if index < len(values):
                parts.append(
                    f'<circle cx="{x(index):.1f}" cy="{y(values[index]):.1f}" r="5" '
                    f'fill="none" stroke="{colour}" stroke-width="2"><title>{escape(name)}: '
                    f"required finding at request {index}</title></circle>"
                )
    return _svg(parts, "tokens sent per request", _WIDTH, _HEIGHT)


def bars(values: Mapping[str, float | None], what: str) -> str:
    """A share per manager (0 to 1) as a horizontal bar; a manager without one is left
    empty and said so."""
    row, label_w = 22, 170
    height = row * len(values) + 8
    parts = []
    for n, (colour, (name, share)) in enumerate(zip(COLOURS * 4, values.items(), strict=False)):
        top = 4 + n * row
        parts.append(f'<text x="0" y="{top + 14}" font-size="12">{escape(_short(name, 26))}</text>')
        if share is None:
            parts.append(f'<text x="{label_w}" y="{top + 14}" font-size="12" fill="#777">-</text>')
            continue
        width = (_BARS_WIDTH - label_w - 60) * max(0.0, min(1.0, share))
        parts.append(
            f'<rect x="{label_w}" y="{top + 3}" width="{width:.1f}" height="{row - 8}" '
            f'fill="{colour}"/><text x="{label_w + width + 6:.1f}" y="{top + 14}" '
            f'font-size="12">{100 * share:.1f}%</text>'
        )
    return _svg(parts, what, _BARS_WIDTH, height)


def _axes(top: int, longest: int, plot_w: float, plot_h: float) -> str:
    bottom = _TOP + plot_h
    ticks = [
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{bottom}" stroke="#bbb"/>',
        f'<line x1="{_LEFT}" y1="{bottom}" x2="{_LEFT + plot_w}" y2="{bottom}" stroke="#bbb"/>',
        f'<text x="{_LEFT - 4}" y="{_TOP + 8}" font-size="11" text-anchor="end">{top:,}</text>',
        f'<text x="{_LEFT - 4}" y="{bottom}" font-size="11" text-anchor="end">0</text>',
        f'<text x="{_LEFT}" y="{bottom + 16}" font-size="11">request 0</text>',
    ]
    if longest > 1:
        ticks.append(
            f'<text x="{_LEFT + plot_w}" y="{bottom + 16}" font-size="11" '
            f'text-anchor="end">{longest - 1}</text>'
        )
    return "".join(ticks)


def _svg(parts: list[str], what: str, width: int, height: int) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(what)}">'
        + "".join(parts)
        + "</svg>"
    )


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
