"""Carrying out what recovery (commitlog.py) decided: a torn tail cut, a lost record restored, HEAD rewritten, an old store
upgraded. Run at open (`recover`) and under the commit lock before every commit (`recover_locked`).
"""
from __future__ import annotations

import os

from . import commitlog, events, lostrecords, manifest
from .core import StoreCore, abandoned_entries
from .errors import StoreNeedsRepair
from .fsutil import flocked, remove_tree


def recover(core: StoreCore) -> None:
    """Everything recovery is sure of, at open: may finish an interrupted init, or undo one that never published."""
    for folder in (core.gens, core.pool, core.staging, core.pins):
        folder.mkdir(exist_ok=True)
    with flocked(core.lock), flocked(core.pins_lock):
        recover_locked(core, full=True)


def recover_locked(core: StoreCore, full: bool) -> None:
    """Apply the fixes recovery is sure of. Caller holds `lock` (and `pins.lock` exclusively when `full`).
    When the store needs repair, a commit (`full` False) refuses; opening it does not, so that verify
    and repair can run."""
    found = core.assess()
    if found.problems:
        if not full:
            raise StoreNeedsRepair(core.root, found.problems[0])
    else:
        apply_fixes(core, found.fixes)
    if full:
        for entry in abandoned_entries(core.staging):
            remove_tree(entry)
        for tmp in core.root.glob(".HEAD.tmp-*"):
            tmp.unlink(missing_ok=True)
        if not found.problems:
            _upgrade(core, core.assess())


def apply_fixes(core: StoreCore, fixes: list[commitlog.Fix]) -> None:
    """Carry out recovery fixes (caller holds `lock`), logging each in events.jsonl."""
    restored = False
    for fix in fixes:
        message = fix.message
        if fix.kind == "cut_tail":
            core.cut_torn_tail()
        elif fix.kind == "record":
            message, restored = _restore_record(core, fix.generation), True
        elif fix.kind == "head":
            core.write_head(fix.generation)
        events.append(core.root, "recovered", fix=fix.kind, generation=fix.generation, message=message)
        core.recovered.append(message)
    if restored:
        apply_fixes(core, [fix for fix in core.assess().fixes if fix.kind == "head"])


def _restore_record(core: StoreCore, generation: int) -> str:
    """A generation above the log without a record: complete, its record is appended; else quarantined."""
    if lostrecords.complete(core, generation):
        original = lostrecords.append_record(core, generation)
        how = "from its MANIFEST.record" if original else "rebuilt from its MANIFEST"
        return (f"generation {generation} was complete but had no record in {core.log} (a commit died before "
                f"appending it, or the line was lost): its record was restored {how}")
    folder = core.quarantine()
    os.rename(core.gen_path(generation), folder / str(generation))
    kept = core.manifests / str(generation)
    if os.path.lexists(kept):
        os.rename(kept, folder / f"{generation}.{manifest.NAME}")
    return (f"generation {generation} had no record in {core.log} and is incomplete (no MANIFEST, or files "
            f"not matching it): moved to {folder}")


def _upgrade(core: StoreCore, found: commitlog.Assessment) -> None:
    """A store written before manifests: compute each published generation's MANIFEST once, from the
    files as they are now, and record the hashes in events.jsonl (the anchor of those manifests)."""
    hashes: dict[str, str] = {}
    cache: dict[tuple[int, int], list] = {}
    for commit in found.log.commits:
        tree = core.gen_path(commit.generation)
        if commit.manifest is None and commit.generation not in found.upgraded and tree.is_dir() \
                and not (tree / manifest.NAME).exists():
            built = manifest.tables_of(tree, cache)
            built.write()
            hashes[str(commit.generation)] = built.digest
            core.link_manifest(commit.generation)
    if hashes:
        events.append(core.root, "upgrade", manifests=hashes,
                      message=f"manifests computed for {len(hashes)} generation(s) written before manifests")
        core.recovered.append(f"upgraded: manifests computed for {len(hashes)} generation(s)")
