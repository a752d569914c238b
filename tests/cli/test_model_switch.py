"""One model switch everywhere: `ga fanout --model` and GA_MODEL over a tasks file's model (the reduce step
included), `ga fanout --resume RUN` without the tasks file; every command these errors suggest works as printed.
Real `ga` processes against the scripted model over HTTP."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from orchestrator.ledger import read_spec
from tests.fanout_support import answer_task, read_jsonl, start_server
from tests.ga_support import run_ga

# A tasks file naming a model whose key is not set, and nothing else that could pick a model.
KEYLESS = {"OPENAI_API_KEY": None, "GA_MODEL": None, "GA_MODEL_INHERITED": None, "DEEPSEEK_API_KEY": None}
SCRIPT = {"tasks": [answer_task("merge the items", "merged"), answer_task("item", "done")]}
DEAD = "scripted@http://127.0.0.1:9/v1"  # nothing listens there; a --dry-run never calls it


def _tasks_file(folder: Path) -> Path:
    path = folder / "tasks.yaml"
    path.write_text("version: 1\nname: switch\ndefaults: {model: deepseek}\n"
                    "tasks:\n  - {id: t0, prompt: 'item 0'}\n  - {id: t1, prompt: 'item 1'}\n"
                    "reduce: {prompt: 'merge the items', output: total.md}\n")
    return path


def _suggested(stderr: str) -> list[str]:
    """The `ga ...` command an error line suggests, as argv for run_ga."""
    found = re.search(r"`ga ([^`]+)`", stderr)
    assert found, stderr
    return shlex.split(found.group(1))


def test_the_model_flag_an_error_suggests_runs_every_task_and_the_reduce(tmp_path: Path) -> None:
    server = start_server(SCRIPT, tmp_path / "requests.jsonl")
    tasks = _tasks_file(tmp_path)
    try:
        refused = run_ga("fanout", str(tasks), cwd=tmp_path, env=KEYLESS)
        assert refused.returncode == 2 and "choose another model with --model" in refused.stderr, refused.stderr

        done = run_ga("fanout", str(tasks), "--model", f"scripted@{server.base_url}", "--json", cwd=tmp_path, env=KEYLESS)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["status"] == "succeeded" and result["reduce"]["status"] == "succeeded"
        spec = read_spec(Path(result["run_dir"]) / "spec.jsonl")
        assert {t["model"] for t in spec["tasks"]} == {f"scripted@{server.base_url}"}
        assert spec["reduce"]["model"] == f"scripted@{server.base_url}"
        asked = [json.dumps(r) for r in read_jsonl(tmp_path / "requests.jsonl")]
        assert any("merge the items" in r for r in asked)  # the reduce's requests reached the switched model
    finally:
        server.stop()


def test_ga_model_overrides_the_tasks_file_and_the_flag_overrides_ga_model(tmp_path: Path) -> None:
    tasks = _tasks_file(tmp_path)
    user_config = tmp_path / "home" / ".config" / "ga" / "config.yaml"  # the user's config: below the tasks file
    user_config.parent.mkdir(parents=True)
    user_config.write_text("worker: {model: ollama}\n")

    def models(*flags: str, **env: str) -> set[str]:
        done = run_ga("fanout", str(tasks), "--dry-run", "--json", *flags, cwd=tmp_path,
                      env={**KEYLESS, "HOME": str(tmp_path / "home"), **env})
        assert done.returncode == 0, done.stderr
        return {row["model"] for row in json.loads(done.stdout)["tasks"]}  # the (reduce) row included

    assert models() == {"deepseek"}
    assert models(GA_MODEL="gpt-4o-mini") == {"gpt-4o-mini"}
    assert models("--model", DEAD, GA_MODEL="gpt-4o-mini") == {DEAD}
    # A GA_MODEL a parent task hands down to its code_run is a default: a nested tasks file's model wins.
    assert models(GA_MODEL="gpt-4o-mini", GA_MODEL_INHERITED="1") == {"deepseek"}


def test_resume_without_the_tasks_file_as_runs_tell_suggests(tmp_path: Path) -> None:
    server = start_server(SCRIPT, tmp_path / "requests.jsonl")
    model = f"scripted@{server.base_url}"
    try:
        first = run_ga("fanout", str(_tasks_file(tmp_path)), "--model", model, "--json", cwd=tmp_path, env=KEYLESS)
        assert first.returncode == 0, first.stderr
        run_id = json.loads(first.stdout)["run_id"]
        (tmp_path / "tasks.yaml").unlink()  # the run directory holds everything a resume needs
        asked = len(read_jsonl(tmp_path / "requests.jsonl"))

        told = run_ga("runs", "tell", run_id, "t0", "hello", cwd=tmp_path, env=KEYLESS)
        assert told.returncode == 2, told.stderr
        suggested = _suggested(told.stderr)
        assert suggested == ["fanout", "--resume", run_id]
        resumed = run_ga(*suggested, cwd=tmp_path, env=KEYLESS)
        assert resumed.returncode == 0, resumed.stderr
        assert len(read_jsonl(tmp_path / "requests.jsonl")) == asked  # a finished run calls no model again

        other = run_ga("fanout", "--resume", run_id, "--model", DEAD, cwd=tmp_path, env=KEYLESS)
        assert other.returncode == 2 and f"resume with --model {model}" in other.stderr, other.stderr
        assert len(other.stderr.strip().splitlines()) == 1
    finally:
        server.stop()


def test_a_damaged_spec_jsonl_is_one_line_on_resume_and_the_viewers_still_show_the_run(tmp_path: Path) -> None:
    server = start_server(SCRIPT, tmp_path / "requests.jsonl")
    try:
        tasks = _tasks_file(tmp_path)
        model = f"scripted@{server.base_url}"
        first = run_ga("fanout", str(tasks), "--model", model, "--json", cwd=tmp_path, env=KEYLESS)
        assert first.returncode == 0, first.stderr
        run_id = json.loads(first.stdout)["run_id"]
        spec = tmp_path / "runs" / run_id / "spec.jsonl"
        spec.write_text(spec.read_text().splitlines()[0] + "\n" + '{"id": "a", "prompt": \n')
        for args in (("fanout", "--resume", run_id), ("fanout", str(tasks), "--model", model, "--resume", run_id)):
            done = run_ga(*args, cwd=tmp_path, env=KEYLESS)
            assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
            assert len(done.stderr.strip().splitlines()) == 1 and "spec.jsonl: " in done.stderr and "line 2: not JSON" in done.stderr, done.stderr
        for args in (("runs", "show", run_id), ("runs", "tail", run_id)):
            assert run_ga(*args, cwd=tmp_path, env=KEYLESS).returncode == 0
    finally:
        server.stop()


def test_fanout_without_a_file_or_resume_says_what_to_give(tmp_path: Path) -> None:
    done = run_ga("fanout", cwd=tmp_path, env=KEYLESS)
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: give a tasks file (see configs/examples/quickstart.yaml), or --resume RUN "
                                   "to finish a run")
