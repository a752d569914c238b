"""The Tool Efficiency Benchmark's offline tasks (GenericAgent technical report §4.2), each graded by its own
grader. Data: bench/paper/data/teb/ (source and licence in bench/paper/README.md).

Offline: the tasks whose inputs are local files (01, 02, 04, 06, 07, 08, 09, 11, 13, 14); the other six need
the open web (03, 05, 12, 15, 16) or a speech engine (10) and are left out. 13's database and 14's CSV files are
made by the generators the dataset ships (fixed seeds), in the task's workspace, before the agent starts. The
final answer goes to the grader as `--response-file`, the workspace as `--workspace`; `task_success` decides.

    python bench/paper/teb.py --base-url http://127.0.0.1:8080/v1 --model NAME [--tasks teb_01,teb_07]
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.paper.agents import Outcome  # noqa: E402
from bench.paper.suite import Task, main, parser  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "teb"
OFFLINE = ("teb_01", "teb_02", "teb_04", "teb_06", "teb_07", "teb_08", "teb_09", "teb_11", "teb_13", "teb_14")
GENERATORS = {"teb_13": ["generate_analytics_db.py", "--output", "analytics.db"],
              "teb_14": ["generate_experiment_assets.py", "--output-dir", "."]}


def definitions() -> list[dict]:
    lines = (DATA / "tool_efficiency_tasks.jsonl").read_text(encoding="utf-8").splitlines()
    return [d for d in map(json.loads, filter(None, lines)) if d["task_id"][:6] in OFFLINE]


def prepare(task: dict, workspace: Path) -> None:
    prefix = f"assets/{task['task_id']}/"
    for asset in task["assets"]:
        source = DATA / asset
        target = workspace / asset.removeprefix(prefix)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_file():
            shutil.copy(source, target)
    generator = GENERATORS.get(task["task_id"][:6])
    if generator:
        subprocess.run([sys.executable, *generator], cwd=workspace, check=True, capture_output=True, timeout=300)
        wanted = {asset.removeprefix(prefix) for asset in task["assets"]}
        for extra in [p for p in workspace.iterdir() if p.is_file() and p.name not in wanted]:
            extra.unlink()  # what the generator makes beyond the task's listed assets


def grade(task: dict, outcome: Outcome) -> tuple[bool, str]:
    workspace = outcome.workspace or Path("/nonexistent")
    response = workspace.parent / f"final_response.{outcome.agent}.txt"
    response.write_text(outcome.answer or "", encoding="utf-8")
    command = [sys.executable, str(DATA / task["grader"]), "--workspace", str(workspace)]
    if "--response-file" in (DATA / task["grader"]).read_text(encoding="utf-8"):  # teb_13's and teb_14's grade files only
        command += ["--response-file", str(response)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        printed = done.stdout.strip()
        try:
            verdict = json.loads(printed)  # teb_13's and teb_14's graders print indented JSON
        except ValueError:
            verdict = json.loads(printed.splitlines()[-1])  # the others: a JSON line after their log
    except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return False, f"grader failed ({type(exc).__name__})"
    failed = [k for k, v in verdict.items() if v is False and k != "task_success"]
    return bool(verdict.get("task_success")), "ok" if verdict.get("task_success") else f"not: {', '.join(failed[:4])}"


def tasks() -> list[Task]:
    return [Task(d["task_id"], d["prompt"], partial(prepare, d), partial(grade, d)) for d in definitions()]


if __name__ == "__main__":
    args = parser((__doc__ or "").split("\n\n")[0]).parse_args()
    main("Tool Efficiency Benchmark, offline tasks", tasks(), args)
