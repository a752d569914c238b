"""What a person sees of runs, in real processes against the scripted server over HTTP: `ga runs list` at
80 columns (a real terminal), a run id abbreviated like git's, the live view during a long code_run, an
interrupted or stopped run in `runs show`, the report, the final table and `runs tail`."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from tests.fanout_support import beating_task, read_jsonl, start_server, wait_for_beat
from tests.ga_support import ga_env, run_ga

ROOT = Path(__file__).resolve().parents[2]
QUICK = {"match": "quick", "turns": [
    {"content": "checking", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": "print(6 * 7)"}}]},
    {"content": "Result:", "echo_last_tool_result": True}]}
SCRIPT = {"tasks": [QUICK, beating_task("slow", 60), beating_task("ten seconds", 10)]}
TERMINAL = (24, 80)


@pytest.fixture()
def server(tmp_path: Path):
    server = start_server(SCRIPT, tmp_path / "requests.jsonl")
    yield server
    server.stop()


def tasks_file(tmp_path: Path, server, prompts: dict[str, str], concurrency: int = 2) -> Path:
    lines = "\n".join(f"  - {{id: {task_id}, prompt: \"{prompt}\"}}" for task_id, prompt in prompts.items())
    path = tmp_path / f"tasks-{len(list(tmp_path.glob('tasks-*')))}.yaml"
    path.write_text(f"version: 1\nname: counting-words\nconcurrency: {concurrency}\nretries: 0\n"
                    f"defaults: {{model: \"scripted@{server.base_url}\", timeout: 120}}\ntasks:\n{lines}\n")
    return path


def terminal(tmp_path: Path, *args: str) -> str:
    """`ga ARGS` in a real 80x24 terminal, run to its end; what it drew."""
    child = pexpect.spawn(sys.executable, ["-m", "cli", *args], cwd=str(tmp_path), encoding="utf-8", timeout=120,
                          dimensions=TERMINAL, env=ga_env({"COLUMNS": None, "LINES": None, "TERM": "xterm"}))
    out = child.read()
    child.close()
    assert child.exitstatus == 0, out
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out).replace("\r", "")  # the text, without colours and moves


def start_fanout(tasks: Path, runs: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cli", "fanout", str(tasks), "--out", str(runs)], cwd=ROOT,
                            env=ga_env({"COLUMNS": "80"}), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def rows(output: str, status: str) -> dict[str, list[str]]:
    """Table rows (a task id first) whose status is `status`: id -> the row's cells."""
    found = {}
    for line in output.splitlines():
        cells = line.split()
        if len(cells) > 4 and cells[1] == status:
            found[cells[0]] = cells
    return found


def test_runs_list_at_80_columns_shows_whole_ids_and_a_prefix_selects_a_run(tmp_path: Path, server) -> None:
    runs = tmp_path / "runs"
    for _ in range(2):
        done = run_ga("fanout", str(tasks_file(tmp_path, server, {"q1": "quick one"})), "--out", str(runs))
        assert done.returncode == 0, done.stderr
    ids = sorted(p.name for p in runs.iterdir())
    assert len(ids) == 2 and len(ids[0]) > 30  # as long as real ones

    drawn = terminal(tmp_path, "runs", "list", "--out", str(runs))
    lines = drawn.splitlines()
    assert all(any(run_id in line for line in lines) for run_id in ids), drawn  # each whole, on one line
    assert max(len(line.rstrip()) for line in lines) <= 80

    prefix = ids[0][:-1]  # unique: the ids differ in their random tail at least
    shown = run_ga("runs", "show", prefix, "--out", str(runs))
    assert shown.returncode == 0 and f"run {ids[0]}: succeeded" in shown.stdout, shown.stderr
    common = os.path.commonprefix(ids)
    ambiguous = run_ga("runs", "show", common, "--out", str(runs))
    assert ambiguous.returncode == 2 and ambiguous.stdout == ""
    [line] = ambiguous.stderr.strip().splitlines()
    assert f"run id '{common}' is ambiguous: {ids[0]}, {ids[1]}" in line
    assert run_ga("runs", "show", "nothing-like-it", "--out", str(runs)).stderr.startswith("error: no run")


