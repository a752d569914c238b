"""`ga memory repair [--dry-run]`: bring the store back to one that verifies, losing nothing.

In order, under both locks:
  - a log with garbage lines or a broken chain is rebuilt from the generations (chain.py); the old log and
    every line left out go to quarantine/;
  - entries of generations/ that are not generations go to quarantine/;
  - a torn last log line is cut (its bytes kept in quarantine/);
  - generation directories above the log: each next one with a complete tree (MANIFEST and contents agree)
    gets its lost record back (lostrecords.py); the rest go to quarantine/;
  - a generation directory that vanished is rebuilt from manifests/<n> with hard links to the same content
    found elsewhere in the store; if some content exists nowhere, an older one is recorded as lost (its
    record stays), HEAD's is left unsolved (restore it from a backup);
  - a folder link leading elsewhere than its manifest says is pointed back at the pooled folder in dirs/
    that the manifest names (relink.py);
  - a file changed in place is restored when its recorded content can be found (a file only appended to
    still starts with it; or another copy with the same sha256), the damaged inode kept in quarantine/;
  - stat records that no longer match unchanged content are refreshed; then HEAD is recomputed.
Every action is logged in events.jsonl. `dry_run` lists the same actions without doing them (and changes
nothing: it reads under shared locks).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Optional

from . import chain, events, fixes, lostrecords, manifest, relink
from .commitlog import Commit
from .core import StoreCore
from .fsutil import READ_ONLY, atomic_link, atomic_replace, flocked, flocked_readonly, fsync_dir, unique, write_new
from .paths import POOL_LINK
from .verify import Damage, content_damage


class _Plan:
    def __init__(self, core: StoreCore, dry_run: bool) -> None:
        self.core = core
        self.dry_run = dry_run
        self.done: list[str] = []
        self.unsolved: list[str] = []
        self._quarantine: Optional[Path] = None

    def act(self, line: str, action: Callable[[], object], event: str, **fields: object) -> None:
        self.done.append(line)
        if not self.dry_run:
            action()
            events.append(self.core.root, event, message=line, **fields)

    def quarantine(self) -> Path:
        if self._quarantine is None:
            self._quarantine = self.core.quarantine()
        return self._quarantine

    def move_aside(self, path: Path, line: str, **fields: object) -> None:
        self.act(line, lambda: os.rename(path, self.quarantine() / path.name), "quarantined", path=str(path),
                 **fields)


def repair(core: StoreCore, dry_run: bool = False) -> tuple[list[str], list[str]]:
    plan = _Plan(core, dry_run)
    lock = flocked_readonly if dry_run else flocked
    with lock(core.lock), lock(core.pins_lock):
        found = core.assess(full=True)
        cache: dict[tuple[int, int], list] = {}
        if found.log.bad or found.log.chain_problems:
            _rebuild_chain(plan, found, cache)
            if dry_run:
                plan.done.append("then check the rest of the store against the rebuilt log")
                return plan.done, plan.unsolved
            found = core.assess(full=True)
        for name in found.strays:
            plan.move_aside(core.gens / name, f"moved generations/{name} (not a generation) to quarantine/")
        if found.log.torn:
            plan.act(f"cut the torn last line of {core.log} (its bytes kept in quarantine/)",
                     core.cut_torn_tail, "cut_tail")
        last = found.head
        intact = True
        for generation in found.beyond or [g for g in sorted(found.dirs) if g > found.head]:
            tree = core.gen_path(generation)
            if intact and generation == last + 1 and lostrecords.complete(core, generation, cache):
                plan.act(f"rebuilt the lost log record of generation {generation} (from its {manifest.RECORD} "
                         f"when that proves itself, else from its MANIFEST)",
                         lambda g=generation: lostrecords.append_record(core, g), "record_rebuilt",
                         generation=generation)
                last = generation
            else:
                intact = False
                plan.move_aside(tree, f"moved generation {generation} (no record, not next to the log, or "
                                      "incomplete) to quarantine/", generation=generation)
        present = {g for g in found.dirs if g <= last}
        for generation in range(last + 1):
            if generation not in present and generation not in found.gone:
                _rebuild_or_give_up(plan, generation, last, found, cache)
        published = sorted(present)  # whatever events.jsonl says
        relinked = _relink(plan, published)
        commits = {c.generation: c for c in found.log.commits}
        regenerated = {g for g in published
                       if _regenerate_manifest(plan, g, commits.get(g), found.upgraded, cache)}
        published = [g for g in published if g not in regenerated]  # their files hash to the record
        damage = content_damage(core, published, commits, found.upgraded, cache, dropped=found.dropped)
        if dry_run:  # a relinked folder's damage is what relinking it mends: checked again after it
            damage = [(line, item) for line, item in damage if not relinked & _generations_named(line)]
        restored: set[int] = set()  # a missing file generations share is one Damage named once per generation
        for line, item in damage:
            if item is None:
                plan.unsolved.append(f"{line}: restore it from a backup")
            elif id(item) not in restored:
                restored.add(id(item))
                missing = not os.path.lexists(core.gen_path(item.places[0][0]) / item.places[0][1])
                (_link_back if missing else _restore)(plan, item, published, cache)
        damaged = {g for _, item in damage if item is not None for g in item.generations}
        for generation in published:
            if generation not in damaged and not [ln for ln, _ in damage if f"generation {generation} " in ln] \
                    and ((dry_run and generation in relinked) or core.stat_check(generation)):
                plan.act(f"refreshed the stat record of generation {generation} (its contents match its manifest)",
                         lambda g=generation: _refresh_stats(core, g), "stats_refreshed", generation=generation)
        if not dry_run and not plan.unsolved:
            after = core.assess(full=True)
            if after.problems:
                plan.unsolved += after.problems
            else:
                fixes.apply_fixes(core, after.fixes)
                plan.done += [f.message for f in after.fixes]
        elif dry_run and last >= 0 and found.head_text != f"{last}\n".encode():
            plan.done.append(f"set HEAD to generation {last}")
    return plan.done, plan.unsolved


def _generations_named(line: str) -> set[int]:
    """The generation numbers a problem line names ("generation 3 ...", "generations 2, 3 share it")."""
    return {int(n) for group in re.findall(r"\bgenerations? (\d+(?:(?:, | and )\d+)*)", line)
            for n in re.findall(r"\d+", group)}


def _rebuild_chain(plan: _Plan, found, cache: dict) -> None:
    """A log with garbage lines or a broken chain: rewritten from the generations (chain.py), the old one and
    every line left out kept in quarantine/."""
    core = plan.core
    rebuilt = chain.rebuild(core, found, cache)

    def rewrite() -> None:
        old = core.log.read_bytes()
        write_new(plan.quarantine() / "log.jsonl", old)
        atomic_replace(core.log, rebuilt.data)
        for generation in rebuilt.lost:
            events.append(core.root, "lost", generation=generation, message="its record rebuilt as a placeholder")
        for generation in rebuilt.rebuilt:
            core.link_manifest(generation)
    plan.act(f"rebuilt {core.log} from the generations, the old log kept in quarantine/: "
             + "; ".join(rebuilt.notes), rewrite, "log_rebuilt")


def _relink(plan: _Plan, published: list[int]) -> set[int]:
    """Folder links leading elsewhere than their manifests say, pointed back at the pooled folder (relink.py);
    the generations reaching a relinked link are returned."""
    touched: set[int] = set()
    for swapped in relink.swapped_links(plan.core, published):
        where = f"folder {swapped.rel} of generation {swapped.generation}"
        evidence = f"{swapped.generation}-{swapped.rel.replace('/', '__')}.entry"
        plan.act(f"pointed the link of {where} back at {swapped.wanted} (the folder its manifest names; the "
                 "entry found there kept in quarantine/)",
                 lambda s=swapped, e=evidence: relink.relink(s, str(plan.quarantine() / e)), "relinked",
                 path=swapped.entry)
        touched |= swapped.generations
    return touched


def _regenerate_manifest(plan: _Plan, generation: int, commit: Optional[Commit], upgraded: dict[int, str],
                         cache: dict) -> bool:
    """A MANIFEST lost or torn (it is not fsynced: a power cut can take it) or edited is rebuilt from the
    files when what they hash to is exactly what the record says the MANIFEST was."""
    core = plan.core
    tree = core.gen_path(generation)
    recorded = (commit.manifest if commit is not None else None) or upgraded.get(generation)
    if recorded is None:
        return False
    try:
        data = (tree / manifest.NAME).read_bytes()
        folders: list[str] = []
        if manifest.digest(data) == recorded:
            manifest.flatten(tree, data, folders)  # and its folders' manifests: lost or torn too?
            if not folders:
                return False
    except FileNotFoundError:
        pass
    built = manifest.tables_of(tree, cache)
    if built.digest != recorded:
        return False  # the files changed too: content_damage names them

    def rewrite() -> None:
        built.write()
        core.link_manifest(generation)
    plan.act(f"rebuilt the MANIFEST of generation {generation} from its files (they hash to its record)",
             rewrite, "manifest_rebuilt", generation=generation)
    return True


def _sources(core: StoreCore, generations: list[int], cache: dict) -> dict[str, Path]:
    """sha256 -> a file holding that content now (checked), over the given generations' manifests."""
    found: dict[str, Path] = {}
    for generation in generations:
        tree = core.gen_path(generation)
        for rel, expected in (manifest.load(tree) or {}).items():
            if expected[0] in found:
                continue
            path = tree / rel
            try:
                st = os.lstat(path)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if key not in cache:
                cache[key] = manifest.hash_file(str(path))
            if cache[key] == expected:
                found[expected[0]] = path
    return found


