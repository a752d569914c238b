"""`ga memory repair` on a log that does not read or chain: the chain rebuilt from the generations.

Generation by generation from 0: the log's record of it is kept when it proves itself against the tree (its
manifest hash is the MANIFEST's, or the files hash to it: then the MANIFEST is what was edited), with its
parent hash set to the line kept before it; a generation with no such record but a complete tree gets its
record back from MANIFEST.record or its MANIFEST (lostrecords.py); a generation gone with its record (lost
to the damage) gets a placeholder record and a `lost` event, when later generations need the chain to
reach them. Every line not kept (garbage, out of sequence, disproved) and the whole old log go to
quarantine/; nothing is deleted.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

from . import commitlog, lostrecords, manifest
from .commitlog import Assessment, Commit
from .core import StoreCore


@dataclass
class Rebuilt:
    data: bytes                                     # the new log
    notes: list[str] = field(default_factory=list)  # one line per record changed, rebuilt or left out
    lost: list[int] = field(default_factory=list)   # generations given placeholder records
    rebuilt: list[int] = field(default_factory=list)


def rebuild(core: StoreCore, found: Assessment, cache: dict) -> Rebuilt:
    data = core.log.read_bytes() if core.log.exists() else b""
    lines = data.split(b"\n")[:-1]  # a torn tail is left out (the old log is kept whole in quarantine/)
    by_generation: dict[int, list[tuple[int, bytes, Commit]]] = {}
    out = Rebuilt(b"")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            commit = Commit.from_line(line)
        except (ValueError, KeyError, TypeError):
            out.notes.append(f"line {number} is not a record: moved to quarantine/")
            continue
        by_generation.setdefault(commit.generation, []).append((number, line, commit))
    top = max(found.dirs | by_generation.keys(), default=-1)
    kept: list[bytes] = []
    used: set[int] = set()
    for generation in range(top + 1):
        parent_hash = commitlog.line_hash(kept[-1]) if kept else None
        chosen = _proven(core, generation, by_generation.get(generation, []), found, cache)
        if chosen is not None:
            number, line, commit = chosen
            used.add(number)
            if commit.parent_hash is not None and commit.parent_hash != parent_hash:
                line = _line(dataclasses.replace(commit, parent_hash=parent_hash))
                out.notes.append(f"the record of generation {generation} (line {number}) chained again to the "
                                 "record kept before it")
        elif generation in found.dirs and lostrecords.complete(core, generation, cache):
            commit, original = lostrecords.record_of(core, generation, kept[-1] if kept else None)
            line = _line(commit)
            out.rebuilt.append(generation)
            out.notes.append(f"the record of generation {generation} restored from its "
                             f"{manifest.RECORD if original else manifest.NAME}")
        elif generation not in found.dirs and generation < top:
            line = _line(Commit(generation=generation, parent=generation - 1 if generation else None,
                                author=lostrecords.REPAIR_AUTHOR, paths=[], time=0.0, parent_hash=parent_hash,
                                message="placeholder: this generation and its record were lost"))
            out.lost.append(generation)
            out.notes.append(f"generation {generation} and its record are lost: a placeholder record keeps the chain")
        else:
            break  # an incomplete generation: it and everything above it are left to the checks that follow
        kept.append(line)
    for records in by_generation.values():
        out.notes += [f"line {number} (a record of generation {commit.generation}) does not fit the chain: "
                      "moved to quarantine/" for number, _, commit in records if number not in used]
    out.data = b"".join(line + b"\n" for line in kept)
    return out


def _proven(core: StoreCore, generation: int, records: list[tuple[int, bytes, Commit]],
            found: Assessment, cache: dict) -> Optional[tuple[int, bytes, Commit]]:
    """The first record of `generation` naming the right parent that its tree does not disprove."""
    parent = generation - 1 if generation else None
    records = [r for r in records if r[2].parent == parent]
    if generation not in found.dirs:
        return records[0] if records else None  # gc took the tree: the record is all there is
    tree = core.gen_path(generation)
    try:
        digest: Optional[str] = manifest.digest((tree / manifest.NAME).read_bytes())
    except OSError:
        digest = None
    for record in records:
        recorded = record[2].manifest or found.upgraded.get(generation)
        if recorded is None or digest is None or recorded == digest:
            return record
    for record in records:  # the MANIFEST edited, not the record: the files still hash to the record
        if record[2].manifest and manifest.tables_of(tree, cache).digest == record[2].manifest:
            return record
    return None


def _line(commit: Commit) -> bytes:
    return commit.to_line().rstrip(b"\n")
