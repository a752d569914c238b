"""Stop means stop: `ga runs stop RUN` ends a fan-out a script started in the background (which ignores SIGINT),
and `ga runs stop RUN TASK` leaves a run that resumes, the command to resume it shown. Real processes, the scripted
server over HTTP."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import yaml

from tests.fanout_support import answer_task, beating_task, start_server, wait_for_beat
from tests.ga_support import GA, ga_env, run_ga


def tasks_file(folder: Path, base_url: str, tasks: dict[str, str]) -> Path:
    path = folder / "tasks.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "name": "stopped", "concurrency": 2, "retries": 0,
                                    "defaults": {"model": f"scripted@{base_url}", "timeout": 300},
                                    "tasks": [{"id": task_id, "prompt": prompt} for task_id, prompt in tasks.items()]}))
    return path


def test_runs_stop_ends_a_fanout_started_in_the_background_by_a_script(tmp_path: Path) -> None:
    server = start_server({"tasks": [beating_task("slow", 120)]}, tmp_path / "requests.jsonl")
    runs = tmp_path / "runs"
    command = " ".join([*GA, "fanout", str(tasks_file(tmp_path, server.base_url, {"slow": "slow one"})),
                        "--out", str(runs), "--no-preflight"])
    try:  # `cmd &` in a script: the shell starts it with SIGINT ignored
        shell = subprocess.Popen(["sh", "-c", f"{command} > out.txt 2> err.txt & echo $!"], cwd=tmp_path,
                                 env=ga_env(), stdout=subprocess.PIPE, text=True)
        pid = int(shell.communicate(timeout=30)[0])
        run_id, _ = wait_for_beat(runs, "slow")
        ignored = int(next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                           if line.startswith("SigIgn:")).split()[1], 16)
        assert ignored & 2, "the background fan-out should ignore SIGINT, as a script's `&` makes it"
        stopped = run_ga("runs", "stop", "last", "--out", str(runs), cwd=tmp_path)
        assert stopped.returncode == 0 and run_id in stopped.stdout, stopped.stdout + stopped.stderr
        deadline = time.monotonic() + 60  # the task beats for 120 s: only a stop ends it sooner
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists() and \
                Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z":
            time.sleep(0.2)
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z", \
            "the fan-out went on after `ga runs stop`"
    finally:
        server.stop()
    summary = json.loads((runs / run_id / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["exit_code"] == 130
    assert "stopped by `ga runs stop`" in (tmp_path / "err.txt").read_text()
    assert not (runs / run_id / "stop-request").exists()  # taken: a resume is not stopped by it


def test_stopping_one_task_leaves_a_run_that_resumes_with_the_command_shown(tmp_path: Path) -> None:
    server = start_server({"tasks": [beating_task("long one", 8), answer_task("quick")]}, tmp_path / "requests.jsonl")
    runs = tmp_path / "elsewhere"
    tasks = tasks_file(tmp_path, server.base_url, {"long": "long one", "quick": "quick"})
    try:
        fanout = subprocess.Popen([*GA, "fanout", str(tasks), "--out", str(runs)], cwd=tmp_path, env=ga_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        run_id, _ = wait_for_beat(runs, "long")
        stopped = run_ga("runs", "stop", run_id, "long", "--out", str(runs), cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        out, err = fanout.communicate(timeout=120)
        resume = f"ga fanout --resume {run_id} --out {runs}"
        assert fanout.returncode == 130, out + err
        assert resume in " ".join(out.split()), out  # the hint, whatever the lines it was broken into
        assert resume in " ".join(stopped.stdout.split()), stopped.stdout
        summary = json.loads((runs / run_id / "summary.json").read_text())
        assert summary["status"] == "interrupted" and summary["tasks"]["unfinished"] == 1
        again = run_ga(*resume.split()[1:], cwd=tmp_path)  # the command as printed, less its `ga`
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        server.stop()
    results = [json.loads(line) for line in (runs / run_id / "results.jsonl").read_text().splitlines()]
    assert {r["task_id"]: r["status"] for r in results} == {"quick": "succeeded", "long": "succeeded"}
