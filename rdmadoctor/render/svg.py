"""Inline SVG charts for the HTML report: no script, no font, no fetch; every label is escaped.

    chart(series, kind="bw", link_rate_gbps=100.0) -> Markup("<svg ...>")

`series` is a list of {"label": str, "unit": str, "points": [{"size": int, "value": float, "low": float?,
"high": float?}]}: one line (or one bar per point) per perftest run. Several message sizes draw a line chart
against the message size (log scale); one size per run draws horizontal bars, scaled to the link rate when
it is known. Sizes are drawn in the SVG's own units (viewBox) and the element scales to its box.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from markupsafe import Markup, escape

PALETTE = ("#2563eb", "#0d9488", "#c026d3", "#ea580c", "#4b5563", "#65a30d")
WIDTH = 560
FONT = "font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif\""


def human_size(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1 and value == round(value):
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def nice_ticks(top: float, count: int = 5) -> List[float]:
    """0 and round steps up to at least `top`."""
    if top <= 0 or not math.isfinite(top):
        return [0.0, 1.0]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    ticks = [0.0]
    while ticks[-1] < top - 1e-9:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _text(x: float, y: float, s: Any, anchor: str = "start", size: int = 13, fill: str = "#334155",
          weight: str = "normal") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" fill="{fill}" '
            f'font-weight="{weight}">{escape(s)}</text>')


def _open(height: float, title: str, desc: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart-svg" viewBox="0 0 {WIDTH} {height:.0f}" '
            f'role="img" aria-label="{escape(title)}" {FONT}><title>{escape(title)}</title>'
            f'<desc>{escape(desc)}</desc>')


WHAT = {"bw": "bandwidth", "lat": "latency", "rate": "message rate"}


def chart(series: Sequence[Dict[str, Any]], kind: str = "bw", link_rate_gbps: Optional[float] = None,
          title: str = "") -> Markup:
    """An inline SVG for these series, or an empty Markup when there is nothing to draw."""
    series = [s for s in series if s.get("points")]
    if not series:
        return Markup("")
    unit = series[0].get("unit") or ""
    rate = link_rate_gbps if (kind == "bw" and unit == "Gb/s" and link_rate_gbps) else None
    sizes = sorted({p["size"] for s in series for p in s["points"]})
    if all(len(s["points"]) == 1 for s in series) or len(sizes) < 2:
        return _bars(series, kind, unit, rate, title)
    return _lines(series, kind, unit, rate, sizes, title)


def _bars(series: Sequence[Dict[str, Any]], kind: str, unit: str, rate: Optional[float], title: str) -> Markup:
    rows: List[Tuple[str, Dict[str, Any], str]] = []
    for i, s in enumerate(series):
        for p in s["points"]:
            rows.append((f'{s["label"]} · {human_size(p["size"])}', p, PALETTE[i % len(PALETTE)]))
    left, right, top, row_h = 16, 24, 34, 52
    plot_w = WIDTH - left - right
    vmax = max(max(p.get("high") or p["value"], p["value"]) for _, p, _ in rows)
    scale_top, ticks = _bar_scale(vmax, rate)
    height = top + row_h * len(rows) + 40
    what = WHAT.get(kind, kind)
    desc = "; ".join(f"{label}: {fmt(p['value'])} {unit}" for label, p, _ in rows)
    out = [_open(height, title or f"{what.capitalize()} ({unit})", desc)]
    out.append(_text(left, 18, f"{what.capitalize()}, {unit}" + (f"  ·  link rate {fmt(rate)} Gb/s" if rate else ""),
                     size=13, fill="#475569", weight="600"))
    axis_y = top + row_h * len(rows) + 4

    def x_of(v: float) -> float:
        return left + plot_w * (v / scale_top if scale_top else 0)

    for t in ticks:
        x = x_of(t)
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{axis_y}" stroke="#e2e8f0" stroke-width="1"/>')
        out.append(_text(x, axis_y + 18, fmt(t), anchor="middle", size=12, fill="#64748b"))
    if rate:
        x = x_of(rate)
        out.append(f'<line x1="{x:.1f}" y1="{top - 8}" x2="{x:.1f}" y2="{axis_y}" stroke="#0f172a" '
                   f'stroke-width="1.5" stroke-dasharray="5 4"/>')
    for i, (label, p, color) in enumerate(rows):
        y = top + i * row_h
        value = p["value"]
        out.append(_text(left, y + 12, label, size=13, fill="#1e293b", weight="600"))
        bar_y = y + 19
        out.append(f'<rect x="{left}" y="{bar_y}" width="{plot_w}" height="16" rx="3" fill="#f1f5f9"/>')
        w = max(x_of(value) - left, 1.5)
        out.append(f'<rect class="bar" x="{left}" y="{bar_y}" width="{w:.1f}" height="16" rx="3" fill="{color}">'
                   f'<title>{escape(label)}: {escape(fmt(value))} {escape(unit)}</title></rect>')
        if p.get("high") is not None and p["high"] > value:
            hx = x_of(p["high"])
            out.append(f'<line x1="{hx:.1f}" y1="{bar_y - 3}" x2="{hx:.1f}" y2="{bar_y + 19}" stroke="{color}" '
                       f'stroke-width="2"/>')
        out.append(_text(WIDTH - right, y + 12, _bar_caption(p, unit, rate), anchor="end", size=12, fill="#334155"))
    out.append("</svg>")
    return Markup("".join(out))


def _bar_scale(vmax: float, rate: Optional[float]) -> Tuple[float, List[float]]:
    """(the value a full bar stands for, the ticks)."""
    if rate and rate >= vmax:          # the link rate is the scale: a full bar is line rate
        return rate, [t for t in nice_ticks(rate, 4) if t <= rate + 1e-9]
    ticks = nice_ticks(max(vmax, rate or 0) * 1.05, 4)
    return ticks[-1], ticks


def _bar_caption(p: Dict[str, Any], unit: str, rate: Optional[float]) -> str:
    value = p["value"]
    caption = f"{fmt(value)} {unit}"
    if p.get("high") is not None and fmt(p["high"]) != fmt(value):
        caption += f" · {p.get('high_label', 'peak')} {fmt(p['high'])}"
    if p.get("low") is not None and fmt(p["low"]) != fmt(value):
        caption += f" · {p.get('low_label', 'min')} {fmt(p['low'])}"
    return caption + (f"  ({100 * value / rate:.0f}% of link)" if rate else "")


def _lines(series: Sequence[Dict[str, Any]], kind: str, unit: str, rate: Optional[float], sizes: List[int],
           title: str) -> Markup:
    left, right, top, bottom = 58, 20, 46, 48
    height = 320
    plot_w, plot_h = WIDTH - left - right, height - top - bottom
    lo, hi = math.log2(sizes[0]), math.log2(sizes[-1])
    vmax = max(max(p.get("high") or p["value"], p["value"]) for s in series for p in s["points"])
    ticks = nice_ticks(max(vmax, rate or 0) * 1.05, 5)
    ymax = ticks[-1]

    def x_of(size: int) -> float:
        return left + plot_w * ((math.log2(size) - lo) / (hi - lo) if hi > lo else 0.5)

    def y_of(v: float) -> float:
        return top + plot_h * (1 - v / ymax if ymax else 1)

    what = WHAT.get(kind, kind)
    desc = "; ".join(f"{s['label']}: " + ", ".join(f"{human_size(p['size'])} {fmt(p['value'])}" for p in s["points"])
                     for s in series)
    out = [_open(height, title or f"{what.capitalize()} against message size", desc)]
    out.append(_text(left - 50, 18, f"{what.capitalize()}, {unit}, against message size", size=13, fill="#475569",
                     weight="600"))
    # legend
    lx = left - 50
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{lx}" y="27" width="12" height="4" rx="1" fill="{color}"/>')
        label = str(s["label"])
        out.append(_text(lx + 16, 33, label, size=12, fill="#334155"))
        lx += 28 + 7 * len(label)
    for t in ticks:
        y = y_of(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{WIDTH - right}" y2="{y:.1f}" stroke="#e2e8f0"/>')
        out.append(_text(left - 8, y + 4, fmt(t), anchor="end", size=12, fill="#64748b"))
    every = max(1, math.ceil(len(sizes) / 7))
    for j, size in enumerate(sizes):
        x = x_of(size)
        out.append(f'<line x1="{x:.1f}" y1="{top + plot_h}" x2="{x:.1f}" y2="{top + plot_h + 4}" stroke="#94a3b8"/>')
        if j % every == 0 or j == len(sizes) - 1:
            out.append(_text(x, top + plot_h + 18, human_size(size), anchor="middle", size=11, fill="#64748b"))
    out.append(_text(left + plot_w / 2, height - 8, "message size (bytes, log scale)", anchor="middle", size=12,
                     fill="#64748b"))
    out.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{WIDTH - right}" y2="{top + plot_h}" stroke="#94a3b8"/>')
    if rate:
        y = y_of(rate)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{WIDTH - right}" y2="{y:.1f}" stroke="#0f172a" '
                   f'stroke-width="1.5" stroke-dasharray="5 4"/>')
        out.append(_text(WIDTH - right, y - 6, f"link rate {fmt(rate)} Gb/s", anchor="end", size=12, fill="#0f172a"))
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = sorted(s["points"], key=lambda p: p["size"])
        path = " ".join(f"{x_of(p['size']):.1f},{y_of(p['value']):.1f}" for p in pts)
        out.append(f'<polyline class="series" points="{path}" fill="none" stroke="{color}" stroke-width="2.2" '
                   f'stroke-linejoin="round"/>')
        for p in pts:
            out.append(f'<circle cx="{x_of(p["size"]):.1f}" cy="{y_of(p["value"]):.1f}" r="3.2" fill="#fff" '
                       f'stroke="{color}" stroke-width="2"><title>{escape(s["label"])}, '
                       f'{escape(human_size(p["size"]))}: {escape(fmt(p["value"]))} {escape(unit)}</title></circle>')
    out.append("</svg>")
    return Markup("".join(out))
