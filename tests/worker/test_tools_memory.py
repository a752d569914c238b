"""The worker's view of memory (a real store): snapshot reads, access stats, staging, the memory tools, ask_user."""
from __future__ import annotations

import pytest

from configs import load_settings
from memory_shared import AccessLog, MemoryStore
from memory_shared.gate import Execution, StagedChange, consolidate
from worker.memview import MemoryView
from worker.tools import REGISTRY, ToolContext

FACTS = "# L2: verified facts\n\n## Environment\n- python is 3.11\n\n## User preferences\n"
SOP = "---\nname: fetch\ncategory: data\ndescription: fetch a file\ncreated: 2025-01-01\nevidence: t0\n---\nsteps\n"


@pytest.fixture
def store(store):
    """The shared empty store, seeded with the files the tools read."""
    with store.transaction(message="seed", author="test") as txn:
        txn.write("L2/facts.md", FACTS)
        txn.write("L3/data/fetch.md", SOP)
        txn.write("L2/windows.md", "one\r\ntwo\r\n")
    return store


@pytest.fixture
def ctx(store, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with store.snapshot() as snapshot:
        view = MemoryView(store, snapshot, "task-7", AccessLog(store.root))
        yield ToolContext(task_id="task-7", workdir=work, settings=load_settings(), memory=view, seq=1, call_id="c1")


def call(ctx: ToolContext, name: str, **args):
    spec = REGISTRY[name]
    ctx.seq += 1  # as the loop does before each dispatch
    ctx.call_id = f"c{ctx.seq}"
    return spec.run(ctx, spec.args.model_validate(args))


def head_text(store: MemoryStore, rel: str) -> str | None:
    with store.snapshot() as snap:
        path = snap.path / rel
        return path.read_text(encoding="utf-8") if path.is_file() else None


# ---- reads

def test_read_memory_file_and_record_access(ctx, store):
    result = call(ctx, "file_read", path="memory/L2/facts.md")
    assert result.ok and not result.evidence  # reading memory verifies nothing about the world
    assert result.output.startswith("[memory/L2/facts.md: 6 lines]\n1|# L2: verified facts")
    assert "4|- python is 3.11" in result.output
    call(ctx, "file_read", path="memory/L3/data/fetch.md", keyword="steps")
    counts = AccessLog(store.root).counts()
    assert counts["L2/facts.md"] == 1 and counts["L3/data/fetch.md"] == 1
    assert AccessLog(store.root).tasks_using("L2/facts.md") == 1
    assert {e["task"] for e in AccessLog(store.root).entries()} == {"task-7"}


def test_memory_directory_listing(ctx):
    result = call(ctx, "file_read", path="memory/L3")
    assert result.ok and result.output.splitlines() == ["[memory/L3: directory, 3 entries]", "README.md", "data/",
                                                            "orchestration/"]
    top = call(ctx, "file_read", path="memory").output
    assert "L2/" in top and "L3/" in top


def test_missing_memory_file_suggests_names(ctx):
    result = call(ctx, "file_read", path="memory/L2/fact.md")
    assert not result.ok
    assert result.output.startswith("memory/L2/fact.md: no such file; closest: memory/L2/facts.md")


def test_memory_dotdot_refused(ctx):
    result = call(ctx, "file_read", path="memory/../../etc/passwd")
    assert not result.ok and "'..' is not allowed in memory paths" in result.output


def test_snapshot_is_pinned(ctx, store):
    with store.transaction(message="later", author="other") as txn:
        txn.write("L2/facts.md", "replaced by another task\n")
    assert "python is 3.11" in call(ctx, "file_read", path="memory/L2/facts.md").output


# ---- staging

@pytest.mark.parametrize("name, args", [
    ("file_write", {"path": "memory/L2/new.md", "content": "x\n"}),
    ("file_patch", {"path": "memory/L2/facts.md", "old_content": "3.11", "new_content": "3.12"}),
])
def test_memory_writes_refused_before_long_term_update(ctx, store, name, args):
    generation = store.snapshot().generation
    result = call(ctx, name, **args)
    assert not result.ok and "call start_long_term_update first" in result.output
    assert ctx.memory.changes == [] and not ctx.memory.staging_enabled
    assert store.snapshot().generation == generation
    assert not (ctx.workdir / "memory").exists()


def test_start_long_term_update_returns_rules_and_enables_staging(ctx):
    result = call(ctx, "start_long_term_update")
    assert result.ok and not result.evidence
    assert "No Execution, No Memory" in result.output  # the L0 rules of the snapshot
    assert "memory/L2/facts.md" in result.output and "memory/L1/index.md" in result.output
    assert "front matter" in result.output
    assert ctx.memory.staging_enabled


def test_staged_write_patch_and_reads_see_them(ctx, store):
    generation = store.snapshot().generation
    call(ctx, "start_long_term_update")
    wrote = call(ctx, "file_write", path="memory/L3/data/clean.md", content="clean steps\n")
    patched = call(ctx, "file_patch", path="memory/L2/facts.md", old_content="- python is 3.11\n",
                   new_content="- python is 3.11\n- uv is installed\n")
    appended = call(ctx, "file_write", path="memory/L3/data/clean.md", content="more\n", mode="append")
    for result in (wrote, patched, appended):
        assert result.ok and not result.evidence and "staged" in result.output
    assert ctx.memory.changes == [
        StagedChange(seq=3, call_id="c3", op="write", path="L3/data/clean.md", text="clean steps\n"),
        StagedChange(seq=4, call_id="c4", op="patch", path="L2/facts.md", old="- python is 3.11\n",
                     new="- python is 3.11\n- uv is installed\n"),
        StagedChange(seq=5, call_id="c5", op="write", path="L3/data/clean.md", text="clean steps\nmore\n"),
    ]
    assert "- uv is installed" in call(ctx, "file_read", path="memory/L2/facts.md").output
    assert "2|more" in call(ctx, "file_read", path="memory/L3/data/clean.md").output
    assert "clean.md" in call(ctx, "file_read", path="memory/L3/data").output
    # nothing reached the store or the workdir: the gate commits at the end of the task
    assert store.snapshot().generation == generation
    assert head_text(store, "L3/data/clean.md") is None
    assert not (ctx.workdir / "memory").exists()


@pytest.mark.parametrize("old, message", [("nothing like this", "matched 0 times"), ("- ", "matched 3 times")])
def test_staged_patch_match_errors(ctx, old, message):
    call(ctx, "start_long_term_update")
    call(ctx, "file_write", path="memory/L2/facts.md", content="- a\n- b\n", mode="append")
    result = call(ctx, "file_patch", path="memory/L2/facts.md", old_content=old, new_content="x")
    assert message in result.output
    assert not result.ok and [c.op for c in ctx.memory.changes] == ["write"]


def test_staged_patch_of_missing_file(ctx):
    call(ctx, "start_long_term_update")
    result = call(ctx, "file_patch", path="memory/L2/none.md", old_content="a", new_content="b")
    assert not result.ok and "does not exist; create it with file_write" in result.output


def test_staged_patch_keeps_crlf(ctx):
    call(ctx, "start_long_term_update")
    assert call(ctx, "file_patch", path="memory/L2/windows.md", old_content="one\ntwo", new_content="1\n2").ok
    change = ctx.memory.changes[-1]
    assert (change.old, change.new) == ("one\r\ntwo", "1\r\n2")
    assert ctx.memory.read("L2/windows.md") == "1\r\n2\r\n"


def test_staged_changes_pass_the_gate_and_patches_rebase(ctx, store):
    base = ctx.memory.generation
    ok = call(ctx, "code_run", script="print('verified')")
    call(ctx, "start_long_term_update")
    call(ctx, "file_patch", path="memory/L2/facts.md", old_content="## User preferences\n",
         new_content="## User preferences\n- short answers\n")
    call(ctx, "file_write", path="memory/L3/data/clean.md", content="clean steps\n")
    # another task commits to the same file meanwhile; the staged patch still applies on the new HEAD
    with store.transaction(message="other", author="other") as txn:
        txn.patch("L2/facts.md", "- python is 3.11\n", "- python is 3.12\n")
    executions = [Execution(seq=2, call_id="c2", tool="code_run", ok=ok.ok, evidence=ok.evidence)]
    report = consolidate(store, ctx.memory.changes, executions, task_id="task-7", task_succeeded=True,
                         author="worker:task-7", base=base)
    assert report.generation is not None and not report.refused
    facts = head_text(store, "L2/facts.md")
    assert "- python is 3.12" in facts and "- short answers" in facts
    assert head_text(store, "L3/data/clean.md") == "clean steps\n"


def test_view_without_store():
    view = MemoryView(None, None, "t", None)
    assert view.read("L1/index.md") is None and view.list("") == [] and not view.exists("x")
    with pytest.raises(PermissionError, match="call start_long_term_update first"):
        view.stage_write("L2/facts.md", "x")
    view.enable_staging()
    assert view.stage_write("L2/facts.md", "x\n", "append") == "x\n"
    assert view.read("L2/facts.md") == "x\n" and view.exists("L2/facts.md")


def test_long_term_update_without_memory(tmp_path):
    ctx = ToolContext(task_id="t", workdir=tmp_path, settings=load_settings(), memory=None)
    result = call(ctx, "start_long_term_update")
    assert not result.ok and "no memory tier" in result.output


# ---- working memory and ask_user

def test_checkpoint_sets_key_info(ctx):
    result = call(ctx, "update_working_checkpoint", key_info="  goal: X; next: Y  ")
    assert result.ok and not result.evidence
    assert ctx.key_info == "goal: X; next: Y"
    long = call(ctx, "update_working_checkpoint", key_info="z" * 5000)
    assert len(ctx.key_info) == 2000 and "cut to its first 2000 chars" in long.output


def test_ask_user_interactive(ctx):
    asked = []
    ctx.interactive = True
    ctx.ask = lambda question, candidates: asked.append((question, candidates)) or "blue"
    result = call(ctx, "ask_user", question="Which colour?", candidates=["red", "blue"])
    assert asked == [("Which colour?", ["red", "blue"])]
    assert result.stop is None and not result.evidence and "blue" in result.output


@pytest.mark.parametrize("interactive, ask", [(False, None), (True, None), (False, lambda q, c: "x")])
def test_ask_user_without_a_person_is_told_once_then_stops(ctx, interactive, ask):
    ctx.interactive, ctx.ask = interactive, ask
    first = call(ctx, "ask_user", question="What should I do next?")
    assert first.stop is None and not first.evidence and first.output.startswith("nobody is watching this task")
    result = call(ctx, "ask_user", question="Which colour?")
    assert result.stop == "needs_input" and not result.evidence
    assert result.data == {"question": "Which colour?", "candidates": []}


def test_code_run_sees_the_pinned_snapshot(ctx):
    result = call(ctx, "code_run", type="bash", script='cat "$GA_MEMORY/L2/facts.md"')
    assert result.ok and "- python is 3.11" in result.output
