"""report.html: one self-contained page (inline SVG, CSS and JS; nothing fetched from a network)."""
from __future__ import annotations

import json
from html import escape
from pathlib import Path

from skilltree import charts
from skilltree.report_data import ReportData
from skilltree.vectors import DIMENSIONS

TEMPLATES = Path(__file__).with_name("templates")


def _slot(name: str) -> str:
    return f"<!--SLOT:{name}-->"


def _date(value) -> str:
    return f'<span class="nowrap">{value:%Y-%m-%d}</span>' if value else "–"


def _kpis(data: ReportData) -> str:
    tree = data.tree
    verified = sum(s.verified for s in tree.skills.values())
    items = [(len(tree.skills), "skills"), (len(tree.categories), "categories"),
             (f"{verified}/{len(tree.skills)}", "verified"), (sum(data.recent.values()), "uses, 30 days"),
             (len(data.attempts), "not verified"), (data.generation if data.generation is not None else "–", "generation")]
    return "".join(f'<div class="kpi"><b>{escape(str(v))}</b><span>{escape(k)}</span></div>' for v, k in items)


def _funnel(data: ReportData) -> str:
    rows = data.categories
    if not rows:
        return '<p class="muted empty">No categories yet.</p>'
    peak = max(max(r.proposed, r.selected, r.verified, r.used) for r in rows) or 1
    cells = []
    for r in sorted(rows, key=lambda r: (-r.proposed, -r.skills, r.name)):
        bars = "".join(f'<td class="num"><span class="fbar" style="width:{100 * v / peak:.0f}%"></span>{v}</td>'
                       for v in (r.proposed, r.selected, r.verified, r.used))
        failed = f'<span class="fail">{r.failed}</span>' if r.failed else "0"
        cells.append(f'<tr data-category="{escape(r.name)}"><td>{escape(r.name)}</td>{bars}<td class="num">{failed}</td>'
                     f'<td class="num">{r.recent}</td></tr>')
    note = ("" if data.runs else '<p class="muted small">No exploration runs found: proposed and selected count '
            'the plans of <code>ga explore</code> runs (pass <code>--runs DIR</code>).</p>')
    return (note + '<div class="scroll"><table class="sortable"><thead><tr><th>category</th><th class="num">proposed</th>'
            '<th class="num">selected</th><th class="num">verified</th><th class="num">used</th>'
            '<th class="num">not verified</th><th class="num">uses, 30 days</th></tr></thead><tbody>'
            + "".join(cells) + "</tbody></table></div>")


