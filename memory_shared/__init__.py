"""The shared memory tier: a versioned store of immutable generations with atomic commits.

    store = MemoryStore(root)                       # StoreMissing if there is none; create=True to init
    with store.snapshot() as snap:                  # pinned, read-only tree at snap.path
        render_l1(snap.path)
    with store.transaction("what and evidence", author="task-7", base=snap.generation) as txn:
        txn.patch("L2/facts.md", "## Environment\n", "## Environment\n- python is 3.11\n")
    txn.generation                                  # the new generation, or None if nothing changed
"""
from .commitlog import Commit
from .errors import (
    CommitConflict,
    FormatRefused,
    GenerationDamaged,
    GenerationMissing,
    L1TooLarge,
    MemoryStoreError,
    PathRefused,
    StoreMissing,
    StoreNeedsRepair,
)
from .handle import SharedSnapshotHandle, SnapshotHandle, StoreHandle, TransactionHandle
from .layers import (
    L1_INDEX,
    L2_FACTS,
    SKILLTREE,
    SOP_FIELDS,
    check_l1,
    default_files,
    format_sop,
    parse_sop,
    read_l0,
    render_l1,
)
from .paths import check_rel
from .store import Change, MemoryStore, Snapshot
from .transaction import Transaction

__all__ = [
    "Change",
    "Commit",
    "CommitConflict",
    "FormatRefused",
    "GenerationDamaged",
    "GenerationMissing",
    "L1TooLarge",
    "L1_INDEX",
    "L2_FACTS",
    "MemoryStore",
    "MemoryStoreError",
    "PathRefused",
    "SKILLTREE",
    "SOP_FIELDS",
    "SharedSnapshotHandle",
    "Snapshot",
    "SnapshotHandle",
    "StoreHandle",
    "StoreMissing",
    "StoreNeedsRepair",
    "Transaction",
    "TransactionHandle",
    "check_l1",
    "check_rel",
    "default_files",
    "format_sop",
    "parse_sop",
    "read_l0",
    "render_l1",
]

# L4 archive, access statistics and the consolidation gate (beside the store)
from .archive import Archive
from .gate import Execution, GateReport, StagedChange, consolidate
from .stats import AccessLog

__all__ += ["AccessLog", "Archive", "Execution", "GateReport", "StagedChange", "consolidate"]
