"""Issue 22, items 1 and 8: what a task's code leaves in its writable area cannot make ga write elsewhere,
read without bound or hang; a timeout stops the turn's tool calls at once; a reply carries at most 16 calls.

Every attack goes through a real `ga` process (`ga run` or `ga fanout` with the in-process executor), the
scripted model over HTTP and real bubblewrap. The planted symlinks point at files outside the sandbox
(under this test's /tmp, which the sandbox's private /tmp hides from the script, never from ga's driver).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from ga_support import run_ga

from worker.scripted import ScriptedServer

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
ORIGINAL = "the original content, never to be changed\n"


def victims(tmp_path: Path, *names: str) -> list[Path]:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    paths = [outside / name for name in names]
    for path in paths:
        path.write_text(ORIGINAL)
    return paths


def unchanged(*paths: Path) -> bool:
    return all(not p.is_symlink() and p.read_text() == ORIGINAL for p in paths)


def code_run(script: str, timeout: int = 60, call_id: str | None = None) -> dict:
    call = {"name": "code_run", "arguments": {"type": "bash", "script": script, "timeout": timeout}}
    return {**call, "id": call_id} if call_id else call


def serve(turns: list[dict]) -> ScriptedServer:
    return ScriptedServer({"tasks": [{"match": ".*", "turns": turns}]})


# The sandbox keeps `.ga` and runs/ read-only, so a sandboxed script cannot plant there at all
# (tests/worker/test_trust_sandbox.py, tests/worker/test_trust_gateway.py).
# The driver's own defence is tested where no sandbox stands before it: the user's explicit opt-out.
UNSANDBOXED = {"GA_SANDBOX__MODE": "off"}


def ga_run(work: Path, server: ScriptedServer, env: dict | None = None) -> tuple[dict, str]:
    """`ga run` in `work` (its run directory goes to work/runs, where the task's scripts can write)."""
    done = run_ga("run", "attack", "--model", f"scripted@{server.base_url}", "--json", cwd=work, timeout=180, env=env)
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout), done.stderr


def ga_fanout(tmp_path: Path, server: ScriptedServer, timeout: float = 120) -> tuple[dict, Path]:
    """`ga fanout` of one task `attack` (in-process executor); returns its --json result and the run directory."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(yaml.safe_dump({"defaults": {"model": f"scripted@{server.base_url}", "timeout": timeout},
                                     "retries": 0, "tasks": [{"id": "attack", "prompt": "attack"}]}))
    done = run_ga("fanout", str(tasks), "--out", str(tmp_path / "runs"), "--json", cwd=tmp_path, timeout=300)
    assert done.stdout.strip(), done.stderr
    result = json.loads(done.stdout)
    return result, Path(result["run_dir"])


def a_workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def test_symlinked_script_and_output_names_are_never_written_through(tmp_path):
    """Row 1: `.ga/code_2.sh` and `.ga/code_3.out` planted as symlinks; two more code_runs follow. The files they
    point at stay as they were, both scripts run, and the task succeeds."""
    script_target, output_target = victims(tmp_path, "script-target", "output-target")
    work = a_workdir(tmp_path)
    with serve([{"tool_calls": [code_run(f"ln -s {script_target} .ga/code_2.sh; ln -s {output_target} .ga/code_3.out")]},
                {"tool_calls": [code_run("echo second-ran")]},
                {"tool_calls": [code_run("echo third-ran")]},
                {"echo_last_tool_result": True}]) as server:
        result, stderr = ga_run(work, server, UNSANDBOXED)
    assert unchanged(script_target, output_target)
    assert result["status"] == "succeeded", stderr
    assert "third-ran" in result["answer"]
    scripts = work / ".ga"
    assert not (scripts / "code_2.sh").is_symlink() and "second-ran" in (scripts / "code_2.sh").read_text()
    assert (scripts / "code_3.out").is_symlink()  # the planted name is skipped, not reused: the third is code_4
    assert "third-ran" in (scripts / "code_4.sh").read_text() and "third-ran" in (scripts / "code_4.out").read_text()


def test_a_symlinked_script_folder_is_refused_in_one_line(tmp_path):
    """`.ga` itself replaced by a symlink to a directory outside: the next code_run writes nothing there and says
    why in one line."""
    elsewhere = tmp_path / "outside-dir"
    elsewhere.mkdir()
    work = a_workdir(tmp_path)
    with serve([{"tool_calls": [code_run(f"mv .ga .ga-old && ln -s {elsewhere} .ga")]},
                {"tool_calls": [code_run("echo should-not-run")]},
                {"echo_last_tool_result": True}]) as server:
        result, stderr = ga_run(work, server, UNSANDBOXED)
    assert list(elsewhere.iterdir()) == []
    lines = result["answer"].strip().splitlines()
    assert len(lines) == 1 and ".ga: a symbolic link" in lines[0], result["answer"]


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_output_file_swapped_for_a_device_or_fifo_neither_hangs_nor_exhausts_memory(tmp_path, special):
    """Row 8: the running script replaces its own `.ga/code_1.out` with /dev/zero or a FIFO. ga reads the output
    through the file it created: the task finishes with the script's real output."""
    plant = "mkfifo .ga/code_1.out" if special == "fifo" else "ln -s /dev/zero .ga/code_1.out"
    work = a_workdir(tmp_path)
    with serve([{"tool_calls": [code_run(f"echo before-the-swap; rm .ga/code_1.out; {plant}")]},
                {"echo_last_tool_result": True}]) as server:
        result, stderr = ga_run(work, server, UNSANDBOXED)
    assert result["status"] == "succeeded", stderr
    assert "exit code 0" in result["answer"] and "before-the-swap" in result["answer"]
    assert "MemoryError" not in stderr


