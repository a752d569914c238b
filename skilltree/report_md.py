"""report.md: the same content as the HTML report, as tables."""
from __future__ import annotations

from skilltree.report_data import ReportData
from skilltree.vectors import DIMENSIONS


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(data: ReportData) -> str:
    tree = data.tree
    verified = sum(s.verified for s in tree.skills.values())
    out = [f"# Skill tree report — {data.generated:%Y-%m-%d %H:%M} UTC", "",
           f"{len(tree.skills)} skills ({verified} verified) in {len(tree.categories)} categories; "
           f"{data.total_uses} uses in all; memory generation {data.generation if data.generation is not None else '-'}.", ""]
    out += ["## Skills per category", "", "| category | skills | verified | uses | skills (most used first) |",
            "|---|---:|---:|---:|---|"]
    for row in data.categories:
        names = sorted(tree.skills_in(row.name), key=lambda s: (-data.usage.get(s.id, 0), s.id))
        listed = ", ".join(f"{s.id} ({data.usage.get(s.id, 0)})" for s in names[:12]) + (" …" if len(names) > 12 else "")
        out.append(f"| {_cell(row.name)} | {row.skills} | {row.verified} | {row.uses} | {_cell(listed)} |")
    out += ["", "## Top skills", "", "| skill | category | uses | predicted | verified |", "|---|---|---:|---:|---|"]
    for skill in data.top_skills:
        predicted = f"{skill.predicted:.2f}" if skill.predicted is not None else "-"
        out.append(f"| {_cell(skill.name)} | {_cell(skill.category)} | {data.usage.get(skill.id, 0)} | {predicted} | "
                   f"{'yes' if skill.verified else 'no'} |")
    out += ["", "## Usage per week", "", "| week of | uses | by category |", "|---|---:|---|"]
    for week, bucket in zip(data.week_starts, data.timeline):
        parts = ", ".join(f"{name} {n}" for name, n in bucket.items() if n)
        out.append(f"| {week:%Y-%m-%d} | {sum(bucket.values())} | {_cell(parts or '-')} |")
    out += ["", "## Weight history", "", "| when | " + " | ".join(DIMENSIONS) + " | why |", "|---|" + "---:|" * 4 + "---|"]
    for label, weights, record in data.weight_points:
        why = "; ".join(f"{a.skill}: {a.rule} ({a.dimension} x{a.factor})" for a in record.adjustments) if record else "initial"
        out.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in weights.values()) + f" | {_cell(why)} |")
    out += ["", "## Recent exploration reports", ""]
    if not data.reports:
        out.append("None yet.")
    else:
        out += ["| date | title | category / skill | " + " | ".join(d[:4] for d in DIMENSIONS) + " | predicted | verified | tokens |",
                "|---|---|---|" + "---:|" * 5 + "---|---:|"]
        for r in data.reports:
            vector = " | ".join(f"{v:.1f}" for v in r.score_vector.values()) if r.score_vector else " | ".join("-" * 4)
            predicted = f"{r.predicted:.2f}" if r.predicted is not None else "-"
            when = f"{r.created:%Y-%m-%d}" if r.created else "-"
            out.append(f"| {when} | {_cell(r.title)} | {_cell(r.category)} / {_cell(r.skill)} | {vector} | {predicted} | "
                       f"{'yes' if r.verified else 'no'} | {r.tokens} |")
    return "\n".join(out) + "\n"
