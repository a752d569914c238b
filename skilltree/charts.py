"""Inline SVG for the HTML report: the coverage treemap, predicted-vs-used scatter, weekly uses,
weight lines. Every function returns one self-contained <svg> string (or a one-line note when
there is nothing to draw); text is escaped; no scripts, no fonts.

Colours have one meaning each across the page: blues = uses (darker = more), red = an exploration
that did not become a verified skill, the four dimension colours = the four dimensions, slate =
demand, green = selected/verified marks. Labels are drawn only where they fit whole (width
estimated generously); everything else is in tooltips and the tables below."""
from __future__ import annotations

import math
from html import escape
from typing import Optional, Sequence

from skilltree.report_data import ReportData
from skilltree.vectors import DIMENSIONS

USE_SCALE = ["#eef4fb", "#cfe0f3", "#9cc3e6", "#5f9fd3", "#2f78b7", "#16508a"]
FAILED = "#c62828"
DEMAND = "#8d6e63"
OK = "#2e7d32"
DIMENSION_COLORS = {"breadth": "#7b3fb5", "depth": "#00897b", "utility": "#e08a00", "innovation": "#d0437e"}
CHAR_W = 0.62  # estimated glyph width per font-size unit (generous for system sans fonts)


def _tip(text: str) -> str:
    return f' data-tip="{escape(text)}"'


def _f(value: float) -> str:
    return f"{value:.1f}"


def use_color(uses: int, peak: int) -> str:
    if uses <= 0 or peak <= 0:
        return USE_SCALE[0]
    return USE_SCALE[1 + min(len(USE_SCALE) - 2, int((len(USE_SCALE) - 1) * math.sqrt(uses / peak) - 1e-9))]


def fits(text: str, width: float, height: float, size: float) -> bool:
    return len(text) * size * CHAR_W + 8 <= width and size + 6 <= height


# ---- squarified treemap (Bruls, Huizing, van Wijk) -------------------------------------------

def _worst(row: list[float], side: float) -> float:
    total = sum(row)
    return max(max(side * side * r / (total * total), total * total / (side * side * r)) for r in row)


def squarify(sizes: Sequence[float], x: float, y: float, w: float, h: float) -> list[tuple[float, float, float, float]]:
    """Rectangles (x, y, w, h) for `sizes` (sorted descending for good aspect ratios) filling the box."""
    total = sum(sizes)
    if not sizes or total <= 0 or w <= 0 or h <= 0:
        return [(x, y, 0.0, 0.0) for _ in sizes]
    scaled = [s * w * h / total for s in sizes]
    rects: list[tuple[float, float, float, float]] = []
    row: list[float] = []
    i = 0
    while i < len(scaled):
        side = min(w, h)
        item = scaled[i]
        if not row or _worst(row + [item], side) <= _worst(row, side):
            row.append(item)
            i += 1
            continue
        x, y, w, h = _lay(row, x, y, w, h, rects)
        row = []
    if row:
        _lay(row, x, y, w, h, rects)
    return rects


def _lay(row: list[float], x: float, y: float, w: float, h: float, out: list) -> tuple[float, float, float, float]:
    total = sum(row)
    if w >= h:  # a column on the left
        col = total / h
        offset = y
        for r in row:
            out.append((x, offset, col, r / col))
            offset += r / col
        return x + col, y, w - col, h
    band = total / w  # a row on top
    offset = x
    for r in row:
        out.append((offset, y, r / band, band))
        offset += r / band
    return x, y + band, w, h - band


