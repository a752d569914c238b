"""The memory service (a store on another node, orchestrator/memory_service.py) as a worker's store handle:
the gate's keyed commit is made once through it, and skilltree's read-then-commit works through it too."""
from __future__ import annotations

from pathlib import Path

from memory_shared import MemoryStore, StoreHandle
from memory_shared.gate import Execution, StagedChange, consolidate
from orchestrator.memory_service import MemoryService, ReplicaStore
from skilltree.commit import commit_tree
from skilltree.tree import Category, SkillTree, load


def _replica(tmp_path: Path) -> StoreHandle:
    service = MemoryService.remote(str(tmp_path / "memory"), 30, 2000)  # type: ignore[attr-defined]
    return ReplicaStore(tmp_path / "replicas", service)


def _gate(store: StoreHandle, text: str, key: str):
    change = StagedChange(seq=2, call_id="call_2", op="write", path="L2/remote.md", text=text)
    proof = Execution(seq=1, call_id="call_1", tool="code_run", ok=True, evidence=True)
    with store.snapshot() as snap:
        return consolidate(store, [change], [proof], task_id="t1", task_succeeded=True, author="worker:t1",
                           base=snap.generation, key=key)


def test_a_keyed_gate_commit_through_the_service_is_made_once(tmp_path: Path, ray_session: dict) -> None:
    replica = _replica(tmp_path)
    first = _gate(replica, "first run\n", "run-a/t1/1")
    again = _gate(replica, "the task ran again\n", "run-a/t1/1")  # a driver died after the commit
    retry = _gate(replica, "a new attempt\n", "run-a/t1/2")
    assert first.generation == 1 and not first.already_committed and [c.path for c in first.accepted] == ["L2/remote.md"]
    assert again.generation == 1 and again.already_committed and again.accepted == [] and again.refused == []
    assert retry.generation == 2 and not retry.already_committed
    store = MemoryStore(tmp_path / "memory")
    assert [c.key for c in store.log()] == [None, "run-a/t1/1", "run-a/t1/2"]
    with store.snapshot() as snap:
        assert snap.read("L2/remote.md") == "a new attempt\n"


def test_skilltree_commits_through_the_service_reading_its_own_transaction(tmp_path: Path, ray_session: dict) -> None:
    replica = _replica(tmp_path)
    assert (replica.l1_max_lines, replica.l1_max_chars) == (30, 2000)
    seen: list[list[str]] = []

    def add(name: str):
        def update(tree: SkillTree) -> SkillTree:
            seen.append(sorted(tree.categories))  # read through the service, in its transaction
            return tree.copy_with(categories={**tree.categories, name: Category(name=name)})
        return update

    assert commit_tree(replica, add("first"), message="a category", author="test") == 1
    assert commit_tree(replica, add("second"), message="another", author="test") == 2
    assert seen == [[], ["first"]]
    with MemoryStore(tmp_path / "memory").snapshot() as snap:
        assert sorted(load(snap.path).categories) == ["first", "second"]
