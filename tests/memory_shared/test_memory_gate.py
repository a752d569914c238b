"""The consolidation gate on a real store: what is accepted, what is refused and why, one commit only."""
from __future__ import annotations

import json

import pytest
import structlog

from memory_shared.bounds import Bounds
from memory_shared.gate import NO_EVIDENCE, TASK_FAILED, Execution, GatePolicy, GateReport, StagedChange, consolidate
from memory_shared.proposals import load_proposals

FACTS = "L2/facts.md"
ENV = "## Environment\n"


def run(seq: int, ok: bool = True, evidence: bool = True, tool: str = "code_run") -> Execution:
    return Execution(seq=seq, call_id=f"call_{seq}", tool=tool, ok=ok, evidence=evidence)


def fact(seq: int, line: str = "- python is 3.11") -> StagedChange:
    return StagedChange(seq=seq, call_id=f"call_{seq}", op="patch", path=FACTS, old=ENV, new=f"{ENV}{line}\n")


def note(seq: int, name: str = "a") -> StagedChange:
    return StagedChange(seq=seq, call_id=f"call_{seq}", op="write", path=f"L3/{name}.md", text=f"note {name}\n")


CASES = [  # (name, executions, changes, task_succeeded, accepted seqs, {seq: reason})
    ("evidence before", [run(1)], [note(2)], True, [2], {}),
    ("no executions at all", [], [note(1)], True, [], {1: NO_EVIDENCE}),
    ("evidence only after the change", [run(3)], [note(2)], True, [], {2: NO_EVIDENCE}),
    ("same seq is not before", [run(2)], [note(2)], True, [], {2: NO_EVIDENCE}),
    ("failed execution", [run(1, ok=False)], [note(2)], True, [], {2: NO_EVIDENCE}),
    ("evidence-less executions only",
     [run(1, evidence=False, tool="update_working_checkpoint"), run(2, evidence=False, tool="file_write")],
     [note(3)], True, [], {3: NO_EVIDENCE}),
    ("task failed", [run(1)], [note(2)], False, [], {2: TASK_FAILED}),
    ("mixed: one before, one after", [run(2)], [note(1, "early"), note(3, "late")], True, [3], {1: NO_EVIDENCE}),
]


@pytest.mark.parametrize("name,executions,changes,succeeded,accepted,refused", CASES, ids=[c[0] for c in CASES])
def test_accept_refuse_table(store, name, executions, changes, succeeded, accepted, refused):
    report = consolidate(store, changes, executions, task_id="t1", task_succeeded=succeeded, author="worker:t1", base=0)
    assert isinstance(report, GateReport)
    assert [c.seq for c in report.accepted] == accepted
    assert {c.seq: reason for c, reason in report.refused} == refused
    if accepted:
        assert report.generation == 1 and store.head() == 1
        with store.snapshot() as snap:
            assert all(snap.read(c.path) == c.text for c in report.accepted)
            assert all(snap.read(c.path) is None for c, _ in report.refused)
    else:
        assert report.generation is None and store.head() == 0 and len(store.log()) == 1


def test_accepted_changes_commit_once_and_the_message_names_the_evidence(store):
    executions = [run(1), run(2, evidence=False, tool="start_long_term_update"), run(4), run(6, ok=False), run(9)]
    changes = [fact(5), note(7, "sop"), StagedChange(8, "call_8", "delete", "L3/README.md")]
    report = consolidate(store, changes, executions, task_id="task-42", task_succeeded=True, author="worker:task-42", base=0)
    assert report.generation == 1 and len(report.accepted) == 3 and report.refused == []
    [_, commit] = store.log()
    assert commit.author == "worker:task-42"
    assert sorted(p for p in commit.paths if not p.endswith(".prov")) == [
        "L2/facts.md", "L3/README.md", "L3/sop.md"]
    records = sorted(p.rsplit(".", 2)[0] for p in commit.paths if p.endswith(".prov"))
    assert records == ["L2/.facts.md", "L3/.sop.md"]  # beside what they vouch for; a delete leaves no record
    first = commit.message.splitlines()[0]
    assert "task-42" in first and "call_1, call_4" in first
    assert "call_2" not in first and "call_6" not in first and "call_9" not in first  # no evidence / failed / later
    with store.snapshot() as snap:
        assert "- python is 3.11" in snap.read(FACTS) and snap.read("L3/README.md") is None