def coverage_map(data: ReportData, width: int = 1200) -> str:
    """Area = skills (and failed attempts, hatched red); colour = uses in the last 30 days."""
    tree, recent = data.tree, data.recent
    failed: dict[str, list] = {}
    for attempt in data.attempts:
        failed.setdefault(attempt.category, []).append(attempt)
    groups = [(name, sorted(tree.skills_in(name), key=lambda s: (-recent.get(s.id, 0), s.id)), failed.get(name, []))
              for name in tree.categories]
    groups += [(name, [], items) for name, items in failed.items() if name not in tree.categories]
    groups = [g for g in groups if g[1] or g[2]]
    if not groups:
        return '<p class="muted empty">No skills yet: run an exploration cycle (<code>ga explore --once</code>) to grow the tree.</p>'
    cells = sum(len(s) + len(f) for _, s, f in groups)
    height = round(min(620, 160 + 16 * math.sqrt(cells)))
    peak = max(recent.values(), default=0)
    groups.sort(key=lambda g: (-(len(g[1]) + len(g[2])), g[0]))
    boxes = squarify([len(s) + len(f) for _, s, f in groups], 0, 0, width, height)
    parts = ['<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
             f'<rect width="6" height="6" fill="#fff"/><line x1="0" y1="0" x2="0" y2="6" stroke="{FAILED}" stroke-width="2.5"/>'
             '</pattern></defs>']
    labels = []
    for (name, skills, attempts), (x, y, w, h) in zip(groups, boxes, strict=True):
        uses = sum(recent.get(s.id, 0) for s in skills)
        header = f"{name} · {len(skills)}" + (f" · {len(attempts)} not verified" if attempts else "")
        label = next((t for t in (header, f"{name} · {len(skills)}", name) if fits(t, w, h, 12)), None)
        top = 18 if label and h > 40 else 0
        tip = f"{name}: {len(skills)} skills, {uses} uses in {30} days" + (f", {len(attempts)} not verified" if attempts else "")
        parts.append(f'<g class="cat" data-category="{escape(name)}"><rect class="cat-box" x="{_f(x)}" y="{_f(y)}" '
                     f'width="{_f(w)}" height="{_f(h)}" fill="#fff" stroke="#1f2430" stroke-width="1.5"{_tip(tip)}/>')
        inner = squarify([1.0] * (len(skills) + len(attempts)), x + 1, y + top + 1, max(0.0, w - 2), max(0.0, h - top - 2))
        for skill, (sx, sy, sw, sh) in zip(skills, inner, strict=False):
            n = recent.get(skill.id, 0)
            fill = use_color(n, peak)
            tip = (f"{skill.name} ({name}): {n} uses in 30 days, {data.usage.get(skill.id, 0)} in all"
                   + ("" if skill.verified else ", unverified"))
            parts.append(f'<rect class="skill" data-skill="{escape(skill.id)}" x="{_f(sx)}" y="{_f(sy)}" width="{_f(sw)}" '
                         f'height="{_f(sh)}" fill="{fill}" stroke="#fff" stroke-width="{1 if sw > 4 else 0.3}"{_tip(tip)}/>')
            if fits(skill.name, sw, sh, 11):
                ink = "#fff" if fill in USE_SCALE[3:] else "#1f2430"
                labels.append(f'<text class="skill-label" data-skill="{escape(skill.id)}" x="{_f(sx + 4)}" y="{_f(sy + 14)}" fill="{ink}">{escape(skill.name)}</text>')
        for attempt, (ax, ay, aw, ah) in zip(attempts, inner[len(skills):], strict=False):
            tip = f"{attempt.title} ({name}): {attempt.outcome}: {'; '.join(attempt.reasons)[:300]}"
            parts.append(f'<rect class="failed" x="{_f(ax)}" y="{_f(ay)}" width="{_f(aw)}" height="{_f(ah)}" '
                         f'fill="url(#hatch)" stroke="{FAILED}" stroke-width="1"{_tip(tip)}/>')
        parts.append("</g>")
        if label and top:
            labels.append(f'<text class="cat-label" data-category="{escape(name)}" x="{_f(x + 5)}" y="{_f(y + 14)}">{escape(label)}</text>')
    return (f'<svg class="coverage" viewBox="0 0 {width} {height}" role="img" aria-label="coverage map">'
            + "".join(parts) + "".join(labels) + "</svg>")


def use_legend(peak: int) -> str:
    steps = "".join(f'<span class="swatch" style="background:{c}"></span>' for c in USE_SCALE)
    scale = f"0 {steps} {peak}" if peak else f'<span class="swatch" style="background:{USE_SCALE[0]}"></span> none yet'
    return (f'<span class="key">uses in the last 30 days: {scale}</span>'
            f'<span class="key"><span class="swatch hatch"></span>exploration not verified (reason in the list below)</span>')


# ---- predicted score against uses in the first 30 days ---------------------------------------

