"""Changing skilltree.json through one atomic memory commit, re-applied on a concurrent change."""
from __future__ import annotations

from typing import Any, Callable, Optional

from memory_shared.errors import CommitConflict
from skilltree.tree import TREE_FILE, SkillTree, parse

ATTEMPTS = 5


def commit_with_retry(store: Any, stage: Callable[[Any], bool], *, message: str, author: str) -> Optional[int]:
    """Open a transaction on HEAD, let `stage(txn)` stage changes (False: nothing to do), commit.
    On CommitConflict `stage` runs again on the newer HEAD. Returns the new generation or None."""
    for attempt in range(ATTEMPTS):
        txn = store.transaction(message=message, author=author)
        try:
            if not stage(txn):
                txn.abort()
                return None
            return txn.commit()
        except CommitConflict:
            txn.abort()
            if attempt == ATTEMPTS - 1:
                raise
        except BaseException:
            txn.abort()
            raise
    return None


def commit_tree(store: Any, update: Callable[[SkillTree], Optional[SkillTree]], *, message: str, author: str,
                extra: Optional[Callable[[Any], None]] = None) -> Optional[int]:
    """Read the tree at HEAD, apply `update` (None: nothing to do), write it, commit. When another
    commit changed skilltree.json meanwhile, `update` runs again on the newer tree, so nobody's
    change is lost. `extra(txn)` may stage more files in the same commit. Returns the generation."""

    def stage(txn: Any) -> bool:
        tree = parse(txn.read(TREE_FILE) or "", f"{TREE_FILE} (generation {txn.base})")
        new = update(tree)
        if new is None:
            return False
        txn.write(TREE_FILE, new.to_json())
        if extra is not None:
            extra(txn)
        return True

    return commit_with_retry(store, stage, message=message, author=author)
