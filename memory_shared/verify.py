"""`MemoryStore.verify()`: the log, HEAD and every generation checked, contents against their manifests.

Each problem is one line. A file changed in place is named once per inode, with every generation that
shares it through hard links (they all changed with it).
"""
from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import Optional

from . import manifest
from .commitlog import Commit
from .core import StoreCore, abandoned_entries
from .fsutil import flocked_readonly


def verify(core: StoreCore, quick: bool = False) -> list[str]:
    """Read-only: the store's files are not changed, nor created (its locks are taken shared, opened read-only)."""
    with flocked_readonly(core.lock):
        return verify_locked(core, quick, pins_lock=True)


def verify_locked(core: StoreCore, quick: bool = False, pins_lock: bool = False) -> list[str]:
    """`verify` for a caller holding `lock` (and `pins.lock` too unless `pins_lock`)."""
    found = core.assess(full=True)
    problems = list(found.problems)
    problems += [f"{fix.message.split('; ')[0]} (fixed on the next open or commit)" for fix in found.fixes]
    problems += _verify_log_end(core)
    commits = {c.generation: c for c in found.log.commits}
    published = sorted(g for g in found.dirs if g <= found.head)  # whatever events.jsonl says
    if quick:
        published = published[-1:]
    damage = content_damage(core, published, commits, found.upgraded, dropped=found.dropped)
    problems += [line for line, _ in damage]
    problems += _verify_trees(core, published, commits, found.dropped)
    for generation in published:
        if not any(f"generation {generation} " in line or f"generations {generation}," in line
                   for line, _ in damage):
            stale = core.stat_check(generation)
            if stale:
                problems.append(f"generation {generation}: {stale[0]} no longer has the inode, size or mtime "
                                "recorded at publication, so pins refuse it (`ga memory repair` refreshes it)")
    with flocked_readonly(core.pins_lock, shared=False) if pins_lock else nullcontext():
        problems += [f"leftover staging {p} (reopen the store to remove it)"  # (pins.lock held back
                     for p in abandoned_entries(core.staging)]             # new staging dirs)
    problems += [f"leftover HEAD temp file {p}" for p in core.root.glob(".HEAD.tmp-*")]
    return problems


