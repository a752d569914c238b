"""events.jsonl is advice, never evidence: a forged `gc` or `dropped` line cannot excuse data the store could
still bring back, nor make repair skip bringing it back. Each attack is done to a real store as a process that
could write it would, then checked with real `ga memory` processes."""
from __future__ import annotations

import json
from pathlib import Path

from memory_shared import MemoryStore
from tests.store_support import five_commits, ga_memory, published, sh, store_in_ga_home  # noqa: F401  (fixtures)


def forge(root: Path, event: dict) -> None:
    with open(root / "events.jsonl", "a") as fh:
        fh.write(json.dumps(event) + "\n")


def verify_says(problem: str) -> None:
    said = ga_memory("verify")
    assert said.returncode != 0 and problem in said.stdout + said.stderr, said.stdout + said.stderr


def repair_brings_back(root: Path, before: dict, done: str) -> None:
    repaired = ga_memory("repair")
    assert repaired.returncode == 0 and done in repaired.stdout, repaired.stdout + repaired.stderr
    assert published(root) == before
    assert MemoryStore(root).verify() == [] and ga_memory("verify").returncode == 0


def test_a_forged_gc_event_does_not_excuse_a_generation_its_manifest_can_rebuild(root: Path) -> None:
    before = published(root)
    sh("rm -rf generations/2", root)
    forge(root, {"event": "gc", "generations": [2]})  # gc takes manifests/2 along; this one is still there
    verify_says("generation 2 does not exist")
    repair_brings_back(root, before, "rebuilt generation 2")


def test_a_forged_dropped_event_does_not_excuse_a_file_whose_content_is_in_the_store(root: Path) -> None:
    before = published(root)
    sh("rm generations/5/L2/f3.md", root)  # "fact 3" is still in generations 3 and 4
    forge(root, {"event": "dropped", "path": "L2/f3.md", "generations": [5]})
    verify_says("generation 5 lacks L2/f3.md")
    repair_brings_back(root, before, "restored L2/f3.md in generations 5")


def test_a_generation_repair_gives_up_on_stays_excused_and_the_store_verifies(store: MemoryStore) -> None:
    """The other side of the rule: what nothing can rebuild is recorded as lost, its manifest moved aside, and
    the store verifies again (the event excuses only that)."""
    for text in ("one\n", "two\n", "three\n"):
        with store.transaction("rewrite", "task") as txn:
            txn.write("L2/a.md", text)
    sh("rm -rf generations/1", store.root)  # "one" was only there
    verify_says("generation 1 does not exist")
    repaired = ga_memory("repair")
    assert repaired.returncode == 0 and "generation 1 cannot be rebuilt" in repaired.stdout, repaired.stdout
    assert "manifests/1 moved to quarantine/" in repaired.stdout
    assert list((store.root / "quarantine").rglob("manifest-1"))
    assert ga_memory("verify").returncode == 0 and MemoryStore(store.root).verify() == []
