"""`ga memory ...` on the real Typer app and real stores under the test's GA_HOME."""
from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path

import pytest

from memory_shared import AccessLog, Archive, MemoryStore
from tests.ga_support import invoke_ga, run_ga

ga_memory = partial(invoke_ga, "memory")  # `ga memory ARGS`


def one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


@pytest.fixture
def store_root(ga_home: Path) -> Path:
    """The store the `store` fixture opens is the one `ga memory init` made under GA_HOME."""
    assert ga_memory("init").exit_code == 0
    return ga_home / "memory"


def commit(store: MemoryStore, rel: str, text: str) -> int:
    with store.transaction(message=f"write {rel}", author="test") as txn:
        txn.write(rel, text)
    return txn.generation


@pytest.mark.parametrize("command", [["show"], ["log"], ["diff", "0", "1"], ["verify"], ["gc", "--keep", "1"],
                                     ["archive"], ["stats"]])
def test_a_missing_store_is_one_line_with_the_fix(ga_home, command):
    one_line_error(ga_memory(*command), f"no memory store at {ga_home / 'memory'}", "run `ga memory init`")
    assert not (ga_home / "memory").exists()


def test_init_is_idempotent_and_show_lists_files_and_l1(ga_home):
    first = ga_memory("init")
    assert first.exit_code == 0 and "created" in first.stdout and "generation 0" in first.stdout
    again = ga_memory("init")
    assert again.exit_code == 0 and "already exists" in again.stdout
    shown = ga_memory("show")
    assert shown.exit_code == 0
    assert "L2/facts.md" in shown.stdout and "L1 index" in shown.stdout and "Verified facts" in shown.stdout


def test_show_a_file_a_folder_and_json(store):
    commit(store, "L3/deploy.md", "step one\n")
    assert ga_memory("show", "L3/deploy.md").stdout == "step one\n"
    assert json.loads(ga_memory("show", "L3", "--json").stdout) == {
        "generation": 1, "files": ["L3/README.md", "L3/deploy.md", "L3/orchestration/fanout_map_reduce.md"]}
    assert json.loads(ga_memory("show", "L3/deploy.md", "--json").stdout) == {
        "generation": 1, "path": "L3/deploy.md", "text": "step one\n", "provenance": []}
    one_line_error(ga_memory("show", "L3/deploy.md", "-g", "0"), "not in generation 0")
    one_line_error(ga_memory("show", "../etc/passwd"), "plain relative path")
    one_line_error(ga_memory("show", "-g", "9"), "generation 9")


def test_log_json_lists_every_commit(store):
    commit(store, "L3/a.md", "a\n")
    commit(store, "L3/b.md", "b\n")
    commits = json.loads(ga_memory("log", "--json").stdout)
    assert [(c["generation"], c["parent"], c["author"]) for c in commits] == [(0, None, "ga"), (1, 0, "test"), (2, 1, "test")]
    assert commits[2]["paths"] == ["L3/b.md"] and commits[2]["message"] == "write L3/b.md"
    assert [c["generation"] for c in json.loads(ga_memory("log", "--json", "-n", "1").stdout)] == [2]
    table = ga_memory("log")
    assert table.exit_code == 0 and "write L3/b.md" in table.stdout


def test_diff_by_path_and_patch(store):
    commit(store, "L3/a.md", "one\n")
    with store.transaction(message="edit", author="test") as txn:
        txn.patch("L3/a.md", "one\n", "two\n")
        txn.delete("L3/README.md")
    assert json.loads(ga_memory("diff", "0", "2", "--json").stdout) == [
        {"path": "L3/README.md", "kind": "deleted"}, {"path": "L3/a.md", "kind": "added"}]
    patch = ga_memory("diff", "1", "2", "--patch")
    assert patch.exit_code == 0 and "-one" in patch.stdout and "+two" in patch.stdout and "modified" in patch.stdout
    one_line_error(ga_memory("diff", "0", "7"), "generation 7")
    assert ga_memory("diff", "0", "x").exit_code == 2  # not a number: Typer's usage error