def _verify_log_end(core: StoreCore) -> list[str]:
    log = core.log
    if log.exists() and log.stat().st_size:
        with open(log, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                return [f"{log} ends with a torn line"]
    return []


class Damage:
    """One changed inode (or one missing folder entry): where it appears and what it should hold."""

    def __init__(self, key: tuple[int, int], expected: list) -> None:
        self.key = key
        self.expected = expected               # [sha256, size] from the manifest
        self.places: list[tuple[int, str]] = []  # (generation, path) sharing the inode

    @property
    def generations(self) -> list[int]:
        return sorted({g for g, _ in self.places})


def content_damage(core: StoreCore, generations: list[int], commits: dict[int, Commit],
                   upgraded: dict[int, str], cache: Optional[dict] = None,
                   dropped: frozenset | set = frozenset()) -> list[tuple[str, Optional[Damage]]]:
    """Every mismatch between generations and their manifests: (one line, the Damage to restore or None)."""
    cache = {} if cache is None else cache
    lines: list[tuple[str, Optional[Damage]]] = []
    damaged: dict[tuple[int, int], Damage] = {}
    absent: list[tuple[int, str, list]] = []  # (generation, path, [sha256, size]) its manifest lists
    held: set[tuple] = set()  # [sha256, size] of every file that matches its manifest: a source to restore from
    for generation in generations:
        tree = core.gen_path(generation)
        try:
            data = (tree / manifest.NAME).read_bytes()
        except FileNotFoundError:
            lines.append((f"generation {generation} has no {manifest.NAME}", None))
            continue
        commit = commits.get(generation)
        recorded = commit.manifest if commit is not None and commit.manifest else upgraded.get(generation)
        if recorded is not None and manifest.digest(data) != recorded:
            lines.append((f"{tree / manifest.NAME} does not match the hash in its record (it was edited)", None))
            continue
        folders: list[str] = []
        entries = manifest.flatten(tree, data, folders)
        lines += [(f"generation {generation}: {problem}", None) for problem in folders]
        present = manifest.walk(tree)
        absent += [(generation, rel, entries[rel]) for rel in sorted(entries.keys() - present.keys())]
        for rel in sorted(present.keys() - entries.keys()):
            lines.append((f"generation {generation} has {rel}, which its manifest does not list", None))
        for rel in sorted(entries.keys() & present.keys()):
            st = present[rel]
            key = (st.st_dev, st.st_ino)
            if key not in cache:
                cache[key] = manifest.hash_file(os.path.join(tree, rel))
            if cache[key] != entries[rel]:
                damage = damaged.setdefault(key, Damage(key, entries[rel]))
                damage.places.append((generation, rel))
            else:
                held.add(tuple(cache[key]))
    lines += _absent_lines(core, absent, held, dropped)
    for damage in damaged.values():
        paths = sorted({rel for _, rel in damage.places})
        shared = damage.generations
        lines.append((f"{' and '.join(paths)} changed in place (its sha256 no longer matches the manifest); "
                      f"generation{'s' if len(shared) > 1 else ''} {', '.join(map(str, shared))} "
                      f"share{'' if len(shared) > 1 else 's'} it", damage))
    return lines


def _absent_lines(core: StoreCore, absent: list[tuple[int, str, list]], held: set[tuple],
                  dropped: frozenset | set) -> list[tuple[str, Optional[Damage]]]:
    """Files a manifest lists that are not there. One whose content another file in the store still holds is
    restorable (a Damage, one per folder entry generations share), whatever events.jsonl says; only one whose
    content is nowhere may be excused by a `dropped` event (repair took it out because it could not restore it)."""
    lines: list[tuple[str, Optional[Damage]]] = []
    entries: dict[str, Damage] = {}
    for generation, rel, expected in absent:
        line = f"generation {generation} lacks {rel}, which its manifest lists"
        folder = os.path.realpath(core.gen_path(generation) / os.path.dirname(rel))
        if tuple(expected) in held and os.path.isdir(folder):
            damage = entries.setdefault(os.path.join(folder, os.path.basename(rel)), Damage((-1, -1), expected))
            damage.places.append((generation, rel))
            lines.append((f"{line} (its content is elsewhere in the store)", damage))
        elif (generation, rel) not in dropped:
            lines.append((line, None))
    return lines


def _verify_trees(core: StoreCore, generations: list[int], commits: dict[int, Commit],
                  dropped: set[tuple[int, str]]) -> list[str]:
    """Modes, symlinks, and the log's paths against what actually changed between neighbours."""

    problems: list[str] = []
    previous: Optional[tuple[int, dict[str, int]]] = None
    for generation in generations:
        tree: Path = core.gen_path(generation)
        inodes = manifest.tree_inodes(tree, problems)
        commit = commits.get(generation)
        if commit is None:
            problems.append(f"generation {generation} has no log line")
        else:
            for rel in commit.paths:
                deleted, present = rel in commit.deleted, rel in inodes
                if deleted and present:
                    problems.append(f"generation {generation} still has {rel}, which its log line says was deleted")
                elif not deleted and not present and (generation, rel) not in dropped:
                    problems.append(f"generation {generation} lacks {rel}, which its log line says was written")
            if previous is not None and previous[0] == generation - 1:
                changed = {rel for rel in previous[1].keys() | inodes.keys()
                           if previous[1].get(rel) != inodes.get(rel)}
                for rel in sorted(changed - set(commit.paths)):
                    problems.append(f"generation {generation} changes {rel} but its log line does not say so")
        previous = (generation, inodes)
    return problems
