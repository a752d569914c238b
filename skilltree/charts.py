"""Inline SVG for the HTML report: the radial tree, bars, stacked weekly usage, weight lines.
Every function returns one self-contained <svg> string; text is escaped; no scripts, no fonts."""
from __future__ import annotations

import math
from html import escape
from typing import Optional, Sequence

from skilltree.report_data import CategoryRow, ReportData
from skilltree.vectors import DIMENSIONS, ScoreVector

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#8cd17d", "#86bcb6", "#d37295", "#a0cbe8", "#ffbe7d", "#499894", "#bab0ac"]
DIMENSION_COLORS = {"breadth": "#4e79a7", "depth": "#f28e2b", "utility": "#59a14f", "innovation": "#e15759"}


def category_colors(names: Sequence[str]) -> dict[str, str]:
    return {name: PALETTE[n % len(PALETTE)] for n, name in enumerate(sorted(names))}


def _tip(text: str) -> str:
    return f' data-tip="{escape(text)}"'


def _f(value: float) -> str:
    return f"{value:.1f}"


def radial_tree(data: ReportData, size: int = 760) -> str:
    """Root in the middle, categories on the inner ring, skills on the outer ring; a category's
    arc is proportional to its number of skills; circle areas are proportional to usage."""
    tree, used = data.tree, data.usage
    if not tree.categories:
        return (f'<svg class="tree" viewBox="0 0 {size} 200" role="img" aria-label="empty skill tree">'
                f'<text x="{size / 2}" y="100" text-anchor="middle" class="muted">No skills yet: run '
                f'an exploration cycle to grow the tree.</text></svg>')
    colors = category_colors(list(tree.categories))
    center = size / 2
    labels = len(tree.skills) <= 90
    r_cat, r_skill = size * 0.2, size * (0.34 if labels else 0.38)
    groups = {name: sorted(tree.skills_in(name), key=lambda s: (-used.get(s.id, 0), s.id)) for name in sorted(tree.categories)}
    total = sum(len(skills) + 2 for skills in groups.values())  # +2: room between neighbouring categories
    max_use = max(used.values(), default=0)
    cat_uses = {name: sum(used.get(s.id, 0) for s in skills) for name, skills in groups.items()}
    max_cat = max(cat_uses.values(), default=0)
    edges, nodes, texts = [], [], []
    start = -math.pi / 2
    for name, skills in groups.items():
        span = 2 * math.pi * (len(skills) + 2) / total
        first = start + span / (len(skills) + 2)  # skills fill the middle of the arc
        mid = start + span / 2
        cx, cy = center + r_cat * math.cos(mid), center + r_cat * math.sin(mid)
        color = colors[name]
        edges.append(f'<line x1="{_f(center)}" y1="{_f(center)}" x2="{_f(cx)}" y2="{_f(cy)}" stroke="{color}" '
                     f'stroke-width="2" opacity="0.5"/>')
        for n, skill in enumerate(skills):
            angle = first + span * (n + 0.5) / (len(skills) + 2)
            sx, sy = center + r_skill * math.cos(angle), center + r_skill * math.sin(angle)
            qx = center + (r_cat + r_skill) / 2 * math.cos(angle)
            qy = center + (r_cat + r_skill) / 2 * math.sin(angle)
            edges.append(f'<path d="M{_f(cx)},{_f(cy)} Q{_f(qx)},{_f(qy)} {_f(sx)},{_f(sy)}" fill="none" '
                         f'stroke="{color}" stroke-width="1" opacity="0.35"/>')
            uses = used.get(skill.id, 0)
            radius = 3 + (9 * math.sqrt(uses / max_use) if max_use else 0)
            tip = f"{skill.name} ({name}): {uses} uses" + (", verified" if skill.verified else ", unverified")
            nodes.append(f'<circle class="skill" data-category="{escape(name)}" cx="{_f(sx)}" cy="{_f(sy)}" '
                         f'r="{_f(radius)}" fill="{color}" fill-opacity="{0.9 if skill.verified else 0.35}" '
                         f'stroke="{color}"{_tip(tip)}/>')
            if labels:
                degrees = math.degrees(angle)
                flip = 90 < (degrees % 360) < 270
                lx = center + (r_skill + radius + 4) * math.cos(angle)
                ly = center + (r_skill + radius + 4) * math.sin(angle)
                rotate = degrees + 180 if flip else degrees
                texts.append(f'<text class="skill-label" data-category="{escape(name)}" x="{_f(lx)}" y="{_f(ly)}" '
                             f'dy="0.32em" text-anchor="{"end" if flip else "start"}" '
                             f'transform="rotate({_f(rotate)} {_f(lx)} {_f(ly)})">{escape(skill.name[:28])}</text>')
        radius = 7 + (10 * math.sqrt(cat_uses[name] / max_cat) if max_cat else 0)
        nodes.append(f'<circle class="category" data-category="{escape(name)}" cx="{_f(cx)}" cy="{_f(cy)}" '
                     f'r="{_f(radius)}" fill="{color}" stroke="#fff" stroke-width="2"'
                     f'{_tip(f"{name}: {len(skills)} skills, {cat_uses[name]} uses")}/>')
        if labels:
            lx, ly, anchor = cx, cy - radius - 5, "middle"
        else:  # many skills: the name goes outside the ring, next to its arc, where there is room
            lx, ly = center + (r_skill + 22) * math.cos(mid), center + (r_skill + 22) * math.sin(mid) + 4
            anchor = "start" if math.cos(mid) > 0.2 else "end" if math.cos(mid) < -0.2 else "middle"
        texts.append(f'<text class="category-label" x="{_f(lx)}" y="{_f(ly)}" text-anchor="{anchor}">'
                     f'{escape(name)}</text>')
        start += span
    root = (f'<circle cx="{_f(center)}" cy="{_f(center)}" r="14" fill="#333"{_tip(f"{len(tree.skills)} skills")}/>'
            f'<text x="{_f(center)}" y="{_f(center + 30)}" text-anchor="middle" class="root-label">skills</text>')
    pad = 0 if labels else 90  # room for category names outside the ring
    return (f'<svg class="tree" viewBox="{-pad} 0 {size + 2 * pad} {size}" role="img" aria-label="skill tree">'
            + "".join(edges) + root + "".join(nodes) + "".join(texts) + "</svg>")