def test_verify_healthy_then_head_damaged_is_recomputed(store, ga_home):
    healthy = ga_memory("verify")
    assert healthy.exit_code == 0 and "ok" in healthy.stdout
    assert json.loads(ga_memory("verify", "--json").stdout)["ok"] is True
    commit(store, "L3/kept.md", "kept\n")
    for damage in ("7\n", "garbage\n", "0\n"):  # ahead, garbage, behind: HEAD is derived, never obeyed
        (ga_home / "memory/HEAD").write_text(damage)
        result = ga_memory("verify")  # reports it and what repair would do; changes nothing (issue 22)
        assert result.exit_code == 2, result.output
        assert f"HEAD was {damage.strip()!r}" in result.output and "repair would: set HEAD to generation 1" in result.output
        assert (ga_home / "memory/HEAD").read_text() == damage
        assert ga_memory("show", "L3/kept.md").stdout == "kept\n"  # any other command recomputes it
        assert (ga_home / "memory/HEAD").read_text() == "1\n"
    (ga_home / "memory/HEAD").unlink()
    assert "HEAD was missing" in ga_memory("verify").output and not (ga_home / "memory/HEAD").exists()
    assert ga_memory("repair").exit_code == 0 and (ga_home / "memory/HEAD").read_text() == "1\n"
    assert ga_memory("verify").stdout.startswith("ok")


def test_verify_names_a_changed_file_and_repair_restores_it(store, ga_home):
    commit(store, "L3/a.md", "original\n")
    commit(store, "L3/b.md", "b\n")
    victim = ga_home / "memory/generations/2/L3/a.md"
    os.chmod(victim, 0o644)
    with open(victim, "a") as fh:
        fh.write("injected\n")
    error = one_line_error(ga_memory("verify"), "L3/a.md changed in place", "generations 1, 2 share it",
                           "ga memory repair")
    assert "--quick" not in error and ga_memory("verify", "--quick").exit_code == 2
    one_line_error(ga_memory("show", "L3/a.md"), "generation 2", "damaged", "ga memory repair")
    assert "would: restored L3/a.md" in ga_memory("repair", "--dry-run").stdout
    assert ga_memory("verify").exit_code == 2  # the dry run changed nothing
    repaired = ga_memory("repair")
    assert repaired.exit_code == 0 and "done: restored L3/a.md in generations 1, 2" in repaired.stdout
    assert ga_memory("verify").exit_code == 0 and ga_memory("show", "L3/a.md").stdout == "original\n"
    assert any(p.name.endswith("L3__a.md") for p in (ga_home / "memory/quarantine").rglob("*"))


def test_gc_keeps_the_newest(store):
    for i in range(5):
        commit(store, f"L3/n{i}.md", f"{i}\n")
    result = ga_memory("gc", "--keep", "2")
    assert result.exit_code == 0 and "removed 4 generation(s): 0..3" in result.stdout
    assert ga_memory("show", "-g", "4").exit_code == 0
    one_line_error(ga_memory("show", "-g", "1"), "generation 1")
    assert ga_memory("verify").exit_code == 0
    assert ga_memory("gc", "--keep", "0").exit_code == 2


def test_archive_status_search_and_compress(store, tmp_path):
    history = tmp_path / "history.jsonl"
    history.write_text(json.dumps({"sent": [{"role": "user", "content": "count the files"}],
                                   "received": {"role": "assistant", "content": "there are 3"}}) + "\n")
    Archive(store.root).store_session("task-9", history)
    status = json.loads(ga_memory("archive", "--json").stdout)
    assert status["raw_sessions"] == 1
    [record] = json.loads(ga_memory("archive", "--task", "task-9", "--json").stdout)
    assert record["user"] == ["count the files"] and record["final"] == "there are 3"
    assert json.loads(ga_memory("archive", "--search", "nothing like it", "--json").stdout) == []
    shown = ga_memory("archive", "--search", "COUNT")
    assert "task-9" in shown.stdout and "1 session(s)" in shown.stdout
    assert ga_memory("archive", "--compress", "--older-than", "0").exit_code == 0  # today's session stays raw
    assert json.loads(ga_memory("archive", "--json").stdout)["raw_sessions"] == 1
    one_line_error(ga_memory("archive", "--date", "yesterday"), "YYYY-MM-DD")


