"""What the store's tests share: `ga memory ARGS` as a real process, a shell step done to the store as a process
that can write it would, every published generation's files read back, and a store of five commits where
`ga memory` looks (the fixtures `store_root` and `root`: import `store_in_ga_home` and `five_commits` into the test module)."""
from __future__ import annotations

import os
import subprocess
from functools import partial
from pathlib import Path

import pytest

from memory_shared import MemoryStore
from tests.ga_support import run_ga

ga_memory = partial(run_ga, "memory")  # `ga memory ARGS`, a real process on the test's GA_HOME


def sh(script: str, cwd: Path) -> None:
    subprocess.run(["sh", "-c", script], cwd=cwd, check=True, timeout=30)


def published(root: Path) -> dict[int, dict[str, bytes]]:
    """Every generation's files (manifest files aside) and their bytes, read through the shared folders."""
    state = {}
    for gen in sorted((root / "generations").iterdir(), key=lambda p: int(p.name)):
        files = (Path(folder, name) for folder, _, names in os.walk(gen, followlinks=True) for name in names)
        state[int(gen.name)] = {str(f.relative_to(gen)): f.read_bytes() for f in files
                                if f.is_file() and not f.name.startswith("MANIFEST")}
    return state


@pytest.fixture(name="store_root")
def store_in_ga_home(ga_home: Path) -> Path:
    return ga_home / "memory"  # where `ga memory ...` looks


@pytest.fixture(name="root")
def five_commits(store: MemoryStore) -> Path:
    """Generations 0..5, each adding a fact (kept by every later generation) and a folder of its own (so each
    owns pooled folders of its own)."""
    for k in range(1, 6):
        with store.transaction(f"commit {k}", f"task-{k}") as txn:
            txn.write(f"L2/f{k}.md", f"fact {k}\n")
            txn.write(f"L3/k{k}/sop.md", f"sop {k}\n")
    assert store.head() == 5 and store.verify() == []
    return store.root
