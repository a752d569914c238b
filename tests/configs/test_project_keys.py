"""A project ga.yaml or models.yaml is data a task could have written: it may set only keys on an allow-list,
and those only to tighten (configs/projecttrust.py). Every key is classified; adding a key to
configs/default.yaml or a field to ModelConfig without classifying it fails here."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from configs import ConfigError, load_settings
from configs.projecttrust import PROJECT_KEYS, PROJECT_MODEL_FIELDS
from configs.settings import DEFAULT_FILE, Section, Settings
from worker.modelconfig import ModelConfig


def leaves(node: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(node, dict):
        return [leaf for name, value in node.items() for leaf in leaves(value, (*prefix, str(name)))]
    return [prefix]


def model_leaves(model: type[Section], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, Section):
            found += model_leaves(kind, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


def test_every_key_of_default_yaml_is_classified_for_project_files() -> None:
    keys = leaves(yaml.safe_load(DEFAULT_FILE.read_text()))
    missing = [".".join(k) for k in keys if k not in PROJECT_KEYS]
    assert not missing, f"classify these in configs/projecttrust.py PROJECT_KEYS: {missing}"


def test_every_settings_field_is_classified_and_nothing_else_is() -> None:
    fields = set(model_leaves(Settings))
    assert fields == set(PROJECT_KEYS), (sorted(fields - set(PROJECT_KEYS)), sorted(set(PROJECT_KEYS) - fields))


def test_every_model_field_is_classified_for_project_models_files() -> None:
    assert set(ModelConfig.model_fields) == set(PROJECT_MODEL_FIELDS)


def load(tmp_path: Path, project: str, user: str = ""):
    (tmp_path / "user.yaml").write_text(user)
    (tmp_path / "ga.yaml").write_text(project)
    return load_settings(user_file=tmp_path / "user.yaml", project_file=tmp_path / "ga.yaml", environ={})


@pytest.mark.parametrize(("project", "key", "line"), [
    ("web:\n  chromium: ./evil.sh\n", "web.chromium", 2),  # the next web call ran it with the key (issue 30)
    ("memory:\n  root: /var/tmp/attacker-store\n", "memory.root", 2),
    ("home: /var/tmp/elsewhere\n", "home", 1),
    ("fanout:\n  runs_dir: /var/tmp/runs\n", "fanout.runs_dir", 2),
    ("log:\n  json_file: /root/.bashrc\n", "log.json_file", 2),
    ("explore:\n  idle_trigger: ./trigger.py\n", "explore.idle_trigger", 2),
    ("telemetry:\n  otlp_endpoint: http://127.0.0.1:9/\n", "telemetry.otlp_endpoint", 2),
    ("fanout:\n  address: 127.0.0.1:6379\n", "fanout.address", 2),
    ("web:\n  cdp_url: http://127.0.0.1:9222\n", "web.cdp_url", 2),
    ("worker:\n  max_turns: 400\n", "worker.max_turns", 2),
    ("worker:\n  max_tokens: null\n", "worker.max_tokens", 2),
    ("fanout:\n  concurrency: 64\n", "fanout.concurrency", 2),
    ("explore:\n  max_spend_per_day: 100\n", "explore.max_spend_per_day", 2),
    ("context:\n  caps:\n    code_run: 1000000\n", "context.caps.code_run", 3),
    ("yaml:\n  max_bytes: 2000000000\n", "yaml.max_bytes", 2),
    ("planner:\n  blend: 1.0\n", "planner.blend", 2),
    ("worker:\n  max_turns: 3\nsandbox:\n  bwrap: ./fake\n", "sandbox.bwrap", 4),
])
def test_a_project_file_cannot_set_what_only_the_user_sets_or_raise_a_limit(tmp_path: Path, project: str, key: str,
                                                                          line: int) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, project, user="worker:\n  max_tokens: 20000\n")
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'ga.yaml'}:{line}: {key} is refused in a project file ("), message
    assert "~/.config/ga/config.yaml" in message and "\n" not in message


def test_a_project_file_may_lower_limits_narrow_paths_and_set_harmless_knobs(tmp_path: Path) -> None:
    settings = load(tmp_path, "worker:\n  max_turns: 5\n  max_tokens: 1000\n  second_chance: 0\n"
                              "context:\n  policy: periodic\n  caps: {file_read: 5000}\n"
                              "fanout:\n  concurrency: 1\n  timeout: 60\nlog:\n  level: info\n"
                              "sandbox:\n  network: off\n  limits: {processes: 32}\n")
    assert (settings.worker.max_turns, settings.worker.max_tokens, settings.context.caps.file_read) == (5, 1000, 5000)
    assert settings.fanout.timeout == 60 and settings.sandbox.network == "off" and settings.log.level == "info"
    # repeating what the user's own config says is no change
    assert load(tmp_path, "web: {headless: false}\n", user="web: {headless: false}\n").web.headless is False