def category_bars(rows: Sequence[CategoryRow], width: int = 520) -> str:
    if not rows:
        return '<p class="muted">No categories yet.</p>'
    colors = category_colors([row.name for row in rows])
    row_h, label_w = 26, 130
    height = row_h * len(rows) + 10
    top = max(row.skills for row in rows) or 1
    parts = []
    for n, row in enumerate(sorted(rows, key=lambda r: (-r.skills, r.name))):
        y = 5 + n * row_h
        bar = (width - label_w - 90) * row.skills / top
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end">{escape(row.name[:18])}</text>'
            f'<rect class="bar" data-category="{escape(row.name)}" x="{label_w}" y="{y + 4}" width="{_f(max(bar, 1))}" '
            f'height="{row_h - 8}" rx="3" fill="{colors[row.name]}"'
            f'{_tip(f"{row.name}: {row.skills} skills ({row.verified} verified), {row.uses} uses")}/>'
            f'<text x="{_f(label_w + bar + 6)}" y="{y + 16}" class="muted">{row.skills} · {row.uses} uses</text>')
    return f'<svg class="bars" viewBox="0 0 {width} {height}" role="img" aria-label="skills per category">{"".join(parts)}</svg>'


def weekly_usage(data: ReportData, width: int = 1100, height: int = 240) -> str:
    weeks, series = data.week_starts, data.timeline
    names = sorted(data.tree.categories)
    colors = category_colors(names)
    left, bottom, top_pad = 40, 30, 10
    plot_w, plot_h = width - left - 10, height - bottom - top_pad
    totals = [sum(bucket.values()) for bucket in series]
    peak = max(totals, default=0)
    scale = plot_h / peak if peak else 0
    slot = plot_w / max(1, len(weeks))
    parts = [f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{width - 10}" y2="{top_pad + plot_h}" stroke="#999"/>']
    for tick in sorted({0, peak // 2, peak}) if peak else [0]:
        y = top_pad + plot_h - tick * scale
        parts.append(f'<text x="{left - 6}" y="{_f(y + 4)}" text-anchor="end" class="muted">{tick}</text>'
                     f'<line x1="{left}" y1="{_f(y)}" x2="{width - 10}" y2="{_f(y)}" stroke="#eee"/>')
    for n, (week, bucket) in enumerate(zip(weeks, series)):
        x = left + n * slot + slot * 0.15
        y = top_pad + plot_h
        for name in names:
            count = bucket.get(name, 0)
            if not count:
                continue
            h = count * scale
            y -= h
            parts.append(f'<rect class="bar" data-category="{escape(name)}" x="{_f(x)}" y="{_f(y)}" '
                         f'width="{_f(slot * 0.7)}" height="{_f(h)}" fill="{colors[name]}"'
                         f'{_tip(f"week of {week:%Y-%m-%d}: {name} {count} uses")}/>')
        if n % max(1, len(weeks) // 6) == 0:
            parts.append(f'<text x="{_f(x + slot * 0.35)}" y="{height - 10}" text-anchor="middle" class="muted">'
                         f'{week:%m-%d}</text>')
    if not peak:
        parts.append(f'<text x="{width / 2}" y="{top_pad + plot_h / 2}" text-anchor="middle" class="muted">'
                     f'No skill was used in these {len(weeks)} weeks.</text>')
    return f'<svg class="timeline" viewBox="0 0 {width} {height}" role="img" aria-label="usage per week">{"".join(parts)}</svg>'


def weight_lines(data: ReportData, width: int = 520, height: int = 240) -> str:
    points = data.weight_points
    left, bottom, top_pad, right = 40, 30, 10, 80
    plot_w, plot_h = width - left - right, height - bottom - top_pad
    peak = max(0.5, max(max(w.values()) for _, w, _ in points))
    step = plot_w / max(1, len(points) - 1)

    def xy(n: int, value: float) -> tuple[float, float]:
        return left + (n * step if len(points) > 1 else plot_w / 2), top_pad + plot_h * (1 - value / peak)

    parts = []
    for tick in (0.0, 0.25, 0.5) + ((peak,) if peak > 0.5 else ()):
        _, y = xy(0, tick)
        parts.append(f'<line x1="{left}" y1="{_f(y)}" x2="{left + plot_w}" y2="{_f(y)}" stroke="#eee"/>'
                     f'<text x="{left - 6}" y="{_f(y + 4)}" text-anchor="end" class="muted">{tick:.2f}</text>')
    ends = {}
    for dim in DIMENSIONS:
        coords = [xy(n, getattr(w, dim)) for n, (_, w, _) in enumerate(points)]
        path = " ".join(f"{'M' if n == 0 else 'L'}{_f(x)},{_f(y)}" for n, (x, y) in enumerate(coords))
        color = DIMENSION_COLORS[dim]
        parts.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2.5"/>')
        for n, ((x, y), (label, w, _)) in enumerate(zip(coords, points)):
            parts.append(f'<circle cx="{_f(x)}" cy="{_f(y)}" r="3.5" fill="{color}"'
                         f'{_tip(f"{label}: {dim} {getattr(w, dim):.3f}")}/>')
        ends[dim] = coords[-1]
    placed: list[float] = []
    for dim, (x, y) in sorted(ends.items(), key=lambda item: item[1][1]):  # end labels never overlap
        y = max(y, placed[-1] + 12) if placed else y
        placed.append(y)
        parts.append(f'<text x="{_f(x + 8)}" y="{_f(y + 4)}" fill="{DIMENSION_COLORS[dim]}">{dim}</text>')
    for n, (label, _, _) in enumerate(points):
        if n % max(1, len(points) // 5) == 0 or n == len(points) - 1:
            x, _ = xy(n, 0)
            parts.append(f'<text x="{_f(x)}" y="{height - 10}" text-anchor="middle" class="muted">{escape(label)}</text>')
    return f'<svg class="weights" viewBox="0 0 {width} {height}" role="img" aria-label="weight history">{"".join(parts)}</svg>'


def vector_bars(vector: Optional[ScoreVector], width: int = 160) -> str:
    if vector is None:
        return '<span class="muted">no score vector</span>'
    row_h = 14
    parts = []
    for n, dim in enumerate(DIMENSIONS):
        value = getattr(vector, dim)
        y = n * row_h
        parts.append(f'<text x="0" y="{y + 10}" class="tiny">{dim[:4]}</text>'
                     f'<rect x="34" y="{y + 2}" width="{width - 70}" height="9" fill="#eee" rx="2"/>'
                     f'<rect x="34" y="{y + 2}" width="{_f((width - 70) * value / 10)}" height="9" rx="2" '
                     f'fill="{DIMENSION_COLORS[dim]}"{_tip(f"{dim} {value:.1f} / 10")}/>'
                     f'<text x="{width - 30}" y="{y + 10}" class="tiny">{value:.1f}</text>')
    return f'<svg class="vector" viewBox="0 0 {width} {row_h * 4}" role="img" aria-label="score vector">{"".join(parts)}</svg>'