def prediction_scatter(data: ReportData, width: int = 620, height: int = 300) -> str:
    points = data.judged
    if not points:
        return '<p class="muted empty">No skill has a predicted score yet (skills get one when the planner creates them).</p>'
    left, right, top, bottom = 44, 16, 14, 40
    pw, ph = width - left - right, height - top - bottom
    peak = max(8, max(p.uses for p in points))

    def sx(v: float) -> float:
        return left + pw * v / 10

    def sy(v: float) -> float:
        return top + ph * (1 - v / peak)

    parts = [f'<rect class="zone" x="{_f(sx(8))}" y="{_f(sy(3))}" width="{_f(sx(10) - sx(8))}" height="{_f(sy(0) - sy(3))}"'
             f'{_tip("weight of the dominant dimension x0.9: predicted > 8, used < 3 times in 30 days")}/>',
             f'<rect class="zone" x="{_f(sx(0))}" y="{_f(sy(peak))}" width="{_f(sx(5) - sx(0))}" height="{_f(sy(5) - sy(peak))}"'
             f'{_tip("weight of the dominant dimension x1.1: predicted < 5, used > 5 times in 30 days")}/>']
    for v in range(0, 11, 2):
        parts.append(f'<text class="tick" x="{_f(sx(v))}" y="{_f(top + ph + 16)}" text-anchor="middle">{v}</text>')
    step = max(1, math.ceil(peak / 5))
    for v in range(0, peak + 1, step):
        parts.append(f'<text class="tick" x="{left - 6}" y="{_f(sy(v) + 4)}" text-anchor="end">{v}</text>'
                     f'<line x1="{left}" x2="{left + pw}" y1="{_f(sy(v))}" y2="{_f(sy(v))}" stroke="#eceff3"/>')
    for v in (5, 8):
        parts.append(f'<line class="threshold" x1="{_f(sx(v))}" x2="{_f(sx(v))}" y1="{top}" y2="{top + ph}"/>')
    for v in (3, 5):
        parts.append(f'<line class="threshold" x1="{left}" x2="{left + pw}" y1="{_f(sy(v))}" y2="{_f(sy(v))}"/>')
    parts.append(f'<text class="axis" x="{_f(left + pw / 2)}" y="{height - 4}" text-anchor="middle">predicted score (§6, 0-10)</text>')
    parts.append(f'<text class="axis" transform="rotate(-90)" x="{_f(-(top + ph / 2))}" y="12" text-anchor="middle">'
                 'uses in first 30 days</text>')
    for p in points:
        x, y = sx(max(0.0, min(10.0, p.skill.predicted or 0))), sy(p.uses)
        state = "judged" if p.complete else "still in its 30 days"
        tip = f"{p.skill.name}: predicted {p.skill.predicted:.2f}, {p.uses} uses in its first 30 days ({state})"
        if p.zone:
            tip += f"; rule {p.zone}: {'x0.9' if p.zone == 'over' else 'x1.1'}"
        parts.append(f'<circle class="pt{"" if p.complete else " open"}" cx="{_f(x)}" cy="{_f(y)}" r="4"{_tip(tip)}/>')
    note = ('<p class="muted small">Dashed lines: the 30-day rule\'s thresholds (score 5 and 8; 3 and 5 uses). Grey zones: '
            'lower right, the dominant dimension\'s weight ×0.9; upper left, ×1.1. Hollow points are still inside their 30 days.</p>')
    return (f'<svg class="scatter" viewBox="0 0 {width} {height}" role="img" aria-label="predicted against used">'
            + "".join(parts) + "</svg>" + note)


# ---- weekly uses, weights ---------------------------------------------------------------------

