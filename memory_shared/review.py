"""What a person does with tasks' memory: review proposals, accept or reject them, revert to an older state,
and read a run's or a task's commits. Each decision is one new generation; nothing is ever deleted (a rejected
proposal stays in proposals/ with its decision, every older generation stays in the log)."""
from __future__ import annotations

import difflib
import getpass
import os
import time
from typing import Optional

from .commitlog import Commit
from .handle import TransactionHandle
from .merge import merge
from .proposals import PROPOSALS_DIR, Proposal, find_proposal, load_proposals
from .provenance import Record
from .store import MemoryStore


def person() -> str:
    """Who is deciding: the login name (GA_PERSON overrides, e.g. in CI)."""
    name = os.environ.get("GA_PERSON")
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def open_proposals(store: MemoryStore) -> list[Proposal]:
    with store.snapshot() as snap:
        return [p for p in load_proposals(snap.path) if p.state == "open"]


def all_proposals(store: MemoryStore) -> list[Proposal]:
    with store.snapshot() as snap:
        return load_proposals(snap.path)


def proposal_diff(store: MemoryStore, proposal: Proposal) -> list[str]:
    """The unified diff of what accepting `proposal` would change, against HEAD (one string per path)."""
    out = []
    with store.snapshot() as snap:
        for change in proposal.proposed_changes():
            current = snap.read(change.path)
            clean, merged = merge(change.base_text, change.text if change.op != "delete" else None, current)
            after = merged if clean else (change.text if change.op != "delete" else None)
            note = "" if clean else f"(conflicts with HEAD: accepting it fails; {change.path} changed since)\n"
            diff = difflib.unified_diff((current or "").splitlines(True), (after or "").splitlines(True),
                                        f"HEAD/{change.path}", f"proposal/{change.path}")
            out.append(note + "".join(diff))
    return out


def accept(store: MemoryStore, ident: str, who: Optional[str] = None) -> int:
    """Apply an open proposal to HEAD (3-way merged with what changed since it was made), its records marked
    accepted by the person; returns the new generation. ValueError (one line) when it cannot apply."""
    who = who or person()
    with store.transaction(message=f"accept proposal {ident}", author=f"person:{who}") as txn:
        with store.snapshot(txn.base) as snap:
            proposal = find_proposal(snap.path, ident)
        _open(proposal)
        for change in proposal.proposed_changes():
            current = txn.read(change.path)
            clean, merged = merge(change.base_text, change.text if change.op != "delete" else None, current)
            if not clean:
                raise ValueError(f"proposal {proposal.id}: {change.path} changed since the task saw it and the "
                                 f"changes overlap; reject it (`ga memory reject {proposal.id}`) and redo it by hand")
            if merged is None:
                if current is not None:
                    txn.delete(change.path)
            elif merged != current:
                txn.write(change.path, merged)
        for data in proposal.records:
            record = Record(**{k: v for k, v in data.items() if k in Record.__dataclass_fields__})
            record.accepted_by, record.proposal = who, proposal.id
            txn.write(record.rel, record.to_text())
        _decide(txn, proposal, "accepted", who, "")
        txn.message = f"accept proposal {proposal.id} by {who}: {', '.join(c['path'] for c in proposal.changes)}"
    assert txn.generation is not None
    return txn.generation


def reject(store: MemoryStore, ident: str, who: Optional[str] = None, note: str = "") -> int:
    """Mark an open proposal rejected (it stays in proposals/ and the log); returns the new generation."""
    who = who or person()
    with store.transaction(message=f"reject proposal {ident}", author=f"person:{who}") as txn:
        with store.snapshot(txn.base) as snap:
            proposal = find_proposal(snap.path, ident)
        _open(proposal)
        _decide(txn, proposal, "rejected", who, note)
        txn.message = f"reject proposal {proposal.id} by {who}" + (f": {note}" if note else "")
    assert txn.generation is not None
    return txn.generation


def revert(store: MemoryStore, generation: int, who: Optional[str] = None) -> Optional[int]:
    """A new generation whose memory is that of `generation` (proposals and their decisions stay as they are at
    HEAD); None when HEAD already is that state."""
    who = who or person()
    head = store.head()
    if generation >= head:
        raise ValueError(f"revert {generation}: give an older generation than HEAD ({head}); `ga memory log` lists them")
    changes = [c for c in store.diff(generation, head) if not c.path.startswith(PROPOSALS_DIR + "/")]
    if not changes:
        return None
    with store.snapshot(generation) as old, store.transaction(
            message=f"revert to generation {generation} by {who}: {len(changes)} path(s)", author=f"person:{who}",
            base=head) as txn:
        for change in changes:
            text = old.read(change.path)
            if text is None:
                txn.delete(change.path)
            else:
                txn.write(change.path, text)
    return txn.generation


def commits_of(commits: list[Commit], run: Optional[str] = None, task: Optional[str] = None) -> list[Commit]:
    """The commits a run (its id) or a task (its id) made: by the commit key run/task/attempt, or the author."""
    found = []
    for commit in commits:
        key = commit.key or ""
        parts = key.split("/")
        by_run = run is None or (len(parts) >= 2 and (parts[0] == run or (parts[0] == "explore" and parts[1] == run)))
        by_task = task is None or task in parts[1:] or commit.author.split(" ")[0] == f"worker:{task}"
        if by_run and by_task:
            found.append(commit)
    return found


def _open(proposal: Proposal) -> None:
    if proposal.state != "open":
        raise ValueError(f"proposal {proposal.id} was {proposal.state} by {proposal.decided_by}; "
                         "`ga memory review --all` shows it")


def _decide(txn: TransactionHandle, proposal: Proposal, state: str, who: str, note: str) -> None:
    proposal.state, proposal.decided_by, proposal.decided_at, proposal.decision_note = state, who, time.time(), note
    txn.write(proposal.rel, proposal.to_text())