def test_ga_run_history_and_answer_symlinks_are_never_written_through(tmp_path):
    """Row 1 in `ga run`: its run directory sits in the working directory; the task points its history.jsonl and
    answer.md at files outside. Those stay as they were; the history and the answer are whole in ga's own files."""
    history_target, answer_target = victims(tmp_path, "history-target", "answer-target")
    work = a_workdir(tmp_path)
    plant = (f"d=$(ls -d runs/*/tasks/*) && rm -f $d/history.jsonl $d/answer.md && "
             f"ln -s {history_target} $d/history.jsonl && ln -s {answer_target} $d/answer.md && echo planted")
    with serve([{"tool_calls": [code_run(plant)]}, {"content": "the final answer"}]) as server:
        result, stderr = ga_run(work, server, UNSANDBOXED)
    assert unchanged(history_target, answer_target)
    assert result["status"] == "succeeded" and result["answer"] == "the final answer", stderr
    task_dir = Path(result["history_path"]).parent
    assert (task_dir / "answer.md").read_text() == "the final answer\n" and not (task_dir / "answer.md").is_symlink()


def test_planted_symlinks_in_the_run_directory_change_nothing_outside(tmp_path):
    """Row 1 through $GA_RUN_DIR in `ga fanout`: the task tries to point the run's results.jsonl, summary.json and
    its own history and answer at a file outside, and plants a FIFO and /dev/zero as nested summaries. The file
    stays as it was, the run's results are whole, and the parent neither hangs nor reads without bound."""
    (target,) = victims(tmp_path, "run-dir-target")
    plant = (f'for f in results.jsonl summary.json tasks/attack/history.jsonl tasks/attack/answer.md; do '
             f'rm -f "$GA_RUN_DIR/$f" 2>/dev/null; ln -s {target} "$GA_RUN_DIR/$f" 2>/dev/null; done; '
             'runs="$GA_RUN_DIR/tasks/attack/runs"; mkdir -p "$runs/a" "$runs/b" && mkfifo "$runs/a/summary.json" '
             '&& ln -s /dev/zero "$runs/b/summary.json"; echo planted')
    with serve([{"tool_calls": [code_run(plant)]}, {"content": "task done"}]) as server:
        result, run_dir = ga_fanout(tmp_path, server)
    assert unchanged(target)
    assert result["status"] == "succeeded" and [r["status"] for r in result["results"]] == ["succeeded"]
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    assert not (run_dir / "results.jsonl").is_symlink() and len(lines) == 1
    assert (run_dir / "tasks" / "attack" / "answer.md").read_text() == "task done\n"


def test_a_reply_of_10000_code_runs_stops_at_the_task_timeout(tmp_path):
    """Row 9: one reply with 10,000 code_run calls, each a script that would sleep 10 minutes, under a 3 s task
    timeout. The task fails by timeout, not one sandbox starts after the first is killed, and the worker's thread
    ends (an actor whose thread outlives the grace is marked tainted)."""
    calls = [code_run("sleep 600", timeout=600, call_id=f"c{i}") for i in range(10_000)]
    with serve([{"tool_calls": calls}, {"content": "never reached"}]) as server:
        result, run_dir = ga_fanout(tmp_path, server, timeout=3)
        requests = len(server.requests)
    (record,) = result["results"]
    assert record["status"] == "failed" and "timeout" in record["reason"], record
    assert requests == 1
    started = sorted(p.name for p in (run_dir / "tasks" / "attack" / "workdir" / ".ga").glob("code_*.out"))
    assert started == ["code_1.out"]
    (line,) = (run_dir / "results.jsonl").read_text().splitlines()
    assert json.loads(line)["actor"]["tainted"] is False  # the worker's thread returned within the cancel grace


def test_calls_past_the_per_reply_limit_are_refused_in_one_line(tmp_path):
    """Item 8: a reply with 40 code_run calls runs the first 16; each other call gets a result saying it was not
    run (the first of them why, in one line), so no call is left without one."""
    calls = [code_run(f"echo run-{i}", call_id=f"c{i}") for i in range(40)]
    with serve([{"tool_calls": calls}, {"content": "task done"}]) as server:
        result, run_dir = ga_fanout(tmp_path, server)
        second = server.requests[1]["messages"]
    assert result["status"] == "succeeded"
    ran = sorted((run_dir / "tasks" / "attack" / "workdir" / ".ga").glob("code_*.out"))
    assert len(ran) == 16
    answers = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
    assert sorted(answers) == sorted(f"c{i}" for i in range(40))
    assert all(answers[f"c{i}"].startswith("exit code 0") for i in range(16))
    refusal = answers["c16"]
    assert "\n" not in refusal and "at most 16 tool calls" in refusal and "23 after it were not run" in refusal
    assert all(answers[f"c{i}"] == "not run: over the per-reply limit" for i in range(17, 40))



