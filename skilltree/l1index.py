"""The L1 pointer lines of explored skills, kept inside the L1 bound by folding a category into one line.

A new skill adds one line `- L3/<folder>/<id>.md: <title>` to L1/index.md. When the index would pass
its bound (lines or chars), the category with the most single lines is folded into one line
`- L3/<folder>/: <n> skill SOPs (<id>, <id>, ...)` (newest ids first, the list cut with "…" to fit),
and so on until it fits. When even all folded it would not fit, the index is left as it was: the
skill is still reachable from skilltree.json, which L1 always points to.
"""
from __future__ import annotations

import re
from typing import Optional

SKILL_LINE = re.compile(r"^- L3/(?P<folder>[^/\s]+)/(?P<id>[^/\s]+)\.md: ")
FOLD_LINE = re.compile(r"^- L3/(?P<folder>[^/\s]+)/: (?P<count>\d+) skill SOPs \((?P<ids>.*)\)$")
TITLE_CHARS = 70


def skill_line(folder: str, skill_id: str, title: str) -> str:
    title = " ".join(title.split())
    return f"- L3/{folder}/{skill_id}.md: {title[:TITLE_CHARS]}{'…' if len(title) > TITLE_CHARS else ''}"


def _fits(lines: list[str], max_lines: int, max_chars: int) -> bool:
    text = "\n".join(lines) + "\n"
    return len(lines) <= max_lines and len(text) <= max_chars


def _fold(lines: list[str], folder: str, budget: int) -> list[str]:
    """Replace the single lines (and an earlier fold line) of `folder` by one fold line, where the first was."""
    ids: list[str] = []
    count, at, kept = 0, None, []
    for line in lines:
        single, folded = SKILL_LINE.match(line), FOLD_LINE.match(line)
        if single and single["folder"] == folder:
            ids.insert(0, single["id"])  # newest (last added) first
            count += 1
        elif folded and folded["folder"] == folder:
            ids += [i.strip() for i in folded["ids"].rstrip("…").split(",") if i.strip()]
            count += int(folded["count"])
        else:
            kept.append(line)
            continue
        at = len(kept) if at is None else at
    head = f"- L3/{folder}/: {count} skill SOPs ("
    listed = ""
    for skill_id in ids:
        piece = (", " if listed else "") + skill_id
        if len(head) + len(listed) + len(piece) + 2 > budget:
            listed += "…"
            break
        listed += piece
    kept.insert(at if at is not None else len(kept), head + listed + ")")
    return kept


def add_skill_line(text: Optional[str], line: str, max_lines: int, max_chars: int) -> Optional[str]:
    """The index with `line` added (folding categories as needed), or None when it cannot fit."""
    lines = (text or "").rstrip("\n").split("\n") if (text or "").strip() else []
    lines.append(line)
    budget = max(60, max_chars // 4)
    while not _fits(lines, max_lines, max_chars):
        counts: dict[str, int] = {}
        for item in lines:
            match = SKILL_LINE.match(item)
            if match:
                counts[match["folder"]] = counts.get(match["folder"], 0) + 1
        if not counts:
            return None
        folder = max(sorted(counts), key=lambda name: counts[name])
        lines = _fold(lines, folder, budget)
    return "\n".join(lines) + "\n"