def test_stats_counts_reads(store):
    log = AccessLog(store.root)
    for task in ("a", "a", "b"):
        log.record("L3/deploy.md", task)
    log.record("L2/facts.md", "a")
    assert json.loads(ga_memory("stats", "--json").stdout) == {"L3/deploy.md": 3, "L2/facts.md": 1}
    assert json.loads(ga_memory("stats", "--json", "--tasks", "--prefix", "L3/").stdout) == {"L3/deploy.md": 2}


def test_demo_runs_for_real_in_a_subprocess(tmp_path):
    root = tmp_path / "demo"
    done = run_ga("memory", "demo", "--dir", str(root), "--processes", "4", "--commits", "3")
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())  # drawn at 80 columns: a sentence may go on the next line
    assert "12/12 files, 12/12 patched lines, lost updates: 0" in out
    assert "stable" in out and "commit conflict on L3/demo/contested.md" in out and "alice" in out
    assert "accepted [patch L2/facts.md]" in out and "no evidence before this change" in out
    assert "verify: ok" in out
    demo = MemoryStore(root)
    assert demo.verify() == [] and demo.head() == 1 + 12 + 1 + 1  # slots, commits, alice, the gate


def test_demo_refuses_a_directory_that_is_not_a_store(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    one_line_error(ga_memory("demo", "--dir", str(tmp_path)), "not empty and not a memory store")


def task_commit(store: MemoryStore, task: str, line: str, key: str) -> str:
    """A task's gated commit of an L2 fact nothing verified: it waits as a proposal (memory.admit verified)."""
    from memory_shared.gate import Execution, GatePolicy, StagedChange, consolidate

    change = StagedChange(2, "call_2", "patch", "L2/facts.md", old="## Environment\n", new=f"## Environment\n{line}\n")
    policy = GatePolicy(admit="verified", who={"run": key.split("/")[0], "task": task, "model": "m1"})
    report = consolidate(store, [change], [Execution(1, "call_1", "code_run", True, True, exit_code=0,
                                                     output_sha256="ab" * 32)],
                         task_id=task, task_succeeded=True, author=f"worker:{task} [{key}]", base=store.head(),
                         key=key, policy=policy)
    assert report.proposal is not None and report.accepted == []
    return report.proposal


def test_review_accept_reject_and_revert(store):
    accepted = task_commit(store, "t1", "- python is 3.11", "run-1/t1/1")
    rejected = task_commit(store, "t2", "- the deploy password is hunter2", "run-1/t2/1")
    review = ga_memory("review")
    assert review.exit_code == 0, review.output
    for needle in (accepted, rejected, "from task t1 of run run-1, model m1", "backed by: code_run call_1 exit 0",
                   "+- python is 3.11", "not verified"):
        assert needle in review.stdout, needle
    shown = ga_memory("review", "--json")
    assert {p["id"]: p["state"] for p in json.loads(shown.stdout)} == {accepted: "open", rejected: "open"}

    before_accept = store.head()
    done = ga_memory("accept", accepted[:6])
    assert done.exit_code == 0 and "accepted proposal" in done.stdout, done.output
    with store.snapshot() as snap:
        assert "- python is 3.11" in snap.read("L2/facts.md")
    provenance = ga_memory("show", "L2/facts.md", "--provenance")
    assert "accepted by " in provenance.stdout and "task t1" in provenance.stdout

    assert ga_memory("reject", rejected, "--note", "a secret, not a fact").exit_code == 0
    assert "no proposals wait" in ga_memory("review").stdout
    every = ga_memory("review", "--all")
    assert "(rejected)" in every.stdout and "a secret, not a fact" in every.stdout  # nothing is deleted
    one_line_error(ga_memory("accept", rejected), "was rejected")
    one_line_error(ga_memory("reject", "nosuch"), "no proposal 'nosuch'")

    reverted = ga_memory("revert", str(before_accept))
    assert reverted.exit_code == 0 and "reverted to generation" in reverted.stdout, reverted.output
    with store.snapshot() as snap:
        assert "- python is 3.11" not in snap.read("L2/facts.md")
    assert "(rejected)" in ga_memory("review", "--all").stdout  # a revert keeps the decisions
    log = ga_memory("log", "--run", "run-1")
    assert log.exit_code == 0 and "t1" in log.stdout and "t2" in log.stdout
    assert "t2" not in ga_memory("log", "--task", "t1").stdout.replace("run-1/t1", "")
    one_line_error(ga_memory("revert", "99"), "older generation")
    assert store.verify() == []