def test_file_tools_reopen_a_checked_path_without_following_a_swapped_directory(tmp_path):
    """The file tools check a path, then open it; a script's background process can swap a directory for a
    symlink in between (file_write after a long web_execute_js, say). The open walks again from the root without
    following: the swapped directory is refused, the file outside stays as it was."""
    from worker.paths import PathError, open_checked, resolve_write

    (target,) = victims(tmp_path, "notes.md")
    work = a_workdir(tmp_path)
    (work / "sub").mkdir()
    checked = resolve_write("sub/notes.md", work)
    (work / "sub").rmdir()
    (work / "sub").symlink_to(target.parent)  # what the background process does between the check and the open
    with pytest.raises(OSError, match="sub: a symbolic link"):
        open_checked(checked, work, [], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    assert unchanged(target)
    with pytest.raises(PathError):
        resolve_write("sub/notes.md", work)  # checked afresh, the path is refused outright


def test_an_exploration_rerun_cannot_swap_its_output_file_for_a_link(tmp_path):
    """The exploration verifier re-runs a report's script in a fresh folder the script can write; the script
    points the output file at a secret outside. The output ga reports is what the script printed, not the secret."""
    from skilltree.verify import Artifact, rerun

    (secret,) = victims(tmp_path, "secret.txt")
    script = Artifact("probe.sh", f'echo printed-by-the-script; rm "$TMPDIR/output.txt"; ln -s {secret} "$TMPDIR/output.txt"\n',
                      True)
    code, output = rerun(script, [script], timeout=30)
    assert code == 0 and "printed-by-the-script" in output and ORIGINAL.strip() not in output


def test_a_session_whose_history_was_swapped_for_a_link_is_not_continued(tmp_path):
    """`ga run` leaves its session's history where its scripts can write: one points it at a file outside.
    `ga run --continue` then refuses in one line naming the link; the file outside stays as it was."""
    (target,) = victims(tmp_path, "history-target")
    work = a_workdir(tmp_path)
    plant = f"d=$(ls -d runs/*/tasks/*) && rm -f $d/history.jsonl && ln -s {target} $d/history.jsonl && echo planted"
    with serve([{"tool_calls": [code_run(plant)]}, {"content": "first done"}, {"content": "second done"}]) as server:
        first, stderr = ga_run(work, server, UNSANDBOXED)
        assert first["status"] == "succeeded", stderr
        again = run_ga("run", "go on", "--continue", first["task_id"], "--model", f"scripted@{server.base_url}",
                       "--json", cwd=work, timeout=180, env=UNSANDBOXED)
    assert again.returncode != 0 and "Traceback" not in again.stderr
    assert "history.jsonl: a symbolic link" in again.stderr
    assert unchanged(target)


@pytest.mark.parametrize("planted", ["leaf", "directory", "fifo", "inside"])
def test_file_write_never_writes_through_a_planted_link_or_special_file(tmp_path, planted):
    """file_write opens a plain relative path by one walk from the workdir's fd; whatever the task planted on the
    way (a symlink to a file or a directory outside, a FIFO) is refused in one line and nothing outside changes,
    the same as the full check decides; a link that stays inside the workdir is written through, as before."""
    from configs import load_settings
    from worker.tools import REGISTRY, ToolContext

    (target,) = victims(tmp_path, "notes.md")
    work = a_workdir(tmp_path)
    (work / "sub").mkdir()
    path = {"leaf": "sub/notes.md", "directory": "link/notes.md", "fifo": "sub/pipe", "inside": "sub/alias.md"}[planted]
    if planted == "leaf":
        (work / "sub" / "notes.md").symlink_to(target)
    elif planted == "directory":
        (work / "link").symlink_to(target.parent)
    elif planted == "fifo":
        os.mkfifo(work / "sub" / "pipe")
    else:
        (work / "sub" / "alias.md").symlink_to(work / "real.md")
    ctx = ToolContext(task_id="t1", workdir=work, settings=load_settings(), memory=None)
    spec = REGISTRY["file_write"]
    try:
        for mode in ("overwrite", "append", "prepend"):
            result = spec.run(ctx, spec.args.model_validate({"path": path, "content": "hostile\n", "mode": mode}))
            if planted == "inside":
                assert result.ok, result.output
            else:
                assert not result.ok and "\n" not in result.output and path.split("/")[0] in result.output
    finally:
        ctx.close()
    assert unchanged(target)
    if planted == "inside":
        assert (work / "real.md").read_text() == "hostile\n" * 3 and (work / "sub" / "alias.md").is_symlink()
