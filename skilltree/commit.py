"""Changing skilltree.json through one atomic memory commit, re-applied on a concurrent change."""
from __future__ import annotations

from typing import Callable, Optional

from memory_shared import StoreHandle, TransactionHandle
from memory_shared.errors import CommitConflict
from skilltree.tree import TREE_FILE, SkillTree, parse

ATTEMPTS = 5


def commit_with_retry(store: StoreHandle, stage: Callable[[TransactionHandle], bool], *, message: str, author: str,
                      key: Optional[str] = None) -> Optional[TransactionHandle]:
    """Open a transaction on HEAD, let `stage(txn)` stage changes (False: nothing to do), commit.
    On CommitConflict `stage` runs again on the newer HEAD. Returns the committed transaction (its
    `generation`), or None when `stage` found nothing to do. With `key`, a commit made before with the same
    key is not made again: `stage` does not run and the transaction says `already_committed`."""
    for attempt in range(ATTEMPTS):
        txn = store.transaction(message=message, author=author, key=key)
        try:
            if not txn.already_committed and not stage(txn):
                txn.abort()
                return None
            txn.commit()
            return txn
        except CommitConflict:
            txn.abort()
            if attempt == ATTEMPTS - 1:
                raise
        except BaseException:
            txn.abort()
            raise
    return None


def commit_tree(store: StoreHandle, update: Callable[[SkillTree], Optional[SkillTree]], *, message: str, author: str,
                extra: Optional[Callable[[TransactionHandle], None]] = None) -> Optional[int]:
    """Read the tree at HEAD, apply `update` (None: nothing to do), write it, commit. When another
    commit changed skilltree.json meanwhile, `update` runs again on the newer tree, so nobody's
    change is lost. `extra(txn)` may stage more files in the same commit. Returns the generation."""

    def stage(txn: TransactionHandle) -> bool:
        tree = parse(txn.read(TREE_FILE) or "", f"{TREE_FILE} (generation {txn.base})")
        new = update(tree)
        if new is None:
            return False
        txn.write(TREE_FILE, new.to_json())
        if extra is not None:
            extra(txn)
        return True

    done = commit_with_retry(store, stage, message=message, author=author)
    return None if done is None else done.generation
