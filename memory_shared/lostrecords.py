"""A generation directory without its log record: proven complete, its record is restored, never discarded.

Complete means its MANIFEST (and the folder manifests under it) exist and every file hashes to them. The
record is then the generation's MANIFEST.record, written by its commit before publication, when it proves
itself (its generation, parent, manifest hash and parent hash fit); else a record rebuilt from the MANIFEST
(author `ga memory repair`; its paths are the difference from the parent's manifest).
"""
from __future__ import annotations

import os
from typing import Optional

from . import commitlog, manifest
from .commitlog import Commit
from .core import StoreCore
from .verify import content_damage

REPAIR_AUTHOR = "ga memory repair"


def complete(core: StoreCore, generation: int, cache: Optional[dict] = None) -> bool:
    if not (core.gen_path(generation) / manifest.NAME).is_file():
        return False
    try:
        return not content_damage(core, [generation], {}, {}, {} if cache is None else cache)
    except (ValueError, IndexError, OSError):  # an unreadable MANIFEST or tree
        return False


def record_of(core: StoreCore, generation: int, parent_line: Optional[bytes]) -> tuple[Commit, bool]:
    """The record of a complete generation whose parent's line is `parent_line`, and whether it is the
    original (from MANIFEST.record) rather than rebuilt."""
    tree = core.gen_path(generation)
    data = (tree / manifest.NAME).read_bytes()
    digest = manifest.digest(data)
    parent_hash = commitlog.line_hash(parent_line) if parent_line is not None else None
    try:
        kept = Commit.from_line((tree / manifest.RECORD).read_bytes())
    except (OSError, ValueError, KeyError, TypeError):
        kept = None
    if kept is not None and kept.generation == generation and kept.manifest == digest \
            and kept.parent == (generation - 1 if generation else None) and kept.parent_hash == parent_hash:
        return kept, True
    new = manifest.flatten(tree, data)
    old = _manifest_of(core, generation - 1) or {}
    return Commit(
        generation=generation, parent=generation - 1 if generation else None, author=REPAIR_AUTHOR,
        message="record rebuilt by `ga memory repair`: the original line was lost from log.jsonl",
        paths=sorted(rel for rel in old.keys() | new.keys() if old.get(rel) != new.get(rel)),
        time=os.stat(tree).st_mtime, deleted=sorted(old.keys() - new.keys()), manifest=digest,
        parent_hash=parent_hash), False


def append_record(core: StoreCore, generation: int) -> bool:
    """Append the record of a complete generation next to the log's end; True if it is the original."""
    record, original = record_of(core, generation, commitlog.last_line(core.log))
    commitlog.append(core.log, record)
    core.link_manifest(generation)
    return original


def _manifest_of(core: StoreCore, generation: int) -> Optional[manifest.Manifest]:
    tree = core.gen_path(generation)
    for path in (tree / manifest.NAME, core.manifests / str(generation)):
        try:
            return manifest.flatten(tree, path.read_bytes())
        except (FileNotFoundError, ValueError):
            continue
    return None
