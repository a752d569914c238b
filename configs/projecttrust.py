"""What a project-local ga.yaml may not do: weaken the sandbox or choose the model.

The rule: a project file (./ga.yaml, in the directory ga runs in) may tighten the sandbox but never loosen it
past what the user's own config, the environment and the flags say, nor pick another model, because a task's
code could have written it (an older ga, a `sandbox: off` run, a model's file_write, a shared checkout). Such a setting is refused with one line naming the
file, the key and where to put it instead; silently ignoring it would run with settings the user did not get.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

from configs.yamlsource import line_of


class WeakerSetting(ValueError):
    """A project file loosens the sandbox; str() is one line naming file, key and fix."""


def _mode(s: Any) -> int:
    return 1 if s.sandbox.mode == "off" else 0


def _network(s: Any) -> Any:
    return s.sandbox.network


def _network_wider(project: Any, baseline: Any) -> bool:
    def rank(value: Any) -> int:  # off < gateway < gateway and listed hosts < open
        return 2 if isinstance(value, list) else {"off": 0, "gateway": 1}.get(value, 3)
    if isinstance(project, list) and isinstance(baseline, list):
        return not set(project) <= set(baseline)
    return rank(project) > rank(baseline)


def _more_paths(project: list, baseline: list) -> bool:
    return not {Path(p).expanduser() for p in project} <= {Path(p).expanduser() for p in baseline}


def _higher(project: Optional[int], baseline: Optional[int]) -> bool:
    return project is not None and baseline is not None and project > baseline


def _limit(name: str) -> Callable[[Any], Optional[int]]:
    return lambda s: getattr(s.sandbox.limits.resolved(), name)


def _differs(a: Any, b: Any) -> bool:
    return a != b


# key -> (value of a Settings, is the first value weaker than the second)
GUARDED: dict[tuple[str, ...], tuple[Callable[[Any], Any], Callable[[Any, Any], bool]]] = {
    ("worker", "model"): (lambda s: s.worker.model, _differs),  # which endpoint (and script) drives the agent
    ("sandbox", "mode"): (_mode, lambda a, b: a > b),
    ("sandbox", "network"): (_network, _network_wider),
    ("sandbox", "writable"): (lambda s: s.sandbox.writable, _more_paths),
    ("sandbox", "bwrap"): (lambda s: s.sandbox.bwrap, _differs),
    ("worker", "allow_write"): (lambda s: s.worker.allow_write, _more_paths),
    ("worker", "allow_read"): (lambda s: s.worker.allow_read, _more_paths),
    ("web", "cdp_url"): (lambda s: s.web.cdp_url, _differs),  # the person's own browser, outside any sandbox
    ("web", "chromium"): (lambda s: s.web.chromium, _differs),  # the program the web tools start
    **{("sandbox", "limits", name): (_limit(name), _higher)
       for name in ("memory", "processes", "file_size", "cpu_seconds", "tmp_size")},
}


def check_project(settings: Any, baseline: Any, path: Path, data: dict, lines: dict) -> None:
    """Raise WeakerSetting when `settings` (with the project file at `path`) is weaker than `baseline`
    (the same layers without it) on a key the project file sets."""
    for key, (value, weaker) in GUARDED.items():
        if not _sets(data, key) or not weaker(value(settings), value(baseline)):
            continue
        env = "GA_" + "__".join(part.upper() for part in key)
        effect = "choose the model endpoint" if key == ("worker", "model") else "weaken the sandbox"
        raise WeakerSetting(
            f"{path}:{line_of(lines, key) or 1}: {'.'.join(key)} is refused in a project file (it would {effect}, "
            f"and a task's code could have written this file); put it in ~/.config/ga/config.yaml, or set {env} "
            f"(or pass the flag) for one run, or remove it from {path.name}")


def _sets(data: dict, key: tuple[str, ...]) -> bool:
    node: Any = data
    for part in key:
        if isinstance(node, (bool, str)) and key[:2] == ("sandbox", "mode") and part == "mode":
            return True  # the shorthand `sandbox: off`
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True
