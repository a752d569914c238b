"""A nested fan-out's inputs are copied by the parent's process, outside the sandbox, after it checked them: a
script that swaps a checked input for a symlink before the copy must not get what the link points to.

Through a real `ga fanout`, the scripted model over real HTTP and real bubblewrap. No race: the swap is made to
happen between the check and the copy. The nested run has two tasks, one at a time; the first task's script
waits until the parent's helper has swapped the second task's input for a link into GA_HOME's sessions (which
every sandbox hides), so when the second task's inputs are copied the link is there.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.ga_support import run_ga
from tests.memory_shared.memory_attack_support import tool_outputs
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


# ---- issue 30, item 4: nested runs with the task's rights ----

def ga_run_parent(tmp_path: Path, script: dict, env: dict | None = None, timeout: float = 400) -> dict:
    """`ga run` in tmp_path/proj whose scripted model plays the parent task (and, by `match`, its nested tasks)."""
    work = tmp_path / "proj"
    work.mkdir(exist_ok=True)
    with ScriptedServer(script, log_path=tmp_path / "requests.jsonl") as server:
        done = run_ga("run", "PARENT-TASK", "--model", f"scripted@{server.base_url}", "--json", "--no-preflight",
                      cwd=work, env=env, timeout=timeout)
    assert done.stdout.strip(), done.stderr[-2000:]
    return json.loads(done.stdout)


FOREIGN_MODELS = """
from orchestrator import fanout
for model in ATTACKER_MODELS:
    try:
        run = fanout({'tasks': [{'id': 'courier', 'prompt': 'SECRET-PAYLOAD-1234', 'model': model}]}, display='quiet')
        print('ran', model, run.status)
    except Exception as exc:
        print('refused:', exc)
"""


def test_a_nested_run_cannot_send_its_tasks_to_a_model_it_names(tmp_path: Path) -> None:
    """The attack: `model: scripted@http://ANY/v1` made ga post what the task chose to any URL and hand the answer
    back, a two-way channel out of the sandbox. A scripted model file is another model the user never chose."""
    listener = ScriptedServer({"tasks": [{"match": ".*", "turns": [{"content": "INBOUND-FROM-OUTSIDE"}]}]})
    listener.start()
    model_file = tmp_path / "proj" / "courier.yaml"
    model_file.parent.mkdir()
    model_file.write_text("tasks: [{match: '.*', turns: [{content: 'FROM-A-FILE'}]}]\n")
    models = [f"scripted@{listener.base_url}", f"scripted:{model_file}", "planted-in-the-project"]
    (tmp_path / "proj" / "models.yaml").write_text(
        f"models:\n  planted-in-the-project:\n    base_url: {listener.base_url}\n    model: m\n")
    try:
        result = ga_run_parent(tmp_path, {"tasks": [code_run_then_echo(
            "PARENT-TASK", FOREIGN_MODELS.replace("ATTACKER_MODELS", repr(models)), "python")]})
    finally:
        listener.stop()
    answer = result["answer"]
    assert not listener.records, list(listener.records)[:1]
    assert "ran " not in answer and "INBOUND" not in answer and "FROM-A-FILE" not in answer, answer
    assert answer.count("refused: nested fan-out refused: task courier names model") == 2, answer
    assert "which the user has not configured" in answer
    # the third is refused sooner: a project models.yaml may not add a model at all (worker/policy.py's rule)
    assert "models.planted-in-the-project is refused in a project file" in answer, answer


def other_users_file(tmp_path: Path, text: str, name: str) -> Path:
    """A file of another user (uid 65534), mode 0600, in a folder everyone may enter: not the sandbox's to read."""
    import os
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="ga-other-user-", dir="/var/tmp"))
    folder.chmod(0o755)
    path = folder / name
    path.write_text(text)
    path.chmod(0o600)
    os.chown(path, 65534, 65534)
    return path