def test_the_live_view_shows_a_long_code_run_with_its_growing_seconds(tmp_path: Path, server) -> None:
    tasks = tasks_file(tmp_path, server, {"ten": "ten seconds of work"}, concurrency=1)
    drawn = terminal(tmp_path, "fanout", str(tasks), "--out", str(tmp_path / "runs"))
    seconds = [int(n) for n in re.findall(r"code_run (\d+)s", drawn)]
    assert seconds == sorted(seconds) and len(set(seconds)) >= 5, drawn[-2000:]  # counting while it runs
    assert re.search(r"\bten\s+\d+\s+code_run \d+s", drawn)  # on the task's row


def test_an_interrupted_run_shows_each_task_with_its_status_turns_and_tokens(tmp_path: Path, server) -> None:
    runs = tmp_path / "runs"
    tasks = tasks_file(tmp_path, server, {"a": "slow a", "b": "slow b", "c": "quick c"})
    proc = start_fanout(tasks, runs)
    run_id, _ = wait_for_beat(runs, "a")
    wait_for_beat(runs, "b")
    follower = subprocess.Popen([sys.executable, "-m", "cli", "runs", "tail", run_id[:-2], "-f", "--out", str(runs)],
                                cwd=ROOT, env=ga_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    followed, _ = follower.communicate(timeout=60)  # -f ends with the run
    assert follower.returncode == 0 and re.search(r"run +run_finished +status interrupted", followed.splitlines()[-1])
    summary_tokens = int(re.search(r"([\d,]+) tokens", out).group(1).replace(",", ""))
    assert summary_tokens > 0
    final = rows(out, "interrupted")
    assert set(final) == {"a", "b"} and all(int(r[3].replace(",", "")) > 0 for r in final.values()), out
    assert rows(out, "not")["c"][:3] == ["c", "not", "started"]

    shown = run_ga("runs", "show", run_id, "--out", str(runs))
    interrupted = rows(shown.stdout, "interrupted")
    assert set(interrupted) == {"a", "b"}, shown.stdout
    for cells in interrupted.values():  # task, status, attempts, turns, tokens
        assert cells[2] == "1" and int(cells[3]) >= 1 and int(cells[4].replace(",", "")) > 0

    assert run_ga("runs", "report", run_id, "--runs-dir", str(runs)).returncode == 0
    report = (runs / run_id / "report.md").read_text()
    assert f"{summary_tokens:,} tokens" in report  # what the command line said
    for task_id in ("a", "b"):
        row = next(line for line in report.splitlines() if line.startswith(f"| {task_id} |"))
        assert row.split("|")[2].strip() == "interrupted" and int(row.split("|")[5].replace(",", "")) > 0

    tail = run_ga("runs", "tail", run_id, "--out", str(runs), "-n", "100")
    lines = tail.stdout.splitlines()
    assert len(lines) == len(list(read_jsonl(runs / run_id / "ledger.jsonl")))
    assert all(re.match(r"\d\d:\d\d:\d\d  \S+ +\S+", line) and "{" not in line for line in lines), tail.stdout
    assert any(re.search(r"  a +started +attempt 1 · worker \d", line) for line in lines)
    described = run_ga("runs", "tail", "--help").stdout
    assert "--follow" in described and " -f " in described


def test_a_run_stopped_with_ga_runs_stop_says_so_on_its_terminal(tmp_path: Path, server) -> None:
    runs = tmp_path / "runs"
    proc = start_fanout(tasks_file(tmp_path, server, {"a": "slow a"}), runs)
    run_id, _ = wait_for_beat(runs, "a")
    stopped = run_ga("runs", "stop", run_id, "--out", str(runs))
    assert stopped.returncode == 0, stopped.stderr
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert "stopped by `ga runs stop`" in err and "Ctrl-C: stopping" not in err, err
    note = next(e for e in read_jsonl(runs / run_id / "ledger.jsonl") if e["event"] == "interrupted" and "note" in e)
    assert note["note"].startswith("stopped by `ga runs stop`")
    assert "interrupted" in rows(out, "interrupted")["a"]
    assert not (runs / run_id / "stop-request").exists()
