"""report.md: the same facts as the HTML report, as text and tables.

Names, titles, reasons and paths come from what exploration tasks wrote: each is escaped (`_cell`) so that no
image, link or HTML of theirs renders in a Markdown viewer, and no table cell is closed.
"""
from __future__ import annotations

import re

from skilltree.report_data import ReportData
from skilltree.vectors import DIMENSIONS

MARKUP = re.compile(r"([\\\[\]<>|])")  # what makes a link, an image or HTML, or ends a table cell


def _cell(text: object) -> str:
    """Task-written text as one line of Markdown text that makes no link, image or HTML and closes no table cell."""
    return MARKUP.sub(r"\\\1", " ".join(str(text).split()))


def _date(value) -> str:
    return f"{value:%Y-%m-%d}" if value else "-"


def render_markdown(data: ReportData) -> str:
    sections = (_summary, _coverage, _funnel, _predicted_against_uses, _last_plan, _not_verified, _skills,
                _uses_per_week, _weight_history)
    return "\n".join(line for section in sections for line in section(data)) + "\n"


def _summary(data: ReportData) -> list[str]:
    tree = data.tree
    verified = sum(s.verified for s in tree.skills.values())
    return [f"# Skill tree report — {data.generated:%Y-%m-%d %H:%M} UTC", "",
            f"{len(tree.skills)} skills ({verified} verified) in {len(tree.categories)} categories; "
            f"{data.total_uses} uses in all, {sum(data.recent.values())} in the last 30 days; "
            f"{len(data.attempts)} explorations not verified; memory generation "
            f"{data.generation if data.generation is not None else '-'}.", ""]


def _coverage(data: ReportData) -> list[str]:
    out = ["## Coverage", "", "Skills per category (the map's areas), their uses in the last 30 days (its colours) and "
           "the explorations that did not become a verified skill (its hatched cells).", ""]
    if not data.categories:
        return out + ["No skills yet."]
    out += ["| category | skills | verified | uses, 30 days | uses, all | not verified | skills (most used first) |",
            "|---|---:|---:|---:|---:|---:|---|"]
    for row in data.categories:
        names = sorted(data.tree.skills_in(row.name), key=lambda s: _most_used_first(data, s.id))
        listed = ", ".join(f"{s.id} ({data.recent.get(s.id, 0)})" for s in names[:12]) + (" …" if len(names) > 12 else "")
        out.append(f"| {_cell(row.name)} | {row.skills} | {row.verified} | {row.recent} | {row.uses} | {row.failed} | "
                   f"{_cell(listed or '-')} |")
    return out


def _most_used_first(data: ReportData, skill_id: str) -> tuple[int, int, str]:
    return -data.recent.get(skill_id, 0), -data.usage.get(skill_id, 0), skill_id


def _funnel(data: ReportData) -> list[str]:
    out = ["", "## Funnel per category", ""]
    if not data.categories:
        return out + ["No categories yet."]
    if not data.runs:
        out += ["No exploration runs found: proposed and selected count the plans of `ga explore` runs.", ""]
    out += ["| category | proposed | selected | verified | used | not verified |", "|---|---:|---:|---:|---:|---:|"]
    for row in sorted(data.categories, key=lambda r: (-r.proposed, -r.skills, r.name)):
        out.append(f"| {_cell(row.name)} | {row.proposed} | {row.selected} | {row.verified} | {row.used} | {row.failed} |")
    return out


def _predicted_against_uses(data: ReportData) -> list[str]:
    out = ["", "## Predicted score against uses in the first 30 days", "",
           "The 30-day rule: predicted > 8 and used < 3 times → the dominant dimension's weight ×0.9 (over); "
           "predicted < 5 and used > 5 times → ×1.1 (under).", ""]
    if not data.judged:
        return out + ["No skill has a predicted score yet."]
    out += ["| skill | predicted | uses, first 30 days | 30 days over | rule zone |", "|---|---:|---:|---|---|"]
    for item in sorted(data.judged, key=lambda j: (-(j.skill.predicted or 0), j.skill.id)):
        zone = {"over": "over (×0.9)", "under": "under (×1.1)"}.get(item.zone or "", "-")
        out.append(f"| {_cell(item.skill.id)} | {item.skill.predicted:.2f} | {item.uses} | "
                   f"{'yes' if item.complete else 'no'} | {zone} |")
    return out


