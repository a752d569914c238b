"""Links of a generation's folders that no longer lead to the pooled folder its manifests name.

A folder line `"name/"<TAB>sha256<TAB>size` names the pooled folder by the hash of its manifest (dirs/<id>.m).
When the link `name` leads elsewhere (swapped, removed, replaced by something else) and a pooled folder with
that hash is still in dirs/, `ga memory repair` points the link at it again (the old entry kept in
quarantine/); gc never removes a pooled folder a manifest still names (store.py `_sweep_pool`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from . import manifest
from .core import StoreCore
from .fsutil import atomic_symlink
from .manifest import Table
from .paths import POOL_LINK, pool_id


@dataclass
class Swapped:
    generation: int        # the first generation found reaching it
    rel: str               # the folder's path in that generation
    entry: str             # the physical path of the link
    wanted: str            # the pooled folder whose manifest hash the line names
    generations: set[int] = field(default_factory=set)  # every generation reaching it


def swapped_links(core: StoreCore, generations: list[int]) -> list[Swapped]:
    """Every folder link of the generations (each physical link once) not leading to its named folder.
    (A folder reached only through a swapped link is walked in the folder the line names.)"""
    pool = str(core.pool)
    index: Optional[dict[str, str]] = None
    seen: set[str] = set()
    found: dict[str, Swapped] = {}
    for generation in generations:
        tree = core.gen_path(generation)
        table = manifest.load_table(tree)
        stack = [("", str(tree), table)] if table is not None else []
        while stack:
            prefix, folder, table = stack.pop()
            for name, fields in table.rows():
                if not name.endswith("/"):
                    continue
                entry, sha = os.path.join(folder, name[:-1]), fields[0].decode()
                if entry in seen:
                    if entry in found:
                        found[entry].generations.add(generation)
                    continue
                seen.add(entry)
                target = _target(entry, pool)
                if target is None or manifest.folder_digest(target) != sha:
                    if index is None:
                        index = manifest.pool_index(core.pool)
                    wanted = index.get(sha)
                    if wanted is None:  # a folder table lost or edited, not a link: other checks name it
                        continue
                    target = wanted
                    found[entry] = Swapped(generation, prefix + name[:-1], entry, target, {generation})
                if target is not None:
                    try:
                        with open(target + manifest.FOLDER_NAME, "rb") as fh:
                            stack.append((prefix + name, target, Table.parse(fh.read())))
                    except OSError:
                        continue
    return list(found.values())


def _target(entry: str, pool: str) -> Optional[str]:
    try:
        found = pool_id(os.readlink(entry))
    except OSError:
        return None
    return None if found is None or not os.path.isdir(os.path.join(pool, found)) else os.path.join(pool, found)


def relink(swapped: Swapped, evidence: str) -> None:
    """Point the link at its named pooled folder again; the entry that was there is kept as `evidence`."""
    if os.path.islink(swapped.entry):
        os.link(swapped.entry, evidence, follow_symlinks=False)
    elif os.path.lexists(swapped.entry):
        os.rename(swapped.entry, evidence)
    atomic_symlink(POOL_LINK + os.path.basename(swapped.wanted), swapped.entry)
