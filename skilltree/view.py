"""Terminal views for `ga skills`: the tree (rich), its JSON, the feedback verdicts, the weights."""
from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from skilltree.operations import FeedbackRun, TreeView
from skilltree.tree import SkillTree
from skilltree.vectors import DIMENSIONS


def rich_tree(view: TreeView) -> Tree:
    tree, used = view.tree, view.usage
    root = Tree(f"[bold]skills[/bold]  {len(tree.skills)} in {len(tree.categories)} categories · "
                f"generation {view.generation} · {sum(used.values())} uses")
    for name in sorted(tree.categories):
        skills = sorted(tree.skills_in(name), key=lambda s: (-used.get(s.id, 0), s.id))
        branch = root.add(f"[bold cyan]{name}[/bold cyan] ({len(skills)} skills, "
                          f"{sum(used.get(s.id, 0) for s in skills)} uses)")
        for skill in skills:
            mark = "[green]✔[/green]" if skill.verified else "[dim]·[/dim]"
            predicted = f" · predicted {skill.predicted:.1f}" if skill.predicted is not None else ""
            source = view.provenance.get(skill.id)
            origin = f"\n  [dim]{escape(source)}[/dim]" if source else ""
            branch.add(f"{mark} {escape(skill.name)} [dim]({skill.id})[/dim] · {used.get(skill.id, 0)} uses{predicted}"
                       f"{origin}", highlight=False)
    return root


def tree_json(view: TreeView) -> dict[str, object]:
    data = view.tree.model_dump(mode="json")
    data["generation"] = view.generation
    data["usage"] = view.usage
    data["provenance"] = view.provenance
    return data


def weights_table(tree: SkillTree) -> Table:
    table = Table(title="weight history", title_justify="left")
    table.add_column("when")
    for dim in DIMENSIONS:
        table.add_column(dim, justify="right")
    table.add_column("why", overflow="fold")
    history = tree.weight_history
    first = history[0].before if history else tree.weights
    table.add_row("initial", *(f"{v:.3f}" for v in first.values()), "")
    for record in history:
        why = "; ".join(f"{a.skill}: {a.rule}, {a.dimension} x{a.factor}" for a in record.adjustments)
        table.add_row(f"{record.time:%Y-%m-%d %H:%M}", *(f"{v:.3f}" for v in record.after.values()), why)
    return table


def feedback_table(run: FeedbackRun) -> Table:
    table = Table(title="skills judged (30 days after creation)", title_justify="left")
    for column in ("skill", "predicted", "used in 30 days", "dominant", "rule", "factor"):
        table.add_column(column, justify="right" if column in ("predicted", "used in 30 days", "factor") else "left",
                         overflow="fold")
    for skill, verdict in (run.outcome.judged if run.outcome else []):
        dominant = skill.score_vector.dominant() if skill.score_vector else "-"
        factor = {"over": "x0.9", "under": "x1.1"}.get(verdict.rule or "", "-")
        table.add_row(skill.id, f"{skill.predicted:.2f}" if skill.predicted is not None else "-", str(verdict.used),
                      dominant, verdict.rule or "none", factor)
    return table


def feedback_json(run: FeedbackRun) -> dict[str, object]:
    outcome = run.outcome
    return {"generation": run.generation,
            "judged": [{"skill": s.id, **v.model_dump(mode="json")} for s, v in (outcome.judged if outcome else [])],
            "weights": outcome.tree.weights.model_dump() if outcome else None,
            "history": [r.model_dump(mode="json") for r in outcome.tree.weight_history] if outcome else []}