def _last_plan(data: ReportData) -> list[str]:
    out = ["", "## The last plan", ""]
    plan = data.plan
    if plan is None:
        return out + ["No plan yet."]
    blend = plan.blend if plan.demand else 0.0
    formula = (f"ranking score = {1 - blend:.2f} × §6 score + {blend:.2f} × demand" if blend else "ranking score = §6 score"
               + (" (no use in the demand window yet: demand is off)" if plan.rule == "demand" else ""))
    out += [f"Run {data.plan_run}, {_date(plan.created)}, rule {plan.rule}: {formula}; weights "
            + ", ".join(f"{d} {getattr(plan.weights, d):.3f}" for d in DIMENSIONS)
            + f"; {len(plan.selected)} of {len(plan.candidates)} selected covering {plan.categories_covered} categories.", "",
            "| | candidate | category | " + " | ".join(DIMENSIONS) + " | demand | §6 score | ranking score | why |",
            "|---|---|---|" + "---:|" * 7 + "---|"]
    for line in data.plan_lines:
        item = line.item
        values = " | ".join(f"{getattr(item.vector, d):.1f}" for d in DIMENSIONS)
        demand = f"{item.demand:.1f}" if item.demand is not None else "-"
        out.append(f"| {'✔' if line.selected else ''} | {_cell(item.candidate.title)} | {_cell(item.category)} | {values} | "
                   f"{demand} | {item.score:.2f} | {item.rank_score:.2f} | {_cell(line.why)} |")
    if plan.demand:
        out += ["", "Demand per category when planned:", "", "| category | uses in window | exposure (skill-months) | rate | demand |",
                "|---|---:|---:|---:|---:|"]
        for name, row in plan.demand.items():
            rate = f"{row.rate:.2f}" if row.rate is not None else "untried"
            out.append(f"| {_cell(name)} | {row.uses} | {row.exposure:.2f} | {rate} | {row.demand:.2f} |")
    return out


def _not_verified(data: ReportData) -> list[str]:
    out = ["", "## Explorations that did not become a verified skill", ""]
    if not data.attempts:
        out.append("None yet.")
    for a in data.attempts:
        where = f", run {a.run} task {a.task}" if a.run else ""
        report = f", report {a.report}" if a.report else ""
        out.append(f"- **{_cell(a.title)}** ({_cell(a.category)} / {_cell(a.skill)}) — {_cell(a.outcome)}, "
                   f"{_date(a.when)}{_cell(where)}{_cell(report)}: " + _cell("; ".join(a.reasons)))
    return out


def _skills(data: ReportData) -> list[str]:
    out = ["", "## Skills", ""]
    if not data.tree.skills:
        return out + ["No skills yet."]
    out += ["| skill | category | uses, 30 days | uses, all | predicted | verified | created | SOP | scripts | report |",
            "|---|---|---:|---:|---:|---|---|---|---|---|"]
    for s in sorted(data.tree.skills.values(), key=lambda s: _most_used_first(data, s.id)):
        predicted = f"{s.predicted:.2f}" if s.predicted is not None else "-"
        out.append(f"| {_cell(s.name)} | {_cell(s.category)} | {data.recent.get(s.id, 0)} | {data.usage.get(s.id, 0)} | "
                   f"{predicted} | {'yes' if s.verified else 'no'} | {_date(s.created)} | {_cell(s.sop or '-')} | "
                   f"{_cell(', '.join(s.scripts) or '-')} | {_cell(s.report or '-')} |")
    return out


def _uses_per_week(data: ReportData) -> list[str]:
    out = ["", "## Uses per week", "", "| week of | uses | by category |", "|---|---:|---|"]
    for week, bucket in zip(data.week_starts, data.timeline, strict=True):
        parts = ", ".join(f"{name} {n}" for name, n in bucket.items() if n)
        out.append(f"| {week:%Y-%m-%d} | {sum(bucket.values())} | {_cell(parts or '-')} |")
    return out


def _weight_history(data: ReportData) -> list[str]:
    out = ["", "## Weight history", "", "| when | " + " | ".join(DIMENSIONS) + " | why |", "|---|" + "---:|" * 4 + "---|"]
    for label, weights, record in data.weight_points:
        why = "; ".join(f"{a.skill}: {a.rule} ({a.dimension} x{a.factor})" for a in record.adjustments) if record else "initial"
        out.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in weights.values()) + f" | {_cell(why)} |")
    return out
