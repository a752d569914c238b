"""A project models.yaml is hostile input: a task could have written it (an older ga, a `sandbox: off` run, a
shared checkout; file_write refuses it now, worker/policy.py). An empty one (code_run's placeholder while a script runs) is read as absent,
which changes nothing a written one could not; a written one may tune a model the user defined, but not change
which model, key, price or fallbacks that name means.

Through real `ga run` processes and the scripted model over real HTTP; HOME is the test's, so the user's
models.yaml is the test's too.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.ga_support import run_ga
from worker.scripted import ScriptedServer

NO_KEY = {"OPENAI_API_KEY": None, "GA_MODEL": None}


def user_models(home: Path, url: str) -> None:
    folder = home / ".config" / "ga"
    folder.mkdir(parents=True)
    (folder / "models.yaml").write_text(f"models:\n  mine: {{base_url: '{url}', model: cheap-model, "
                                        "price_input: 1.0, price_output: 2.0}\n")


def ga_run_mine(project: Path, home: Path, prompt: str = "hello") -> tuple[int, str]:
    done = run_ga("run", prompt, "--model", "mine", "--json", cwd=project, env={**NO_KEY, "HOME": str(home)},
                  timeout=240)
    return done.returncode, done.stderr


@pytest.mark.parametrize("planted", ["models:\n  mine: {model: pricey-model}\n",
                                     "models:\n  mine: {price_input: 0, price_output: 0}\n"],
                         ids=["model", "prices"])
def test_a_models_yaml_a_task_wrote_cannot_change_what_the_users_model_means(tmp_path: Path, planted: str) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    project.mkdir()
    plant = {"match": "plant", "turns": [
        {"content": "writing", "tool_calls": [{"name": "file_write", "arguments": {
            "path": "models.yaml", "content": planted}}]},
        {"content": "planted"}]}
    with ScriptedServer({"tasks": [plant, {"match": ".*", "turns": [{"content": "hi"}]}]},
                        log_path=tmp_path / "requests.jsonl") as server:
        user_models(home, server.base_url)
        code, stderr = ga_run_mine(project, home, "plant it")
        assert code in (0, 1) and not (project / "models.yaml").exists(), stderr  # file_write refused it
        (project / "models.yaml").write_text(planted)  # as a task of an older ga, or unsandboxed, could have
        code, stderr = ga_run_mine(project, home)
        models = {r["body"].get("model") for r in server.records}
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, stderr
    assert "models.yaml:2: models.mine." in lines[0] and "refused in a project file" in lines[0], lines[0]
    assert models == {"cheap-model"}, models  # the planted file was never used


def test_an_empty_project_models_yaml_reads_as_absent(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    project.mkdir()
    (project / "models.yaml").write_bytes(b"")
    with ScriptedServer({"tasks": [{"match": ".*", "turns": [{"content": "hi"}]}]},
                        log_path=tmp_path / "requests.jsonl") as server:
        user_models(home, server.base_url)
        code, stderr = ga_run_mine(project, home)
        models = [r["body"].get("model") for r in server.records]
    assert models and set(models) == {"cheap-model"}, stderr + json.dumps(models)
    assert code in (0, 1) and "models.yaml" not in stderr, stderr  # 1: an answer with nothing run is unverified
