"""The skill tree of a memory generation: load it, stage it in a transaction. Its file format (the models,
`parse`) ships with the memory tier, whose gate checks it: memory_shared/skilltree_format.py."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memory_shared.skilltree_format import (
    TREE_FILE,
    Adjustment,
    Category,
    Feedback,
    Skill,
    SkillTree,
    SkillTreeError,
    TreeIndex,
    WeightRecord,
    parse,
    slugify,
    utc,
)

if TYPE_CHECKING:
    from memory_shared.handle import TransactionHandle

__all__ = ["TREE_FILE", "Adjustment", "Category", "Feedback", "Skill", "SkillTree", "SkillTreeError", "TreeIndex",
           "WeightRecord", "load", "parse", "save", "slugify", "utc"]


def load(snapshot_path: Path | str) -> SkillTree:
    """The tree of one generation (a snapshot directory); an empty tree when it has none yet."""
    path = Path(snapshot_path) / TREE_FILE
    if not path.is_file():
        return SkillTree()
    return parse(path.read_text(encoding="utf-8"), str(path))


def save(txn: TransactionHandle, tree: SkillTree) -> None:
    """Stage the tree in an open store transaction; it lands with the transaction's commit."""
    txn.write(TREE_FILE, tree.to_json())
