"""Read YAML and remember where every key stands, so errors can say file:line."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class YamlError(ValueError):
    """A YAML file that cannot be parsed; str() is one line with file:line."""


def load_yaml(path: Path) -> tuple[Any, dict[tuple, int]]:
    """Return the parsed document and a map from key paths (tuples) to 1-based lines."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YamlError(f"{where}: YAML syntax error: {problem}; fix the syntax at that line") from None
    lines: dict[tuple, int] = {}
    if node is not None:
        _walk(node, (), lines)
    return data, lines


def _walk(node: yaml.Node, prefix: tuple, lines: dict[tuple, int]) -> None:
    lines.setdefault(prefix, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = prefix + (key_node.value,)
            lines[key] = key_node.start_mark.line + 1
            _walk(value_node, key, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, prefix + (index,), lines)


def line_of(lines: dict[tuple, int], loc: tuple) -> int | None:
    """The line of the deepest known prefix of loc."""
    for cut in range(len(loc), -1, -1):
        if tuple(loc[:cut]) in lines:
            return lines[tuple(loc[:cut])]
    return None