def test_a_conflict_is_merged_on_head_and_what_still_conflicts_waits_as_a_proposal(store):
    with store.transaction(message="someone else", author="worker:other") as txn:
        txn.write("L3/shared.md", "theirs\n")
        txn.write(FACTS, txn.read(FACTS).replace("## User preferences\n", "## User preferences\n- theirs\n"))
    changes = [note(2, "mine"), StagedChange(3, "call_3", "write", "L3/shared.md", text="mine\n"),
               fact(4, "- mine")]
    report = consolidate(store, changes, [run(1)], task_id="t2", task_succeeded=True, author="worker:t2", base=0)
    assert report.generation == 2 and report.refused == []
    assert sorted(c.path for c in report.accepted) == [FACTS, "L3/mine.md"]
    assert [(c.path, why) for c, why in report.held] == [
        ("L3/shared.md", "conflicts with a change another task committed meanwhile (kept for review)")]
    with store.snapshot() as snap:
        assert snap.read("L3/mine.md") == "note mine\n" and snap.read("L3/shared.md") == "theirs\n"
        assert "- theirs" in snap.read(FACTS) and "- mine" in snap.read(FACTS)  # both kept
        [held] = load_proposals(snap.path)
    assert held.id == report.proposal and held.changes[0]["text"] == "mine\n"


def test_a_patch_still_unique_rebases_onto_a_newer_head(store):
    with store.transaction(message="other fact", author="worker:other") as txn:
        txn.patch(FACTS, "## Tools and services\n", "## Tools and services\n- ray 2.x\n")
    report = consolidate(store, [fact(2)], [run(1)], task_id="t3", task_succeeded=True, author="worker:t3", base=0)
    assert report.generation == 2 and report.refused == []
    with store.snapshot() as snap:
        text = snap.read(FACTS)
    assert "- python is 3.11" in text and "- ray 2.x" in text


def test_a_task_filling_l1_waits_for_review(store):
    huge = "\n".join(f"- line {i}" for i in range(40)) + "\n"
    changes = [note(2), StagedChange(3, "call_3", "write", "L1/index.md", text=huge)]
    report = consolidate(store, changes, [run(1)], task_id="t4", task_succeeded=True, author="worker:t4", base=0)
    assert report.generation == 1 and report.accepted == [] and report.refused == []
    assert {c.seq for c, _ in report.held} == {2, 3}
    assert all("a task may add at most 6" in why for _, why in report.held)
    with store.snapshot() as snap:
        assert "- line 1" not in snap.read("L1/index.md") and snap.read("L3/a.md") is None


def test_a_full_l1_keeps_the_pointer_for_review_and_lands_the_rest(store):
    huge = "\n".join(f"- line {i}" for i in range(40)) + "\n"
    changes = [note(2), StagedChange(3, "call_3", "write", "L1/index.md", text=huge)]
    policy = GatePolicy(bounds=Bounds(rewrite_share=1.0, l1_task_share=1.0, l1_max_lines=100))
    report = consolidate(store, changes, [run(1)], task_id="t4", task_succeeded=True, author="worker:t4", base=0,
                         policy=policy)
    assert report.generation == 1 and [c.seq for c in report.accepted] == [2] and report.refused == []
    [(held, why)] = report.held
    assert held.seq == 3 and why.startswith("L1 is full, kept for review") and "L2/facts.md" in why
    with store.snapshot() as snap:
        assert snap.read("L3/a.md") == "note a\n" and "- line 1" not in snap.read("L1/index.md")


def test_a_change_the_store_cannot_stage_is_refused_alone(store):
    changes = [note(2), StagedChange(3, "call_3", "patch", FACTS, old="not in the file", new="x"),
               StagedChange(4, "call_4", "write", "../outside.md", text="x")]
    report = consolidate(store, changes, [run(1)], task_id="t5", task_succeeded=True, author="worker:t5", base=0)
    assert report.generation == 1 and [c.seq for c in report.accepted] == [2]
    reasons = dict((c.seq, r) for c, r in report.refused)
    assert "0 matches" in reasons[3] and "outside.md" in reasons[4]
    assert store.log()[-1].message.splitlines() == [
        "consolidate t5: 1 change(s); evidence: task t5, calls call_1", "write L3/a.md (call call_2; proposed)"]


def test_every_refusal_is_logged_with_its_reason(store):
    with structlog.testing.capture_logs() as logs:
        consolidate(store, [note(1), note(3, "b")], [run(2)], task_id="t6", task_succeeded=True, author="w", base=0)
    refused = [e for e in logs if e["event"] == "memory_change_refused"]
    assert [(e["path"], e["reason"], e["task_id"]) for e in refused] == [("L3/a.md", NO_EVIDENCE, "t6")]
    assert [e["generation"] for e in logs if e["event"] == "memory_consolidated"] == [1]
    json.dumps(refused)  # plain data, fit for a JSON log line