OTHER_USERS = """
import subprocess
from orchestrator import fanout
print('sandbox reads:', subprocess.run(['cat', KEY], capture_output=True, text=True).stderr.strip()[:80])
specs = [{'tasks': [{'id': 'copier', 'prompt': 'CAT-THE-INPUT', 'inputs': [KEY]}], 'allow_paths': [KEY_FOLDER]},
         {'matrix': {'from': ROWS, 'template': 'ECHO {{line}}'}, 'allow_paths': [ROWS_FOLDER]}]
for spec in specs:
    try:
        run = fanout(spec, display='quiet')
        print('ran', [r['answer'] for r in run.results])
    except Exception as exc:
        print('refused:', exc)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's file takes root")
def test_a_nested_input_the_sandbox_cannot_read_is_not_copied_for_it(tmp_path: Path) -> None:
    """ga runs as root; root in the sandbox has no capabilities, so another user's 0600 file is unreadable there.
    The attack had ga copy it into a nested task's directory (and a matrix file becomes the nested prompts)."""
    key = other_users_file(tmp_path, "OTHER-USERS-KEY-do-not-leak\n", "id_rsa")
    rows = other_users_file(tmp_path, "line\nOTHER-USERS-ROW-do-not-leak\n", "rows.csv")
    try:
        parent = OTHER_USERS
        for name, value in (("KEY_FOLDER", key.parent), ("ROWS_FOLDER", rows.parent), ("KEY", key), ("ROWS", rows)):
            parent = parent.replace(name, repr(str(value)))
        result = ga_run_parent(tmp_path, {"tasks": [
            code_run_then_echo("PARENT-TASK", parent, "python"),
            code_run_then_echo("CAT-THE-INPUT", "cat id_rsa", "bash"),
            {"match": "ECHO", "turns": [{"content": "echoed"}]}]})
    finally:
        import shutil

        shutil.rmtree(key.parent, ignore_errors=True)
        shutil.rmtree(rows.parent, ignore_errors=True)
    answer = result["answer"]
    assert "sandbox reads: cat:" in answer and "Permission denied" in answer, answer  # the sandbox cannot read it
    assert "do-not-leak" not in answer and "ran " not in answer, answer
    assert answer.count("is not readable by the task's sandbox") == 2, answer
    leaked = [p for p in (tmp_path / "proj" / "runs").rglob("*") if p.is_file() and "do-not-leak" in p.read_text(errors="replace")]
    assert not leaked, leaked


TASK_LIMIT = 20_000
SPENDER = """
import json, os, urllib.error, urllib.request
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps({"messages": [{"role": "user", "content": "inner " + "x" * 32_000}]}).encode(),
    headers={"Content-Type": "application/json"})
try:
    print("INNER", json.load(urllib.request.urlopen(request, timeout=60))["usage"]["total_tokens"])
except urllib.error.HTTPError as exc:
    print("REFUSED", exc.code)
"""
FAN_OUT_SPENDERS = """
import threading
from orchestrator import fanout
said = []
def nested(n):
    try:
        run = fanout({'concurrency': 4, 'tasks': [{'id': f'spender{n}{i}', 'prompt': 'SPEND-IT'} for i in range(4)]},
                     display='quiet')
        said.append(f"nested {n}: {run.status} {run.summary['usage']['total']}")
    except Exception as exc:
        said.append(f"nested {n}: refused: {exc}")
threads = [threading.Thread(target=nested, args=(n,)) for n in range(2)]  # two nested runs at once, too
for t in threads: t.start()
for t in threads: t.join()
print("\\n".join(said))
"""


def test_concurrent_nested_tasks_and_runs_share_what_the_parent_has_left(tmp_path: Path) -> None:
    """The parent task may spend 20,000 tokens. It starts two nested runs at once, of four tasks at once each,
    every one trying to spend ~8,000 through its gateway: before, each nested task was handed all that the parent
    had left, and the subtree spent several times the parent's limit."""
    result = ga_run_parent(tmp_path, {"tasks": [
        {"match": "inner", "turns": [{"content": "inner answer"}]},
        code_run_then_echo("SPEND-IT", SPENDER, "python"),
        code_run_then_echo("PARENT-TASK", FAN_OUT_SPENDERS, "python")]},
        env={"GA_WORKER__MAX_TOKENS": str(TASK_LIMIT)})
    output = "\n".join(tool_outputs(result["history_path"]))
    said = [line for line in output.splitlines() if line.startswith("nested ")]
    assert len(said) == 2 and any("succeeded" in line for line in said), output
    # `ga run --json`'s usage is the subtree's: the parent's own calls and what its nested runs spent
    assert result["nested_usage"]["runs"] == 2
    spent = result["usage"]["total"]
    assert spent <= TASK_LIMIT + 2_000, (result["usage"], said)
    # the nested runs spent what the parent had: it asks the model nothing more
    assert result["status"] == "limit" and "token limit" in result["reason"], result["reason"]
