"""A trivial task costs its run directory no folder: once it succeeded leaving nothing but its history and a short
answer, its history is packed into histories/ID.jsonl and its folder goes (RunDir.pack). Every viewer still finds
it: `ga runs show RUN TASK`, `ga runs report`, `ga replay`, and a resume sends nothing again. A task that left
anything else, or a long answer, keeps its folder. Real `ga` processes, the scripted model over real HTTP."""
from __future__ import annotations

import json
from pathlib import Path

from orchestrator.ledger import PACK_ANSWER_MAX
from tests.fanout_support import result_lines, start_server
from tests.ga_support import run_ga

LONG = " ".join(f"word{i}" for i in range(PACK_ANSWER_MAX // 4))


def _tasks_file(path: Path, url: str) -> Path:
    path.write_text(f"version: 1\nname: layout\nconcurrency: 2\nmemory: {{commit: false}}\n"
                    f"defaults: {{model: 'scripted@{url}', max_turns: 3, check: {{pattern: '.'}}}}\ntasks:\n"
                    "  - {id: t0, prompt: 'say short zero'}\n  - {id: t1, prompt: 'say short one'}\n"
                    "  - {id: wrote, prompt: 'write a note'}\n  - {id: long, prompt: 'say long'}\n")
    return path


SCRIPT = {"latency": 0, "tasks": [
    {"match": "write a note", "turns": [
        {"content": "writing", "tool_calls": [{"name": "file_write", "arguments": {"path": "note.md", "content": "n\n"}}]},
        {"content": "written"}]},
    {"match": "say long", "turns": [{"content": LONG}]},
    {"match": ".*", "turns": [{"content": "task done"}]}]}


def test_trivial_tasks_are_packed_and_every_viewer_still_finds_them(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    server = start_server(SCRIPT, tmp_path / "requests.jsonl")
    try:
        tasks = _tasks_file(tmp_path / "tasks.yaml", server.base_url)
        first = run_ga("fanout", str(tasks), "--out", str(runs), "--no-preflight", "--json", cwd=tmp_path)
        assert first.returncode == 0, first.stdout[-3000:]
        run_dir = Path(json.loads(first.stdout)["run_dir"])
        sent = len((tmp_path / "requests.jsonl").read_text().splitlines())
        again = run_ga("fanout", str(tasks), "--out", str(runs), "--no-preflight", "--json", "--resume", run_dir.name,
                       cwd=tmp_path)
        resent = len((tmp_path / "requests.jsonl").read_text().splitlines()) - sent
    finally:
        server.stop()
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "succeeded", again.stderr[-2000:]
    assert resent == 0, "the resume sent a finished task again"

    for task_id in ("t0", "t1"):
        assert not (run_dir / "tasks" / task_id).exists()
        assert (run_dir / "histories" / f"{task_id}.jsonl").is_file()
    assert (run_dir / "tasks" / "wrote" / "workdir" / "note.md").is_file()  # it left a file: its folder stays
    assert (run_dir / "tasks" / "long" / "answer.md").read_text() == LONG + "\n"  # --json may cut it: the file stays
    records = {r["task_id"]: r for r in result_lines(run_dir)}
    assert records["t0"]["history_path"] == str(run_dir / "histories" / "t0.jsonl") and "task_dir" not in records["t0"]

    shown = run_ga("runs", "show", run_dir.name, "t0", "--out", str(runs), cwd=tmp_path)
    assert shown.returncode == 0 and "say short zero" in shown.stdout and "task done" in shown.stdout, shown.stdout
    assert "no turns recorded" not in shown.stdout
    requests = json.loads(run_ga("runs", "show", run_dir.name, "t1", "--json", "--out", str(runs), cwd=tmp_path).stdout)
    assert requests and "say short one" in json.dumps(requests[0])
    assert run_ga("runs", "report", run_dir.name, "--runs-dir", str(runs), cwd=tmp_path).returncode == 0
    report = (run_dir / "report.md").read_text()
    assert "t0" in report and "t1" in report
    replayed = run_ga("replay", str(run_dir), "--out", str(tmp_path / "replays"), cwd=tmp_path)
    assert replayed.returncode == 0 and "replayed identically" in replayed.stdout, replayed.stdout + replayed.stderr