def _plan(data: ReportData) -> str:
    plan = data.plan
    if plan is None:
        return '<p class="muted empty">No plan yet: the last <code>ga explore</code> run\'s plan.json shows here.</p>'
    w = plan.weights
    blend = plan.blend if plan.demand else 0.0
    head = (f'<p class="small">run <code>{escape(data.plan_run)}</code> · {_date(plan.created)} · rule <b>{escape(plan.rule)}</b>'
            + (f" · ranking score = {1 - blend:.2f} × §6 score + {blend:.2f} × demand" if blend
               else " · ranking score = §6 score" + (" (no use in the demand window yet: demand is off)" if plan.rule == "demand" else ""))
            + " · weights " + ", ".join(f"{d} {getattr(w, d):.3f}" for d in DIMENSIONS)
            + f" · {len(plan.selected)} of {len(plan.candidates)} selected, {plan.categories_covered} categories</p>")
    legend = ('<p class="keys">' + "".join(f'<span class="key"><span class="swatch" style="background:{c}"></span>{d} (weight × value)</span>'
                                           for d, c in charts.DIMENSION_COLORS.items())
              + f'<span class="key"><span class="swatch" style="background:{charts.DEMAND}"></span>demand (blend × value)</span></p>')
    rows = []
    for line in data.plan_lines:
        item = line.item
        share = 1 - blend
        parts = [(d, share * getattr(w, d) * getattr(item.vector, d), charts.DIMENSION_COLORS[d]) for d in DIMENSIONS]
        if item.demand is not None:
            parts.append(("demand", blend * item.demand, charts.DEMAND))
        values = "".join(f'<td class="num">{getattr(item.vector, d):.1f}</td>' for d in DIMENSIONS)
        demand = f"{item.demand:.1f}" if item.demand is not None else "–"
        mark = '<span class="ok">✔</span>' if line.selected else ""
        rows.append(f'<tr class="{"sel" if line.selected else ""}"><td>{mark}</td><td>{escape(item.candidate.title)}</td>'
                    f'<td>{escape(item.category)}</td>{values}<td class="num">{demand}</td><td class="num">{item.score:.2f}</td>'
                    f'<td class="num">{item.rank_score:.2f}</td><td class="barcell">{charts.score_bar(parts)}</td>'
                    f'<td class="why">{escape(line.why)}</td></tr>')
    return (head + legend + '<div class="scroll"><table><thead><tr><th></th><th>candidate</th><th>category</th>'
            + "".join(f'<th class="num">{d}</th>' for d in DIMENSIONS)
            + '<th class="num">demand</th><th class="num">§6 score</th><th class="num">ranking score</th>'
              '<th>breakdown</th><th>why</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table></div>")


def _attempts(data: ReportData) -> str:
    if not data.attempts:
        return '<p class="muted empty">None: no exploration ended unverified, failed or unfinished.</p>'
    cards = []
    for a in data.attempts:
        where = f"run {a.run} · task {a.task}" if a.run else ""
        link = (f' · <a href="#" class="file" data-path="{escape(a.report)}">report</a>'
                if a.report and a.report in data.files else "")
        reasons = "".join(f"<li>{escape(r)}</li>" for r in a.reasons)
        cards.append(f'<article class="attempt"><header><b>{escape(a.title)}</b> <span class="badge">{escape(a.outcome)}</span></header>'
                     f'<p class="muted small">{escape(a.category)} / {escape(a.skill)} · {_date(a.when)} · {escape(where)}{link}</p>'
                     f'<ul class="reasons">{reasons}</ul></article>')
    return "".join(cards)


def _link(data: ReportData, path, label: str) -> str:
    if not path:
        return ""
    if path in data.files:
        return f'<a href="#" class="file" data-path="{escape(path)}" title="{escape(path)}">{escape(label)}</a>'
    return f'<span class="muted" title="{escape(path)}: not in this generation">{escape(label)}</span>'


def _skills(data: ReportData) -> str:
    skills = sorted(data.tree.skills.values(), key=lambda s: (-data.recent.get(s.id, 0), -data.usage.get(s.id, 0), s.id))
    if not skills:
        return '<p class="muted empty">No skills yet.</p>'
    rows = []
    for s in skills:
        links = " ".join(x for x in (_link(data, s.sop, "SOP"),
                                      *(_link(data, p, Path(p).name) for p in s.scripts),
                                      _link(data, s.report, "report")) if x)
        predicted = f"{s.predicted:.2f}" if s.predicted is not None else "–"
        rows.append(f'<tr data-category="{escape(s.category)}"><td>{escape(s.name)}</td><td>{escape(s.category)}</td>'
                    f'<td class="num" data-value="{data.recent.get(s.id, 0)}">{data.recent.get(s.id, 0)}</td>'
                    f'<td class="num" data-value="{data.usage.get(s.id, 0)}">{data.usage.get(s.id, 0)}</td>'
                    f'<td class="num" data-value="{s.predicted or 0}">{predicted}</td><td>{"yes" if s.verified else "no"}</td>'
                    f'<td class="nowrap">{_date(s.created)}</td><td class="links">{links}</td></tr>')
    return ('<div class="scroll tall"><table class="sortable" id="skill-table"><thead><tr><th>skill</th><th>category</th>'
            '<th class="num">uses, 30 days</th><th class="num">uses, all</th><th class="num">predicted</th><th>verified</th>'
            '<th>created</th><th>files</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table></div>")


def _weight_table(data: ReportData) -> str:
    rows = []
    for label, weights, record in data.weight_points:
        if record is None:
            why = "initial weights"
        else:
            listed = "".join(f"<li>{escape(a.skill)}: {a.rule}, {a.dimension} ×{a.factor} (predicted {a.predicted:.1f}, used {a.used})</li>"
                             for a in record.adjustments)
            counts = {r: sum(a.rule == r for a in record.adjustments) for r in ("over", "under")}
            why = (f'<details><summary>{counts["over"]} over (×0.9), {counts["under"]} under (×1.1)</summary>'
                   f'<ul class="reasons">{listed}</ul></details>')
        rows.append(f'<tr><td class="nowrap">{escape(label)}</td>' + "".join(f'<td class="num">{v:.3f}</td>' for v in weights.values())
                    + f"<td>{why}</td></tr>")
    return ('<div class="scroll"><table><thead><tr><th>when</th>' + "".join(f'<th class="num">{d}</th>' for d in DIMENSIONS)
            + '<th>why</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table></div>")


def _files_json(data: ReportData) -> str:
    """The embedded files as JSON that can never close its <script> element (no raw < > &)."""
    text = json.dumps(data.files, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(data: ReportData) -> str:
    page = (TEMPLATES / "report.html").read_text(encoding="utf-8")
    peak = max(data.recent.values(), default=0)
    slots = {
        "title": f"Skill tree — {data.generated:%Y-%m-%d}",
        "css": (TEMPLATES / "report.css").read_text(encoding="utf-8"),
        "js": (TEMPLATES / "report.js").read_text(encoding="utf-8"),
        "generated": f"{data.generated:%Y-%m-%d %H:%M} UTC",
        "kpis": _kpis(data),
        "coverage": charts.coverage_map(data),
        "coverage_keys": charts.use_legend(peak) if data.tree.skills or data.attempts else "",
        "funnel": _funnel(data),
        "scatter": charts.prediction_scatter(data),
        "plan": _plan(data),
        "attempts": _attempts(data),
        "skills": _skills(data),
        "timeline": charts.weekly_usage(data),
        "weights": charts.weight_lines(data),
        "weight_table": _weight_table(data),
        "files": _files_json(data),
    }
    for name, value in slots.items():
        page = page.replace(_slot(name), escape(value) if name in ("title", "generated") else value)
    return page
