"""Provenance and trust of memory entries, kept in the generation itself (docs/design.md §5).

    <folder>/.<name>.<record id>.prov   beside the memory file <folder>/<name>: who wrote what there, what
                                        backs it, what it read (a JSON record)

A record covers one commit's change to one memory path: the whole file (an L3 SOP, a script) or the lines it
added (L1 pointer lines, L2 facts), each line by the sha256 of its stripped text. A skill in skilltree.json is
recorded under `skilltree.json` with its id as the line. Trust levels:

    person    a person wrote or accepted it (`ga memory accept`), or ga did (the shipped defaults)
    verified  ga re-ran the procedure in a fresh sandbox and its output backed the claim
    sourced   a fact taken from a web page or file (the record names the URL or path)
    proposed  a task wrote it and nothing verified it

Text with no record was written outside the gate: by a person, by ga, or by a store older than provenance;
it counts as `person`. A task can never write a `.prov` record or below proposals/ (the gate refuses it),
so a record is ga's word, never the model's. One file per (commit, path), in the folder the commit changes
anyway (so a record costs one file, no folder of its own): concurrent commits never touch the same record,
so they rebase without conflict; a commit that rewrites a path drops the records whose text is gone from it
(older generations keep them). Memory listings leave the records out.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, Optional

Trust = Literal["person", "verified", "sourced", "proposed"]
TRUSTS: tuple[str, ...] = ("person", "verified", "sourced", "proposed")
RECORD_SUFFIX = ".prov"
PROPOSALS_DIR = "proposals"
RESERVED_DIRS = (PROPOSALS_DIR,)
MAX_RECORD_BYTES = 256_000
# what a reader under each memory.admit sees of what tasks wrote (person text is always seen)
ADMITTED: dict[str, frozenset[str]] = {
    "review": frozenset({"person"}),
    "verified": frozenset({"person", "verified"}),
    "auto": frozenset(TRUSTS),
}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def line_key(line: str) -> str:
    return digest(line.strip())


def is_reserved(rel: str) -> bool:
    """Whether `rel` is ga's own bookkeeping (a provenance record, a proposal): never a task's to write."""
    parts = rel.strip("/").split("/")
    return parts[0] in RESERVED_DIRS or is_record_name(parts[-1])


def is_record_name(name: str) -> bool:
    return name.startswith(".") and name.endswith(RECORD_SUFFIX)


def _split(path: str) -> tuple[str, str]:
    folder, _, name = path.rpartition("/")
    return folder, name


@dataclass
class Backing:
    """One tool run of the task: what it was and how it ended (output by digest, never by text)."""
    tool: str
    call: str
    ok: bool
    exit_code: Optional[int] = None
    output_sha256: str = ""
    evidence: bool = False  # a run that verifies something (a successful, non-trivial code_run)


@dataclass
class Verification:
    """ga's own re-run of a procedure, outside the task's directory."""
    verified: bool
    scripts: list[str] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)
    output_sha256: list[str] = field(default_factory=list)
    network: str = "off"
    why: str = ""  # one line: what backed the claim, or why it did not


@dataclass
class Record:
    id: str
    path: str
    scope: Literal["file", "lines"]
    trust: str
    who: dict[str, object] = field(default_factory=dict)      # author, run, task, attempt, model
    backs: list[dict[str, object]] = field(default_factory=list)  # the executions before the change
    read: list[dict[str, str]] = field(default_factory=list)  # {"url": ...}, {"file": ...}, {"memory": ...}
    verification: Optional[dict[str, object]] = None  # a Verification as a dict, or a pointer check
    file_sha256: str = ""                                    # scope file: the text it vouches for
    lines: list[dict[str, str]] = field(default_factory=list)  # scope lines: {"sha256", "text"}
    time: float = 0.0
    accepted_by: Optional[str] = None
    proposal: Optional[str] = None  # the proposal it came from, when a person accepted one

    @property
    def rel(self) -> str:
        folder, name = _split(self.path)
        return f"{folder + '/' if folder else ''}.{name}.{self.id}{RECORD_SUFFIX}"

    def to_text(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "\n"

    @classmethod
    def from_text(cls, text: str) -> "Record":
        data = json.loads(text)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def source(self) -> str:
        """One line: who wrote it and what backs it."""
        who = self.who
        parts = [f"task {who['task']}" if who.get("task") else str(who.get("author") or "unknown")]
        if who.get("run"):
            parts.append(f"run {who['run']}")
        if who.get("model"):
            parts.append(f"model {who['model']}")
        if self.accepted_by:
            parts.append(f"accepted by {self.accepted_by}")
        text = ", ".join(parts)
        if self.verification:
            text += f"; {self.verification.get('why', '')}"
        elif self.read:
            text += "; from " + ", ".join(next(iter(r.values())) for r in self.read[:3])
        return text


def record_id(key: str, path: str) -> str:
    return digest(f"{key}\0{path}")[:20]


def records_for(tree: Path | str, path: str) -> list[Record]:
    """Every readable record of `path` in a generation's tree (unreadable ones are skipped: ga wrote them,
    so one that does not parse is damage for `ga memory verify`, not a reason to trust the text)."""
    parent, base = _split(path)
    folder = Path(tree) / parent if parent else Path(tree)
    prefix = f".{base}."
    try:
        names = sorted(n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(RECORD_SUFFIX)
                       and "." not in n[len(prefix):-len(RECORD_SUFFIX)])
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        try:
            with open(folder / name, encoding="utf-8") as handle:
                found.append(Record.from_text(handle.read(MAX_RECORD_BYTES)))
        except (OSError, ValueError, TypeError):
            continue
    return found


@dataclass
class Trusted:
    """The trust of one file's text and lines, from its records."""
    file: Optional[Record] = None
    lines: dict[str, Record] = field(default_factory=dict)

    def of_line(self, line: str) -> Optional[Record]:
        return self.lines.get(line_key(line)) if line.strip() else None


def trust_of(tree: Path | str, path: str, text: Optional[str]) -> Trusted:
    """What the records say of `text` at `path`: the record vouching for the whole text, and per line."""
    found = Trusted()
    file_key = digest(text) if text is not None else None
    for record in records_for(tree, path):
        if record.scope == "file" and record.file_sha256 == file_key:
            found.file = record
        for line in record.lines:
            found.lines.setdefault(line.get("sha256", ""), record)
    return found


def trust_level(record: Optional[Record]) -> str:
    if record is None or record.accepted_by:
        return "person"
    return record.trust if record.trust in TRUSTS else "proposed"


def all_records(tree: Path | str) -> list[Record]:
    """Every record of a generation (for `ga memory show` and the log), by path."""
    base = Path(tree)
    found: list[Record] = []
    for folder, _dirs, names in os.walk(base, followlinks=True):
        for name in names:
            if is_record_name(name):
                try:
                    with open(Path(folder) / name, encoding="utf-8") as handle:
                        found.append(Record.from_text(handle.read(MAX_RECORD_BYTES)))
                except (OSError, ValueError, TypeError):
                    continue
    return found