def _rebuild_or_give_up(plan: _Plan, generation: int, last: int, found, cache: dict) -> None:
    core = plan.core
    kept = core.manifests / str(generation)
    commit = found.log.commits[generation] if generation < len(found.log.commits) else None
    recorded = (commit.manifest if commit is not None else None) or found.upgraded.get(generation)
    try:
        data = kept.read_bytes()
    except FileNotFoundError:
        data = None
    if data is not None and (recorded is None or manifest.digest(data) == recorded):
        index = manifest.pool_index(core.pool)
        folders: list[str] = []
        entries = manifest.flatten(None, data, folders, by_hash=index)
        near = sorted((g for g in found.dirs if g <= last), key=lambda g: abs(g - generation))
        sources = _sources(core, near, cache)
        missing = sorted(rel for rel, (sha, _) in entries.items() if sha not in sources) + folders
        if not missing:
            plan.act(f"rebuilt generation {generation} from manifests/{generation} with the same content found "
                     "in other generations", lambda: _rebuild(core, generation, data, sources, index),
                     "generation_rebuilt", generation=generation)
            return
        why = f"{len(missing)} of its files ({missing[0]}{', ...' if len(missing) > 1 else ''}) exist nowhere else"
    else:
        why = f"manifests/{generation} is missing or does not match its record"
    if generation < last:
        def give_up() -> None:  # its kept manifest goes aside: an event excuses only what nothing can rebuild
            if data is not None:
                os.rename(kept, plan.quarantine() / f"manifest-{generation}")
        plan.act(f"generation {generation} cannot be rebuilt ({why}): recorded as lost; its log record stays"
                 + (f", manifests/{generation} moved to quarantine/" if data is not None else ""),
                 give_up, "lost", generation=generation)
    else:
        plan.unsolved.append(f"generation {generation} (HEAD) cannot be rebuilt ({why}); restore "
                             f"{core.gen_path(generation)} from a backup")


