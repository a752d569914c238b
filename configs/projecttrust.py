"""What a project-local ga.yaml may set: only keys on an allow-list, and those only to tighten.

A project file (./ga.yaml, in the directory ga runs in) is data a task's code could have written (an older ga,
a `sandbox: off` run, a shared checkout), so it is never authority. Every key of the settings is classified
here (a test fails on a key of configs/default.yaml that is not):

- `lower`: a limit the project may lower, never raise (null, where it means "no limit", is the highest);
- `subset`: paths the project may narrow, never add to;
- `network` / `mode`: the sandbox's network may only narrow, and `sandbox: off` only repeat the user's;
- `free`: harmless knobs of the context and the log's verbosity, any value;
- `user`: set only by the user's own config, the environment or a flag (model, endpoints, programs ga runs,
  where ga keeps state, logs and traces, triggers, the planner); a project file may only repeat the value.

A key a project file sets that is weaker than what the layers without it say, or that is not classified, is
refused in one line naming the file, the line and the key; silently ignoring it would run with settings the
user did not get.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, Literal, Protocol

from memory_shared.yamlsource import line_of

Rule = Literal["lower", "subset", "network", "mode", "free", "user"]
USER_FILE_NAME = "~/.config/ga/config.yaml"


class WeakerSetting(ValueError):
    """A project file sets a key it may not (or loosens one); str() is one line naming file, line, key and fix."""


def _keys(section: str, rule: Rule, *names: str) -> dict[tuple[str, ...], Rule]:
    return {(*section.split("."), name): rule for name in names}


PROJECT_KEYS: dict[tuple[str, ...], Rule] = {
    ("home",): "user",
    **_keys("memory", "user", "root", "archive_keep_months"),
    **_keys("memory", "user", "admit"),  # review < verified < auto: a project file could only widen it
    **_keys("memory", "lower", "l1_max_lines", "l1_max_chars", "rewrite_share", "l1_task_share"),
    **_keys("memory", "lower", "distill"),  # false < true: a project may stop ga's own learning, never start it
    **_keys("worker", "user", "model"),
    **_keys("worker", "lower", "max_turns", "max_tokens", "max_cost", "code_timeout", "code_timeout_max",
            "max_tool_calls_per_reply"),
    **_keys("worker", "subset", "allow_read", "allow_write"),
    **_keys("worker", "free", "second_chance"),
    **_keys("context", "lower", "context_tokens", "chars_per_token"),
    **_keys("context", "free", "policy", "low_water", "compress_every", "keep_recent", "strict_keep_recent",
            "tag_keep_chars", "evict_to", "anchor_turns", "schema_resend_every"),
    **_keys("context.caps", "lower", "code_run", "web_execute_js", "web_scan_html", "web_scan_text", "file_read",
            "file_read_line"),
    **_keys("fanout", "user", "address", "executor", "runs_dir", "circuit_cooldown", "pool_idle_seconds",
            "memory_service"),
    **_keys("fanout", "lower", "concurrency", "retries", "max_depth", "timeout", "rpm", "tpm", "circuit_after",
            "num_cpus", "slots_per_actor"),
    **_keys("web", "user", "chromium", "headless", "cdp_url"),
    **_keys("explore", "user", "idle_window", "idle_trigger"),
    **_keys("explore", "lower", "max_cycles_per_day", "max_spend_per_day", "candidates", "batch_size",
            "verify_timeout"),
    **_keys("planner", "user", "rule", "blend", "window_days", "trend_days", "explore_bonus", "untried_demand",
            "weight_band", "weight_min", "weight_max"),
    **_keys("sandbox", "mode", "mode"),
    **_keys("sandbox", "network", "network"),
    **_keys("sandbox", "subset", "writable", "env"),  # env: names of the host's variables a script sees
    **_keys("sandbox", "user", "bwrap"),
    **_keys("sandbox.limits", "lower", "memory", "processes", "file_size", "cpu_seconds", "tmp_size", "disk"),
    **_keys("log", "free", "level"),
    **_keys("log", "user", "json_file"),
    **_keys("telemetry", "user", "otlp_endpoint", "capture_content", "service_name"),
    **_keys("yaml", "lower", "max_bytes", "max_depth", "max_alias_nodes"),
}


def _higher(project: object, baseline: object) -> bool:
    """A limit raised: None means no limit (the highest). Limits are numbers (a boolean too: false < true)."""
    if project is None:
        return baseline is not None
    if baseline is None:
        return False
    if not isinstance(project, (int, float)) or not isinstance(baseline, (int, float)):
        raise TypeError(f"a limit is a number, not {project!r} against {baseline!r}")
    return project > baseline


def _more_paths(project: object, baseline: object) -> bool:
    if not isinstance(project, list) or not isinstance(baseline, list):
        raise TypeError(f"paths are a list, not {project!r} against {baseline!r}")
    return not {Path(p).expanduser() for p in project} <= {Path(p).expanduser() for p in baseline}


def _network_wider(project: object, baseline: object) -> bool:
    def rank(value: object) -> int:  # off < gateway < gateway and listed hosts < open
        if isinstance(value, list):
            return 2
        return {"off": 0, "gateway": 1}.get(value, 3) if isinstance(value, str) else 3
    if isinstance(project, list) and isinstance(baseline, list):
        return not set(project) <= set(baseline)
    return rank(project) > rank(baseline)


WEAKER: dict[Rule, Callable[[object, object], bool]] = {
    "lower": _higher,
    "subset": _more_paths,
    "network": _network_wider,
    "mode": lambda project, baseline: project == "off" and baseline != "off",
    "free": lambda project, baseline: False,
    "user": lambda project, baseline: project != baseline,
}
WHY: dict[Rule, str] = {
    "lower": "a project file may lower this limit, never raise it",
    "subset": "a project file may narrow these paths, never add to them",
    "network": "a project file may narrow the sandbox's network, never widen it",
    "mode": "a project file may not turn the sandbox off",
    "free": "",
    "user": "only your own config sets it",
}


class _Limits(Protocol):
    def resolved(self) -> object: ...


class _Sandbox(Protocol):
    @property
    def limits(self) -> _Limits: ...


class WalkedSettings(Protocol):
    """A Settings as value_of walks it (by name; configs.settings imports this module, so not named here)."""

    @property
    def sandbox(self) -> _Sandbox: ...


def value_of(settings: WalkedSettings, key: tuple[str, ...]) -> object:
    """The value of `key` in a Settings, walked by name (sandbox limits as this machine resolves a null)."""
    node: object = settings.sandbox.limits.resolved() if key[:2] == ("sandbox", "limits") else settings
    for part in key[2:] if key[:2] == ("sandbox", "limits") else key:
        node = getattr(node, part)
    return node


def check_project(settings: WalkedSettings, baseline: WalkedSettings, path: Path, data: dict, lines: dict) -> None:
    """Raise WeakerSetting for the first key (by line) the project file at `path` sets that is not classified,
    or whose value in `settings` (with the file) is weaker than in `baseline` (the same layers without it)."""
    found = []
    for key in sorted(_set_keys(data), key=lambda k: line_of(lines, k) or 1):
        rule = PROJECT_KEYS.get(key)
        if rule is None:
            found.append((key, "it is not on the list of keys a project file may set"))
        elif WEAKER[rule](value_of(settings, key), value_of(baseline, key)):
            found.append((key, WHY[rule]))
        if found:
            break
    if found:
        key, why = found[0]
        env = "GA_" + "__".join(part.upper() for part in key)
        raise WeakerSetting(
            f"{path}:{line_of(lines, key) or 1}: {'.'.join(key)} is refused in a project file ({why}; a task's code "
            f"could have written this file); put it in {USER_FILE_NAME}, or set {env} (or pass the flag) for "
            f"one run, or remove it from {path.name}")


def _set_keys(data: dict) -> Iterator[tuple[str, ...]]:
    """The classified keys a project file sets (a section set as a whole sets every key under it), and any
    leaf it sets that no classified key covers."""
    for leaf in _leaves(data, ()):
        if leaf == ("sandbox",):  # the shorthand `sandbox: off`
            leaf = ("sandbox", "mode")
        under = [key for key in PROJECT_KEYS if key[:len(leaf)] == leaf]
        yield from under or [leaf]


def _leaves(node: object, prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    if isinstance(node, dict) and (node or not prefix):
        for name, value in node.items():
            yield from _leaves(value, (*prefix, str(name)))
    elif prefix:
        yield prefix


# A project models.yaml may tune a model the shipped or user files define, with these fields only, and may not
# add a model: a model it added (or moved) would decide where prompts, and maybe a key, are sent.
PROJECT_MODEL_FIELDS: dict[str, Rule] = {
    **{name: "free" for name in ("temperature", "tool_mode", "stop_sequences", "schema_resend_every", "stream")},
    **{name: "lower" for name in ("context_window", "max_tokens", "request_timeout", "max_reply_bytes",
                                  "max_retries")},
    **{name: "user" for name in ("name", "base_url", "api_key_env", "model", "price_input", "price_output",
                                 "price_cached", "fallbacks", "retry_after_cap", "backoff_base", "backoff_max")},
}
MODEL_WHY: dict[Rule, str] = {
    "lower": "a project file may lower it, never raise it",
    "user": "it changes which model, endpoint, key or price the name means, or how hard the endpoint is pressed",
}


def model_field_refusal(field: str, project: object, trusted: object) -> str | None:
    """Why a project models.yaml may not set `field` of a model to `project` (the user's or shipped value:
    `trusted`); None when it may."""
    rule = PROJECT_MODEL_FIELDS.get(field)
    if rule is None:
        return "it is not on the list of fields a project file may set"
    return MODEL_WHY.get(rule) if WEAKER[rule](project, trusted) else None