def weekly_usage(data: ReportData, width: int = 620, height: int = 220) -> str:
    weeks, series = data.week_starts, data.timeline
    totals = [sum(bucket.values()) for bucket in series]
    peak = max(totals, default=0)
    if not peak:
        return f'<p class="muted empty">No skill was used in these {len(weeks)} weeks.</p>'
    left, bottom, top_pad = 40, 26, 10
    plot_w, plot_h = width - left - 10, height - bottom - top_pad
    slot = plot_w / max(1, len(weeks))
    parts = [f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{width - 10}" y2="{top_pad + plot_h}" stroke="#999"/>']
    for tick in sorted({0, peak // 2, peak}):
        y = top_pad + plot_h - tick * plot_h / peak
        parts.append(f'<text class="tick" x="{left - 6}" y="{_f(y + 4)}" text-anchor="end">{tick}</text>'
                     f'<line x1="{left}" y1="{_f(y)}" x2="{width - 10}" y2="{_f(y)}" stroke="#eceff3"/>')
    every = max(1, math.ceil(len(weeks) * 46 / plot_w))  # a label is ~40 px wide
    for n, (week, bucket, total) in enumerate(zip(weeks, series, totals, strict=True)):
        x = left + n * slot + slot * 0.15
        h = total * plot_h / peak
        top_used = ", ".join(f"{k} {v}" for k, v in sorted(bucket.items(), key=lambda kv: -kv[1]) if v) or "none"
        tip = f"week of {week:%Y-%m-%d}: {total} uses ({top_used})"
        parts.append(f'<rect class="bar" x="{_f(x)}" y="{_f(top_pad + plot_h - h)}" width="{_f(slot * 0.7)}" height="{_f(h)}" '
                     f'fill="{USE_SCALE[4]}"{_tip(tip)}/>')
        if n % every == 0:
            parts.append(f'<text class="tick" x="{_f(x + slot * 0.35)}" y="{height - 8}" text-anchor="middle">{week:%m-%d}</text>')
    return f'<svg class="timeline" viewBox="0 0 {width} {height}" role="img" aria-label="uses per week">{"".join(parts)}</svg>'


def weight_lines(data: ReportData, width: int = 620, height: int = 240) -> str:
    points = data.weight_points
    if len(points) < 2:
        return ""  # one point is a table row, not a chart
    left, bottom, top_pad, right = 40, 26, 10, 90
    plot_w, plot_h = width - left - right, height - bottom - top_pad
    peak = max(0.5, math.ceil(max(max(w.values()) for _, w, _ in points) * 10 - 1e-9) / 10)
    step = plot_w / (len(points) - 1)

    def xy(n: int, value: float) -> tuple[float, float]:
        return left + n * step, top_pad + plot_h * (1 - value / peak)

    parts = []
    for tick in [n / 10 for n in range(0, round(peak * 10) + 1, 1 if peak <= 0.6 else 2)]:
        _, y = xy(0, tick)
        parts.append(f'<line x1="{left}" y1="{_f(y)}" x2="{left + plot_w}" y2="{_f(y)}" stroke="#eceff3"/>'
                     f'<text class="tick" x="{left - 6}" y="{_f(y + 4)}" text-anchor="end">{tick:.2f}</text>')
    ends = {}
    for dim in DIMENSIONS:
        coords = [xy(n, getattr(w, dim)) for n, (_, w, _) in enumerate(points)]
        path = " ".join(f"{'M' if n == 0 else 'L'}{_f(x)},{_f(y)}" for n, (x, y) in enumerate(coords))
        color = DIMENSION_COLORS[dim]
        parts.append(f'<path class="wline" d="{path}" fill="none" stroke="{color}" stroke-width="2.5"/>')
        for (x, y), (label, w, _) in zip(coords, points, strict=True):
            parts.append(f'<circle cx="{_f(x)}" cy="{_f(y)}" r="3.5" fill="{color}"'
                         f'{_tip(f"{label}: {dim} {getattr(w, dim):.3f}")}/>')
        ends[dim] = coords[-1]
    placed: list[float] = []
    for dim, (x, y) in sorted(ends.items(), key=lambda item: item[1][1]):  # end labels never overlap
        y = max(y, placed[-1] + 14) if placed else y
        placed.append(y)
        parts.append(f'<text class="end-label" x="{_f(x + 8)}" y="{_f(y + 4)}" fill="{DIMENSION_COLORS[dim]}">{dim}</text>')
    every = max(1, math.ceil(len(points) * 80 / plot_w))  # a date label is ~70 px wide
    for n, (label, _, _) in enumerate(points):
        if n % every == 0:
            x, _ = xy(n, 0)
            parts.append(f'<text class="tick" x="{_f(x)}" y="{height - 8}" text-anchor="middle">{escape(label)}</text>')
    return f'<svg class="weights" viewBox="0 0 {width} {height}" role="img" aria-label="weight history">{"".join(parts)}</svg>'


def score_bar(parts: Sequence[tuple[str, float, str]], total: Optional[float] = None, scale: float = 10.0) -> str:
    """A stacked bar (HTML) of (label, value, colour) contributions; width relative to `scale`."""
    segments = "".join(f'<span class="seg" style="width:{max(0.0, v) / scale * 100:.2f}%;background:{c}"'
                       f'{_tip(f"{label}: {v:.2f}")}></span>' for label, v, c in parts)
    return f'<span class="stack">{segments}</span>'
