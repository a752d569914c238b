"""report.html: one self-contained page (inline SVG, CSS and JS; nothing fetched from a network)."""
from __future__ import annotations

from html import escape
from pathlib import Path

from skilltree import charts
from skilltree.report_data import ReportData

TEMPLATES = Path(__file__).with_name("templates")


def _slot(name: str) -> str:
    return f"<!--SLOT:{name}-->"


def _kpis(data: ReportData) -> str:
    tree = data.tree
    verified = sum(s.verified for s in tree.skills.values())
    items = [(len(tree.skills), "skills"), (len(tree.categories), "categories"),
             (f"{verified}/{len(tree.skills)}", "verified"), (data.total_uses, "uses"),
             (len(data.reports), "recent reports"), (data.generation if data.generation is not None else "-", "generation")]
    return "".join(f'<div class="kpi"><b>{escape(str(v))}</b><span>{escape(k)}</span></div>' for v, k in items)


def _legend(data: ReportData) -> str:
    colors = charts.category_colors(list(data.tree.categories))
    return "".join(f'<button class="chip" data-category="{escape(n)}" style="--c:{c}">{escape(n)}</button>'
                   for n, c in colors.items())


def _top_table(data: ReportData) -> str:
    top = data.top_skills
    if not top:
        return '<p class="muted">No skills yet.</p>'
    peak = max((data.usage.get(s.id, 0) for s in top), default=0) or 1
    colors = charts.category_colors(list(data.tree.categories))
    rows = []
    for skill in top:
        uses = data.usage.get(skill.id, 0)
        predicted = f"{skill.predicted:.2f}" if skill.predicted is not None else "–"
        rows.append(f'<tr data-category="{escape(skill.category)}"><td title="{escape(skill.description)}">{escape(skill.name)}</td>'
                    f'<td><span class="dot" style="--c:{colors[skill.category]}"></span>{escape(skill.category)}</td>'
                    f'<td class="num" data-value="{uses}"><span class="meter" style="width:{100 * uses / peak:.0f}%"></span>{uses}</td>'
                    f'<td class="num" data-value="{skill.predicted or 0}">{predicted}</td>'
                    f'<td>{"✔" if skill.verified else "–"}</td></tr>')
    return ('<table class="sortable"><thead><tr><th>skill</th><th>category</th><th class="num">uses</th>'
            '<th class="num">predicted</th><th>verified</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>")


def _weight_table(data: ReportData) -> str:
    rows = []
    for label, weights, record in data.weight_points:
        why = "; ".join(f"{a.skill}: {a.rule}, {a.dimension} ×{a.factor} (predicted {a.predicted:.1f}, used {a.used})"
                        for a in record.adjustments) if record else "initial weights"
        rows.append(f"<tr><td>{escape(label)}</td>" + "".join(f'<td class="num">{v:.3f}</td>' for v in weights.values())
                    + f"<td>{escape(why)}</td></tr>")
    return ('<table><thead><tr><th>when</th><th class="num">breadth</th><th class="num">depth</th><th class="num">utility</th>'
            '<th class="num">innovation</th><th>why</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>")


def _report_cards(data: ReportData) -> str:
    if not data.reports:
        return '<p class="muted">No exploration reports yet.</p>'
    cards = []
    for r in data.reports:
        badge = '<span class="badge ok">verified</span>' if r.verified else '<span class="badge">unverified</span>'
        predicted = f"predicted {r.predicted:.2f} · " if r.predicted is not None else ""
        when = f"{r.created:%Y-%m-%d}" if r.created else ""
        cards.append(f'<article class="card" data-category="{escape(r.category)}"><header><h3>{escape(r.title)}</h3>{badge}</header>'
                     f'<p class="muted">{escape(r.category)} / {escape(r.skill)} · {escape(when)}</p>'
                     f"{charts.vector_bars(r.score_vector)}"
                     f'<p class="muted small">{predicted}{r.tokens:,} tokens · {len(r.artifacts)} artifacts</p></article>')
    return "".join(cards)


def render_html(data: ReportData) -> str:
    page = (TEMPLATES / "report.html").read_text(encoding="utf-8")
    slots = {
        "title": f"Skill tree — {data.generated:%Y-%m-%d}",
        "css": (TEMPLATES / "report.css").read_text(encoding="utf-8"),
        "js": (TEMPLATES / "report.js").read_text(encoding="utf-8"),
        "generated": f"{data.generated:%Y-%m-%d %H:%M} UTC",
        "kpis": _kpis(data),
        "legend": _legend(data),
        "tree": charts.radial_tree(data),
        "categories": charts.category_bars(data.categories),
        "timeline": charts.weekly_usage(data),
        "weights": charts.weight_lines(data),
        "weight_table": _weight_table(data),
        "top": _top_table(data),
        "reports": _report_cards(data),
    }
    for name, value in slots.items():
        page = page.replace(_slot(name), escape(value) if name in ("title", "generated") else value)
    return page
