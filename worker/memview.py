"""The worker's view of memory: reads from the task's snapshot (as memory.admit lets it see what tasks wrote:
worker/memhints.py), writes staged for the consolidation gate. A write to L0 or to ga's own records is refused
here, in one line, before anything is staged. `used` says whether the task touched memory/ at all (a read, a
listing, a write or opening long-term memory): only then is its session archived (worker/taskmemory.py)."""
from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Literal, Optional

import structlog

from memory_shared import AccessLog, SnapshotHandle, StoreHandle
from memory_shared.errors import PathRefused
from memory_shared.gate import L0_REFUSED, StagedChange
from memory_shared.gate import RESERVED as RESERVED_REFUSED
from memory_shared.layers import L0_DIR
from memory_shared.manifest import RESERVED
from memory_shared.paths import resolve as resolve_in_tree
from memory_shared.paths import walk_tree
from memory_shared.provenance import is_record_name, is_reserved
from worker.memhints import present
from worker.paths import PathError
from worker.textpatch import patch_exact

log = structlog.get_logger("worker.memory")
WriteMode = Literal["overwrite", "append", "prepend"]
STAGING_OFF = "memory writes are staged only after start_long_term_update; call start_long_term_update first"


class MemoryView:
    """Staged text wins over the snapshot; every successful read is counted in the access statistics."""

    def __init__(self, store: Optional[StoreHandle], snapshot: Optional[SnapshotHandle], task_id: str,
                 access_log: Optional[AccessLog] = None, admit: str = "verified") -> None:
        self.store = store  # None: no memory tier in this task
        self.snapshot = snapshot
        self.task_id = task_id
        self.access_log = access_log
        self.admit = admit  # memory.admit: what of the tasks' writes this worker sees
        self.reads: list[str] = []  # memory paths read from the snapshot, in order (a commit's provenance)
        self._staged: dict[str, Optional[str]] = {}  # rel -> current text (None: deleted)
        self._changes: list[StagedChange] = []
        self._staging = False
        self.used = False  # the task read, listed or staged something under memory/, or opened long-term memory

    @property
    def generation(self) -> Optional[int]:
        return self.snapshot.generation if self.snapshot is not None else None

    @property
    def root(self) -> Optional[Path]:
        return Path(self.snapshot.path) if self.snapshot is not None else None

    @property
    def staging_enabled(self) -> bool:
        return self._staging

    @property
    def changes(self) -> list[StagedChange]:
        return list(self._changes)

    def enable_staging(self) -> None:
        self._staging = self.used = True

    def read(self, rel: str) -> Optional[str]:
        """The text a worker sees: its own staged text, or the snapshot's as memory.admit shows it."""
        self.used = True
        rel = _clean(rel)
        text = self._staged[rel] if rel in self._staged else self._shown(rel)
        if text is not None and rel not in self._staged and rel not in self.reads:
            self.reads.append(rel)
        if text is not None and self.access_log is not None:
            try:
                self.access_log.record(rel, self.task_id)
            except (OSError, ValueError) as exc:  # statistics must never cost the task its read
                log.warning("memory_access_not_recorded", path=rel, error=str(exc))
        return text

    def current(self, rel: str) -> Optional[str]:
        """The text as the task left it (staged over the snapshot), unframed: what the gate verifies."""
        return self._current(_clean(rel))

    def exists(self, rel: str) -> bool:
        self.used = True
        rel = _clean(rel)
        if rel in self._staged:
            return self._staged[rel] is not None
        return self._snapshot_file(rel) is not None and self._shown(rel) is not None

    def list(self, prefix: str = "") -> list[str]:
        """Files (relative paths) under prefix, staged ones included, deleted ones left out."""
        self.used = True
        prefix = _clean(prefix) if prefix.strip("/. ") else ""
        names: set[str] = set()
        root = self.root
        if root is not None:
            base = (root / prefix) if prefix else root
            if base.is_dir():
                names.update((base / rel).relative_to(root).as_posix() for rel, entry in walk_tree(base)
                             if entry.is_file())  # (a DirEntry: no stat of its own for a plain file)
                names -= RESERVED  # the generation's MANIFEST files are not memory
                recorded = _recorded(names)  # only a file with a record can be one this worker may not see
                names = {n for n in names if not is_reserved(n)}
                names -= {n for n in names & recorded if self._shown(n) is None}
        for rel, text in self._staged.items():
            if _under(rel, prefix):
                (names.add if text is not None else names.discard)(rel)
        return sorted(names)

    def stage_write(self, rel: str, text: str, mode: WriteMode = "overwrite", seq: int = 0, call_id: str = "") -> str:
        """Stage a whole-file write (append/prepend computed against the current text); returns the new text."""
        rel = self._writable(rel)
        current = self._current(rel) or ""
        full = {"overwrite": text, "append": current + text, "prepend": text + current}[mode]
        self._changes.append(StagedChange(seq=seq, call_id=call_id, op="write", path=rel, text=full))
        self._staged[rel] = full
        return full

    def stage_patch(self, rel: str, old: str, new: str, seq: int = 0, call_id: str = "") -> str:
        """Stage a patch (old must occur exactly once in the current text); returns the new text.

        Kept patch-shaped so the store can replay it on a newer generation; raises PatchError on 0/N matches.
        """
        rel = self._writable(rel)
        current = self._current(rel)
        if current is None:
            raise FileNotFoundError(f"memory/{rel} does not exist; create it with file_write")
        updated, old_s, new_s = patch_exact(current, old, new)  # the file's newline style, so a replay matches
        self._changes.append(StagedChange(seq=seq, call_id=call_id, op="patch", path=rel, old=old_s, new=new_s))
        self._staged[rel] = updated
        return updated

    # ---- internals

    def _writable(self, rel: str) -> str:
        self.used = True
        if not self._staging:
            raise PermissionError(STAGING_OFF)
        rel = _clean(rel)
        if not rel:
            raise PathError("memory: name a file, e.g. memory/L2/facts.md")
        if rel.split("/", 1)[0] == L0_DIR:
            raise PermissionError(f"{L0_REFUSED}; nothing was staged")
        if is_reserved(rel):
            raise PermissionError(f"{RESERVED_REFUSED}; nothing was staged")
        return rel

    def _current(self, rel: str) -> Optional[str]:
        return self._staged[rel] if rel in self._staged else self._snapshot_text(rel)

    def _snapshot_file(self, rel: str) -> Optional[Path]:
        root = self.root
        if root is None or not rel:
            return None
        try:  # resolved against the generation's own paths: its shared folders live in the store's pool
            path = root / resolve_in_tree(root, rel)
        except PathRefused:
            return None
        return path if path.is_file() else None

    def _shown(self, rel: str) -> Optional[str]:
        text = self._snapshot_text(rel)
        root = self.root
        if text is None or root is None:
            return text
        return present(root, rel, text, self.admit)

    def _snapshot_text(self, rel: str) -> Optional[str]:
        path = self._snapshot_file(rel)
        if path is None:
            return None
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            return handle.read()


def _recorded(names: set[str]) -> set[str]:
    """The paths among `names` that have a provenance record beside them (<folder>/.<name>.<id>.prov)."""
    found: set[str] = set()
    for name in names:
        folder, _, base = name.rpartition("/")
        if is_record_name(base):
            found.add(f"{folder}/{base[1:].rsplit('.', 2)[0]}" if folder else base[1:].rsplit(".", 2)[0])
    return found


def _clean(rel: str) -> str:
    parts = [p for p in PurePosixPath(rel.replace("\\", "/").strip()).parts if p not in (".", "/")]
    if ".." in parts:
        raise PathError(f"memory/{rel}: '..' is not allowed in memory paths")
    return "/".join(parts)


def _under(rel: str, prefix: str) -> bool:
    return not prefix or rel == prefix or rel.startswith(prefix.rstrip("/") + "/")

