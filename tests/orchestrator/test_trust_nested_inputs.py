"""A nested fan-out's inputs are copied by the parent's process, outside the sandbox, after it checked them: a
script that swaps a checked input for a symlink before the copy must not get what the link points to.

Through a real `ga fanout`, the scripted model over real HTTP and real bubblewrap. No race: the swap is made to
happen between the check and the copy. The nested run has two tasks, one at a time; the first task's script
waits until the parent's helper has swapped the second task's input for a link into GA_HOME's sessions (which
every sandbox hides), so when the second task's inputs are copied the link is there.
"""
from __future__ import annotations

import json
from pathlib import Path

from tests.ga_support import run_ga
from worker.scripted import ScriptedServer

SECRET = "SESSION-do-not-leak-7313"

# the parent task's script: writes two inputs, starts a helper that swaps b.txt for a link once the nested
# run has started (its check is done then), and fans out; it prints each nested task's outcome
PARENT = """
import os, subprocess, sys
from orchestrator import fanout
open('a.txt', 'w').write('first input\\n')
open('b.txt', 'w').write('checked input\\n')
helper = '''
import glob, os, time
deadline = time.time() + 120
while not glob.glob('../runs/*/tasks/first') and time.time() < deadline:
    time.sleep(0.05)
os.remove('b.txt')
os.symlink(%r, 'b.txt')
'''
os.symlink('a.txt', 'link.txt')
try:  # a link the script made is refused at once, whatever it points to
    fanout({'tasks': [{'id': 'linked', 'prompt': 'LINKED', 'inputs': ['link.txt']}]}, display='quiet')
    print('linked ran')
except Exception as exc:
    print('refused:', exc)
subprocess.Popen([sys.executable, '-c', helper % SECRET_PATH])
run = fanout({'concurrency': 1, 'retries': 0, 'tasks': [
    {'id': 'first', 'prompt': 'FIRST-NESTED', 'inputs': ['a.txt']},
    {'id': 'second', 'prompt': 'SECOND-NESTED', 'inputs': ['b.txt']}]}, display='quiet')
for record in run.results:
    print('NESTED', record['task_id'], record['status'], record['reason'])
"""

# the first nested task waits (up to a minute) until the parent's b.txt is a link: its workdir is
# runs/<run>/tasks/parent/runs/<nested>/tasks/first/workdir, the parent's is runs/<run>/tasks/parent/workdir
WAIT_FOR_SWAP = "for i in $(seq 600); do [ -L ../../../../../workdir/b.txt ] && break; sleep 0.1; done; ls -l ../../../../../workdir/b.txt"


def code_run_then_echo(match: str, script: str, kind: str) -> dict:
    return {"match": match, "turns": [
        {"content": "running", "tool_calls": [{"name": "code_run", "arguments": {"type": kind, "script": script}}]},
        {"content": "Output:", "echo_last_tool_result": True}]}


def test_a_nested_input_swapped_for_a_symlink_after_the_check_is_not_followed(tmp_path: Path, ga_home: Path) -> None:
    session = ga_home / "sessions" / "other.json"
    session.parent.mkdir(parents=True)
    session.write_text(SECRET + "\n")
    parent = PARENT.replace("SECRET_PATH", repr(str(session)))
    script = {"tasks": [code_run_then_echo("PARENT-TASK", parent, "python"),
                        code_run_then_echo("FIRST-NESTED", WAIT_FOR_SWAP, "bash"),
                        code_run_then_echo("SECOND-NESTED", "cat b.txt", "bash")]}
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        (tmp_path / "tasks.yaml").write_text(json.dumps({"tasks": [{"id": "parent", "prompt": "PARENT-TASK"}],
                                                         "defaults": {"model": f"scripted@{server.base_url}"}}))
        done = run_ga("fanout", "tasks.yaml", "--json", "--no-preflight", cwd=tmp_path, timeout=400)
    assert done.stdout.strip(), done.stderr[-2000:]
    answer = json.loads(done.stdout)["results"][0]["answer"]
    (parent_run,) = (tmp_path / "runs").glob("*/tasks/parent")
    assert (parent_run / "workdir" / "b.txt").is_symlink(), answer  # the swap was made
    assert "NESTED first succeeded" in answer, answer  # and made while the first task waited
    leaked = [p for p in (tmp_path / "runs").rglob("*") if p.is_file() and not p.is_symlink()
              and SECRET in p.read_text(errors="replace")]
    assert not leaked and SECRET not in answer and SECRET not in done.stdout, leaked
    assert "NESTED second failed" in answer and "b.txt" in answer and "symbolic link" in answer, answer
    assert "refused: nested fan-out refused: task linked's input" in answer and "linked ran" not in answer, answer


def test_a_top_level_input_that_is_the_users_symlink_is_still_followed(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data-v2.csv").write_text("a,b\n1,2\n")
    (tmp_path / "current.csv").symlink_to(shared / "data-v2.csv")
    script = {"tasks": [code_run_then_echo("READ-IT", "cat current.csv; ls -l current.csv", "bash")]}
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        (tmp_path / "tasks.yaml").write_text(json.dumps({
            "allow_paths": [str(shared)], "defaults": {"model": f"scripted@{server.base_url}"},
            "tasks": [{"id": "reader", "prompt": "READ-IT", "inputs": ["current.csv"]}]}))
        done = run_ga("fanout", "tasks.yaml", "--json", "--no-preflight", cwd=tmp_path, timeout=400)
    assert done.stdout.strip(), done.stderr[-2000:]
    (result,) = json.loads(done.stdout)["results"]
    assert result["status"] == "succeeded" and "1,2" in result["answer"] and "->" not in result["answer"], result
