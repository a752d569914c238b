"""A compact text view of the tree for the planner prompt, within a character budget."""
from __future__ import annotations

from typing import Mapping, Optional

from skilltree.tree import SkillTree


def _grouped(tree: SkillTree, usage: Mapping[str, int]) -> dict[str, list[str]]:
    """Category -> its skills as `id xUSES`, most used first."""
    groups: dict[str, list[tuple[int, str]]] = {name: [] for name in sorted(tree.categories)}
    for skill in tree.skills.values():
        groups[skill.category].append((-usage.get(skill.id, 0), skill.id))
    return {name: [f"{sid} x{-neg}" for neg, sid in sorted(items)] for name, items in groups.items()}


def _category_lines(groups: dict[str, list[str]], cap: int) -> list[str]:
    lines = []
    for name, skills in groups.items():
        shown = skills[:cap] + ([f"+{len(skills) - cap} more"] if len(skills) > cap else [])
        lines.append(f"- {name} ({len(skills)}): {', '.join(shown) if shown else '(empty)'}")
    return lines


def summary_for_prompt(tree: SkillTree, max_chars: int = 2000, usage: Optional[Mapping[str, int]] = None) -> str:
    """Categories with their skill counts and most-used skills (`id xUSES`), never over max_chars.
    Lists are shortened first (most-used kept), then whole categories are left out."""
    usage = usage or {}
    n_cat = len(tree.categories)
    mean = len(tree.skills) / n_cat if n_cat else 0.0
    head = (f"Skill tree: {len(tree.skills)} skills in {n_cat} categories (mean {mean:.1f} per category); "
            f"weights " + ", ".join(f"{k} {v:.2f}" for k, v in tree.weights.items()) + ".")
    if not n_cat:
        return (head + "\n(no categories yet)")[:max_chars]
    groups = _grouped(tree, usage)
    largest = max(len(skills) for skills in groups.values())
    low, high = 0, largest  # the largest per-category cap that fits
    while low < high:
        mid = (low + high + 1) // 2
        if len("\n".join([head, *_category_lines(groups, mid)])) <= max_chars:
            low = mid
        else:
            high = mid - 1
    lines = [head]
    body = _category_lines(groups, low)
    for index, line in enumerate(body):
        rest = len(body) - index
        tail = f"... and {rest - 1} more categories" if rest > 1 else ""
        if len("\n".join(lines + [line, tail])) > max_chars:
            lines.append(f"... and {rest} more categories")
            break
        lines.append(line)
    return "\n".join(lines)[:max_chars]
