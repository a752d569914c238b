"""Proposals: memory changes a task made that wait for a person (docs/design.md §5).

    proposals/<id>.json   the changes (op, path, text or patch), why they wait, the provenance they would
                          carry, and the decision: open, accepted or rejected (by whom, when)

A proposal is committed like any memory file, so it is in the generation and the log; a decision writes the
same file again with its state, so a rejected proposal stays readable in every later generation and nothing
is ever deleted. Accepting applies the changes to HEAD (a 3-way merge with what changed since, memory_shared.merge)
and marks their records accepted by the person.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, Optional

from .jsontypes import JSONObject
from .provenance import MAX_RECORD_BYTES, PROPOSALS_DIR

State = Literal["open", "accepted", "rejected"]


@dataclass
class ProposedChange:
    op: Literal["write", "patch", "delete"]
    path: str
    text: Optional[str] = None      # write: the whole new text
    old: Optional[str] = None       # patch
    new: Optional[str] = None
    base_text: Optional[str] = None  # the text the task saw (None: the file did not exist): the merge base
    trust: str = "proposed"


@dataclass
class Proposal:
    id: str
    reason: str                                   # why it waits: one line
    who: dict[str, object] = field(default_factory=dict)
    base: int = 0                                 # the generation the task worked on
    # ProposedChange and provenance.Record (per path) as dicts: as the proposal's file holds them (an older ga's too)
    changes: list[JSONObject] = field(default_factory=list)
    records: list[JSONObject] = field(default_factory=list)
    state: str = "open"
    time: float = 0.0
    decided_by: Optional[str] = None
    decided_at: Optional[float] = None
    decision_note: str = ""

    @property
    def rel(self) -> str:
        return f"{PROPOSALS_DIR}/{self.id}.json"

    def proposed_changes(self) -> list[ProposedChange]:
        return [ProposedChange(**{k: v for k, v in c.items() if k in ProposedChange.__dataclass_fields__})
                for c in self.changes]

    def to_text(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_text(cls, text: str) -> "Proposal":
        data = json.loads(text)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def load_proposals(tree: Path | str) -> list[Proposal]:
    """Every proposal of a generation, oldest first."""
    folder = Path(tree) / PROPOSALS_DIR
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(folder / name, encoding="utf-8") as handle:
                found.append(Proposal.from_text(handle.read(MAX_RECORD_BYTES * 4)))
        except (OSError, ValueError, TypeError):
            continue
    return sorted(found, key=lambda p: (p.time, p.id))


def find_proposal(tree: Path | str, ident: str) -> Proposal:
    """The proposal whose id is or starts with `ident`; ValueError (one line) when none or several."""
    matches = [p for p in load_proposals(tree) if p.id == ident or p.id.startswith(ident)]
    if not matches:
        raise ValueError(f"no proposal {ident!r} in the memory store; `ga memory review` lists them")
    if len(matches) > 1:
        raise ValueError(f"proposal id {ident!r} is ambiguous ({len(matches)} match); give more of it")
    return matches[0]
