"""What a person at a stock 80x24 terminal sees (a real terminal, pexpect, drawn as the terminal draws it: pyte):
every table, summary and hint fits without breaking a word or an id; `ga run` shows the running tool and its
seconds, and Ctrl-C says how to go on; a fan-out's Ctrl-C hint carries every flag it needs."""
from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tests.fanout_support import beating_task, start_server, wait_for_beat
from tests.ga_support import drawn, on_terminal, run_ga, spawn_terminal, whole_on_a_line

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "configs" / "examples" / "scripts" / "hello.yaml"
LONG_NAME = "counting-words-in-every-file"  # a run id as long as ga makes them: 24 characters of its name
SLEEPY = {"tasks": [{"match": "sleep", "turns": [
    {"content": "Running it.", "tool_calls": [{"name": "code_run", "arguments": {
        "type": "bash", "script": "sleep 30; echo slept", "timeout": 120}}]},
    {"content": "It said:", "echo_last_tool_result": True}]}]}


def tasks_file(folder: Path, model: str, ids: list[str], prompt: str = "quick one", name: str = LONG_NAME) -> Path:
    path = folder / f"tasks-{len(list(folder.glob('tasks-*')))}.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "name": name, "concurrency": 2, "retries": 0,
                                    "defaults": {"model": model, "timeout": 120},
                                    "tasks": [{"id": task_id, "prompt": prompt} for task_id in ids]}))
    return path


def quick_model(folder: Path) -> str:
    script = folder / "quick.yaml"
    script.write_text(yaml.safe_dump({"tasks": [{"match": ".*", "turns": [
        {"content": "checking", "tool_calls": [{"name": "code_run", "arguments": {"type": "python",
                                                                                "script": "print(6 * 7)"}}]},
        {"content": "Result:", "echo_last_tool_result": True}]}]}))
    return f"scripted:{script}"


def fits(lines: list[str]) -> None:
    too_wide = [line for line in lines if len(line) > 80]
    assert not too_wide, too_wide


def test_runs_list_plan_and_schedule_fit_80_columns_with_ids_whole(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ids = ["count-the-words-of-alpha.txt", "count-the-words-of-beta.txt"]
    for _ in range(2):
        done = run_ga("fanout", str(tasks_file(tmp_path, quick_model(tmp_path), ids)), "--out", str(runs),
                      cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    run_ids = sorted(p.name for p in runs.iterdir())
    assert all(len(run_id) >= 45 for run_id in run_ids)
    damaged = runs / run_ids[0] / "summary.json"
    damaged.write_text('{"run_id": "x", "status": "no such status"')  # torn, as a full disk leaves it

    listed, status = on_terminal("runs", "list", "--out", str(runs), cwd=tmp_path)
    assert status == 0, listed
    fits(listed)
    assert not whole_on_a_line(listed, *run_ids, "unverified", "tokens", "$0.0000", "succeeded"), listed
    assert "summary.json" in " ".join(listed), listed  # the warning says which file
    rows = [i for i, line in enumerate(listed) if line in run_ids]  # each id on a line of its own at this width
    assert [listed[i] for i in rows] == [run_ids[1], run_ids[0]], listed  # newest first, the damaged one too
    assert listed[rows[1] + 1].split()[0] == "damaged" and listed[rows[0] + 1].split()[0] == "succeeded", listed

    plan, status = on_terminal("fanout", str(tasks_file(tmp_path, quick_model(tmp_path), ids)), "--dry-run",
                               cwd=tmp_path)
    assert status == 0, plan
    fits(plan)
    assert not whole_on_a_line(plan, *ids, "upper bound on cost"), plan

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(yaml.safe_dump({"jobs": [
        {"name": "summarize-the-inbox-every-morning", "at": "08:45", "repeat": "weekdays",
         "task": "Read every note in the inbox folder and summarize what needs an answer today"},
        {"name": "compress-the-archive", "at": "03:30", "builtin": "archive_compress"}]}))
    listed, status = on_terminal("schedule", str(jobs), "--list", cwd=tmp_path)
    assert status == 0, listed
    fits(listed)
    assert not whole_on_a_line(listed, "summarize-the-inbox-every-morning", "compress-the-archive",
                               "weekdays at 08:45"), listed


def test_the_final_summary_and_the_ctrl_c_hint_fit_80_columns_and_carry_out(tmp_path: Path) -> None:
    server = start_server({"tasks": [beating_task("slow", 60)]}, tmp_path / "requests.jsonl")
    runs = tmp_path / "elsewhere"  # not the default runs directory: the hint must say --out
    try:
        child = spawn_terminal("fanout", str(tasks_file(tmp_path, f"scripted@{server.base_url}",
                                                        ["first-slow-task", "second-slow-task"], "slow one")),
                               "--out", str(runs), cwd=tmp_path)
        run_id, _ = wait_for_beat(runs, "second-slow-task")
        wait_for_beat(runs, "first-slow-task")
        child.sendintr()
        out = child.read()
        child.close()
    finally:
        server.stop()
    assert child.exitstatus == 130
    lines = drawn(out)
    tail = lines[[i for i, line in enumerate(lines) if line.startswith(f"run {run_id}")][-1]:]  # the end, not live
    fits(tail)
    hint = f"ga fanout --resume {run_id} --out {runs}"
    summary = " ".join(tail)
    assert hint in summary and not whole_on_a_line(tail, run_id, "2 unfinished"), tail
    found = re.search(r"([\d,]+) tokens \([\d,]+ cached\)", summary)
    assert found, tail
    tokens = int(found.group(1).replace(",", ""))
    rows = [int(line.split()[3].replace(",", "")) for line in tail if line.split()[:2][-1:] == ["interrupted"]]
    assert len(rows) == 2 and tokens == sum(rows) > 0, tail  # one count: the summary is the rows' sum


def test_ga_run_shows_the_running_tool_and_ctrl_c_prints_the_session_and_how_to_go_on(tmp_path: Path) -> None:
    script = tmp_path / "sleepy.yaml"
    script.write_text(yaml.safe_dump(SLEEPY))
    child = spawn_terminal("run", "sleep a while", "--model", f"scripted:{script}", cwd=tmp_path)
    child.expect(r"code_run [2-9]s")  # the clock counts while the tool runs: the screen moves
    child.sendintr()
    out = child.before + child.after + child.read()
    child.close()
    assert child.exitstatus == 130
    lines = drawn(out)
    fits(lines)
    sessions = re.findall(r"session (run-\d{8}-\d{6}-[0-9a-f]{6})", "\n".join(lines))
    assert sessions, lines
    command = f'ga run --continue {sessions[-1]} "go on"'
    assert not whole_on_a_line(lines, command), lines
    record = json.loads(next((tmp_path / "ga-home" / "sessions").glob("*.json")).read_text())
    assert record["id"] == sessions[-1] and record["status"] == "failed" and record["exchanges"] == 1


def test_ga_run_hello_answers_exits_0_and_keeps_its_label_in_sight(tmp_path: Path) -> None:
    lines, status = on_terminal("run", "Hello", "--model", f"scripted:{HELLO}", cwd=tmp_path)
    assert status == 0, lines
    fits(lines)
    text = "\n".join(lines)
    assert "I am ga's offline scripted model" in text and "unverified after 1 turn" in text, lines
    piped = run_ga("run", "Hello", "--model", f"scripted:{HELLO}", cwd=tmp_path, env={"OPENAI_API_KEY": None})
    assert piped.returncode == 0 and "unverified" in piped.stderr and "no tool ran" in piped.stderr, piped.stderr
    assert piped.stdout.startswith("Hello! I am ga's offline scripted model")
