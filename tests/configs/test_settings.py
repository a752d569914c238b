from pathlib import Path

import pytest

from configs import ConfigError, load_settings


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_layers_override_in_order(tmp_path):
    user = write(tmp_path / "user.yaml", "worker:\n  max_turns: 7\n  code_timeout: 5\n")
    project = write(tmp_path / "ga.yaml", "worker:\n  max_turns: 5\n")  # a project file may lower a limit
    env = {"GA_HOME": str(tmp_path / "h"), "GA_WORKER__CODE_TIMEOUT": "11", "GA_MODEL": "scripted:x.yaml"}
    s = load_settings({"fanout.concurrency": 3}, user_file=user, project_file=project, environ=env)
    assert s.worker.max_turns == 5
    assert s.worker.code_timeout == 11
    assert s.worker.model == "scripted:x.yaml"
    assert s.fanout.concurrency == 3
    assert s.memory_root == tmp_path / "h" / "memory"


def test_defaults_without_files(tmp_path):
    s = load_settings(user_file=tmp_path / "none.yaml", project_file=tmp_path / "none2.yaml", environ={})
    assert s.context.caps.code_run == 10000
    assert s.context.budget_chars == s.context.context_tokens * 3


@pytest.mark.parametrize(
    "text, expected",
    [
        ("worker:\n  max_turn: 3\n", ["ga.yaml:2", "unknown key 'worker.max_turn'", "did you mean 'max_turns'"]),
        ("worker:\n  max_turns: many\n", ["ga.yaml:2", "'worker.max_turns'", "integer"]),
        ("wroker:\n  max_turns: 3\n", ["ga.yaml:1", "did you mean 'worker'"]),
        ("worker: [1, 2\n", ["ga.yaml:", "YAML syntax error"]),
        ("- a\n- b\n", ["ga.yaml:1", "mapping"]),
    ],
)
def test_bad_project_file_is_one_line(tmp_path, text, expected):
    project = write(tmp_path / "ga.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_settings(user_file=tmp_path / "none.yaml", project_file=project, environ={})
    message = str(info.value)
    assert "\n" not in message
    for part in expected:
        assert part in message


def test_bad_environment_names_environment(tmp_path):
    with pytest.raises(ConfigError, match="environment.*worker.max_turns"):
        load_settings(user_file=tmp_path / "n", project_file=tmp_path / "m", environ={"GA_WORKER__MAX_TURNS": "lots"})