def _rebuild(core: StoreCore, generation: int, data: bytes, sources: dict[str, Path],
             index: dict[str, str]) -> None:
    """The root again: its files hard-linked from other generations, its folders linked to the pooled folders
    whose manifests have the hashes its MANIFEST names (a flat MANIFEST of the old layout: real folders)."""
    staging = core.staging / unique("rebuild-")
    staging.mkdir()
    stats = {}
    for rel, fields in manifest.Table.parse(data).rows():
        target = staging / rel.rstrip("/")
        if rel.endswith("/"):
            os.symlink(POOL_LINK + os.path.basename(index[fields[0].decode()]), target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(sources[fields[0].decode()], target, follow_symlinks=False)
        stats[rel] = manifest.stat_entry(os.lstat(target))
    os.link(core.manifests / str(generation), staging / manifest.NAME)
    write_new(staging / manifest.STAT, manifest.stat_bytes(staging, stats), READ_ONLY)
    os.sync()
    os.rename(staging, core.gen_path(generation))
    fsync_dir(core.gens)


def _restore(plan: _Plan, damage: Damage, published: list[int], cache: dict) -> None:
    core = plan.core
    generation, rel = damage.places[0]
    current = core.gen_path(generation) / rel
    sha, size = damage.expected
    text: Optional[bytes] = None
    how = ""
    try:
        data = current.read_bytes()
        if len(data) >= size and manifest.digest(data[:size]) == sha:
            text, how = data[:size], "it had been appended to: cut back to its recorded size"
    except OSError:
        pass
    if text is None:
        source = _sources(core, published, cache).get(sha)
        if source is not None:
            text, how = source.read_bytes(), f"copied from {source.relative_to(core.root)}"
    places = ", ".join(f"{g}/{r}" for g, r in damage.places)
    if text is None:
        gens = ", ".join(map(str, damage.generations))
        plan.act(f"moved {rel} out of generations {gens} to quarantine/: it changed in place and its recorded "
                 "content exists nowhere in the store (restore it from a backup if you have one)",
                 lambda: _drop(plan, damage), "dropped", path=rel, generations=damage.generations)
        return
    plan.act(f"restored {rel} in generations {', '.join(map(str, damage.generations))} ({how}); the changed "
             "file kept in quarantine/", lambda: _replace(plan, damage, text), "restored", path=rel, places=places)


def _link_back(plan: _Plan, damage: Damage, published: list[int], cache: dict) -> None:
    """A file its manifest lists gone from a generation: linked again to the same content in the nearest
    generation that has it (the inode its neighbours share, so the generations still differ only as logged)."""
    core = plan.core
    generation, rel = damage.places[0]
    near = sorted(published, key=lambda g: abs(g - generation))
    source = _sources(core, near, cache).get(damage.expected[0])
    if source is None:
        plan.unsolved.append(f"generation {generation} lacks {rel}, which its manifest lists: restore it from a backup")
        return

    def link() -> None:
        for path in {os.path.realpath(core.gen_path(g) / r) for g, r in damage.places}:
            atomic_link(source, Path(path))
        for touched in damage.generations:
            manifest.refresh_stats(core.gen_path(touched))
    plan.act(f"restored {rel} in generations {', '.join(map(str, damage.generations))} (it was missing: linked "
             f"again to {source.relative_to(core.root)}, the same content)", link, "restored", path=rel,
             places=", ".join(f"{g}/{r}" for g, r in damage.places))


def _replace(plan: _Plan, damage: Damage, text: bytes) -> None:
    core = plan.core
    first_generation, first_rel = damage.places[0]
    evidence = plan.quarantine() / f"{first_generation}-{first_rel.replace('/', '__')}"
    os.link(core.gen_path(first_generation) / first_rel, evidence)
    fresh = core.staging / unique("restore-")
    write_new(fresh, text, READ_ONLY)
    replaced: set[str] = set()  # generations sharing a folder share the entry: replace it once
    for generation, rel in damage.places:
        target = core.gen_path(generation) / rel
        entry = os.path.join(os.path.realpath(target.parent), target.name)
        if entry not in replaced:
            atomic_link(fresh, target)
            replaced.add(entry)
    os.unlink(fresh)
    touched = {generation for generation, _ in damage.places}
    for generation in sorted(touched):
        manifest.refresh_stats(core.gen_path(generation))


def _drop(plan: _Plan, damage: Damage) -> None:
    """Take an unrestorable changed file out of every generation sharing it (readers must not see it)."""
    core = plan.core
    first_generation, first_rel = damage.places[0]
    os.link(core.gen_path(first_generation) / first_rel,
            plan.quarantine() / f"{first_generation}-{first_rel.replace('/', '__')}")
    for generation, rel in damage.places:
        tree = core.gen_path(generation)
        if os.path.lexists(tree / rel):  # generations sharing its folder lost it with the first unlink
            os.unlink(tree / rel)
            fsync_dir((tree / rel).parent)
        manifest.refresh_stats(tree)


def _refresh_stats(core: StoreCore, generation: int) -> None:
    manifest.refresh_stats(core.gen_path(generation))
