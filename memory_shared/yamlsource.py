"""The one YAML loader: every YAML file ga reads goes through `load_yaml`.

It remembers where every key stands (errors say file:line) and refuses hostile files before they
cost anything: a file over `max_bytes`, bytes that are not UTF-8, nesting deeper than `max_depth`,
aliases that would expand to more than `max_alias_nodes` extra nodes (a "billion laughs" bomb),
and a key given twice in one mapping. Every problem is a YamlError whose str() is one line.

The values are built here from the parser's events, without recursion, so a deep file is counted
before anything recursive (pydantic) sees it. A file with anchors, aliases, explicit tags, merge keys or
keys that are not scalars gets a node tree first (`_Composer`, then PyYAML's SafeConstructor); every
other file, which is nearly every file ga reads, is built without one (`_Builder`): the tree of 10,000
one-line tasks was twice the size of their values, and it was the peak of a large fan-out's memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser is ~10x faster


class YamlError(ValueError):
    """A YAML file that cannot be read; str() is one line with file:line and the fix."""


@dataclass(frozen=True)
class YamlLimits:
    max_bytes: int = 20_000_000
    max_depth: int = 100
    max_alias_nodes: int = 100_000


_limits = YamlLimits()


def configure(limits: YamlLimits) -> None:
    """Set the limits for every later read (settings call this once they are loaded)."""
    global _limits
    _limits = limits


def current_limits() -> YamlLimits:
    return _limits


def load_yaml(path: Path, limits: Optional[YamlLimits] = None) -> tuple[Any, dict[tuple, int]]:
    """Return the parsed document (unchecked: what the file holds) and a map from key paths (tuples) to 1-based lines."""
    path = Path(path)
    limits = limits or _limits
    with path.open("rb") as handle:
        raw = handle.read(limits.max_bytes + 1)
    if len(raw) > limits.max_bytes:
        raise YamlError(f"{path}: larger than {limits.max_bytes:,} bytes (yaml.max_bytes); split the file or raise "
                        "yaml.max_bytes in ga.yaml")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlError(f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save the file "
                        "as UTF-8") from None
    return load_text(text, str(path), limits)


def load_mapping(path: Path, *, missing: str, shape: str) -> tuple[dict, dict[tuple, int]]:
    """A YAML file that must hold a mapping: (data, lines). YamlError, one line, when the file is missing
    ("<path>: <missing>"), unreadable, or not a mapping ("<path>:1: <shape>")."""
    path = Path(path)
    if not path.is_file():
        raise YamlError(f"{path}: {missing}")
    data, lines = load_yaml(path)
    if not isinstance(data, dict):
        raise YamlError(f"{path}:1: {shape}")
    return data, lines


def load_text(text: str, where: str, limits: Optional[YamlLimits] = None) -> tuple[Any, dict[tuple, int]]:
    """Parse YAML text (`where` names it in errors) under the same limits as a file."""
    limits = limits or _limits
    try:
        try:
            return _Builder(where, limits).build(text)
        except _NeedsNodes:
            pass
        node = _Composer(where, limits).compose(text)
        data = _construct(node) if node is not None else None
    except YamlError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"{where}:{mark.line + 1}" if mark else where
        problem = exc.problem or exc.context or str(exc).splitlines()[0]
        if "nesting depth" in problem:  # libyaml's own limit (newer PyYAML wheels) can come before ours
            raise YamlError(f"{at}: nested deeper than libyaml allows (and yaml.max_depth, {limits.max_depth} "
                            "levels); flatten the structure") from None
        raise YamlError(f"{at}: YAML syntax error: {_one_line(problem)}; fix the syntax at that line") from None
    except yaml.YAMLError as exc:  # ReaderError: a character YAML does not allow (NUL, other controls)
        character = getattr(exc, "character", None)
        code = ord(character) if isinstance(character, str) else character
        what = f"character U+{code:04X} at offset {getattr(exc, 'position', '?')}" if character is not None else \
            _one_line(str(exc))
        raise YamlError(f"{where}: YAML cannot contain {what}; remove it") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a date like 2024-13-45
        raise YamlError(f"{where}: a value cannot be read ({_one_line(str(exc))}); quote it to keep it as text") from None
    lines: dict[tuple, int] = {}
    if node is not None:
        _walk(node, lines)
    return data, lines


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:200]


class _Composer:
    """Nodes from parser events, iteratively, counting depth, alias expansion and duplicate keys."""

    def __init__(self, where: str, limits: YamlLimits):
        self.where, self.limits = where, limits
        self.resolver = Resolver()
        self.anchors: dict[str, yaml.Node] = {}
        self.sizes: dict[int, int] = {}  # id(node) -> nodes it expands to
        self.alias_nodes = 0
        self.marks: dict[int, yaml.Mark] = {}  # line -> the one mark the nodes starting on it share

    def mark(self, event: yaml.Event) -> yaml.Mark:
        """The start of an event's node, by line only: the parser's own marks (two per node, each with a dict)
        were most of a large file's node tree (20 MB of 10,000 one-line tasks); errors name lines, not columns."""
        line = event.start_mark.line
        found = self.marks.get(line)
        if found is None:
            found = self.marks[line] = yaml.Mark(self.where, 0, line, 0, None, 0)
        return found

    def compose(self, text: str) -> Optional[yaml.Node]:
        events = yaml.parse(text, Loader=_Loader)
        root: Optional[yaml.Node] = None
        documents = 0
        stack: list[list] = []  # [node, pending key or None, {key: line}, nodes it expands to so far]
        for event in events:
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise _second_document(self.where, event)
                self.anchors = {}
                continue
            if isinstance(event, (yaml.StreamStartEvent, yaml.StreamEndEvent, yaml.DocumentEndEvent)):
                continue
            if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                done, _, _, size = stack.pop()
                self.sizes[id(done)] = size
                if stack:
                    stack[-1][3] += size
                continue
            elif isinstance(event, yaml.AliasEvent):
                node = self.alias(event)
            elif isinstance(event, yaml.ScalarEvent):
                tag = event.tag if event.tag not in (None, "!") else self.resolver.resolve(
                    yaml.ScalarNode, event.value, event.implicit)
                node = yaml.ScalarNode(tag, event.value, self.mark(event), None, style=event.style)
                self.anchor(event, node)
            else:  # a collection starts
                if len(stack) >= self.limits.max_depth:
                    raise _too_deep(self.where, event, self.limits)
                if isinstance(event, yaml.SequenceStartEvent):
                    tag = event.tag if event.tag not in (None, "!") else self.resolver.resolve(
                        yaml.SequenceNode, None, event.implicit)
                    node = yaml.SequenceNode(tag, [], self.mark(event), None, flow_style=event.flow_style)
                else:
                    tag = event.tag if event.tag not in (None, "!") else self.resolver.resolve(
                        yaml.MappingNode, None, event.implicit)
                    node = yaml.MappingNode(tag, [], self.mark(event), None, flow_style=event.flow_style)
                self.anchor(event, node)
                if stack:
                    self.attach(stack, node)
                else:
                    root = node
                stack.append([node, None, {}, 1])
                continue
            if stack:
                self.attach(stack, node)
                stack[-1][3] += self._size(node)
            else:
                root = node
        return root

    def anchor(self, event: yaml.NodeEvent, node: yaml.Node) -> None:
        if event.anchor is not None:
            self.anchors[event.anchor] = node

    def alias(self, event: yaml.AliasEvent) -> yaml.Node:
        node = self.anchors.get(event.anchor)
        line = event.start_mark.line + 1
        if node is None:
            raise YamlError(f"{self.where}:{line}: alias *{event.anchor} names no anchor defined above it; define "
                            f"&{event.anchor} first")
        if id(node) not in self.sizes and not isinstance(node, yaml.ScalarNode):
            raise YamlError(f"{self.where}:{line}: alias *{event.anchor} refers to a node that contains it; "
                            "remove the recursion")
        self.alias_nodes += self._size(node)
        if self.alias_nodes > self.limits.max_alias_nodes:
            raise YamlError(f"{self.where}:{line}: aliases expand to more than {self.limits.max_alias_nodes:,} nodes "
                            "(yaml.max_alias_nodes); write the values out or use fewer aliases")
        return node

    def _size(self, node: yaml.Node) -> int:
        return self.sizes.get(id(node), 1)

    def attach(self, stack: list[list], node: yaml.Node) -> None:
        frame = stack[-1]
        parent = frame[0]
        if isinstance(parent, yaml.SequenceNode):
            parent.value.append(node)
        elif frame[1] is None:
            frame[1] = node
        else:
            key = frame[1]
            frame[1] = None
            parent.value.append((key, node))
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                seen = frame[2]
                ident = (key.tag, key.value)
                line = key.start_mark.line + 1
                if ident in seen:
                    raise _duplicate(self.where, key.value, line, seen[ident])
                seen[ident] = line


class _NeedsNodes(Exception):
    """The file uses what only a node tree reads right: an anchor, an alias, an explicit tag, a merge key or a
    key that is not a scalar."""


_BUILT_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "timestamp"))
_STR = "tag:yaml.org,2002:str"
_NO_KEY = object()  # a mapping's frame between its entries


class _Builder:
    """Values and key lines straight from the parser's events, with the composer's checks (one document, depth,
    duplicate keys), for a file that needs no node tree; `_NeedsNodes` at the first thing that does. The
    values and lines are those `_construct` and `_walk` give for the same file
    (tests/memory_shared/test_yaml_builder.py)."""

    def __init__(self, where: str, limits: YamlLimits):
        self.where, self.limits = where, limits
        self.resolver = Resolver()
        self.constructor = SafeConstructor()

    def build(self, text: str) -> tuple[object, dict[tuple, int]]:
        lines: dict[tuple, int] = {}
        root: object = None
        documents = 0
        stack: list[list] = []  # [container, its key path, pending key or _NO_KEY, its text, {(tag, text): line}]
        for event in yaml.parse(text, Loader=_Loader):
            kind = type(event)
            if kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise _second_document(self.where, event)
                continue
            if kind in (yaml.StreamStartEvent, yaml.StreamEndEvent, yaml.DocumentEndEvent):
                continue
            if kind in (yaml.SequenceEndEvent, yaml.MappingEndEvent):
                stack.pop()
                continue
            if kind is yaml.AliasEvent or event.anchor is not None or event.tag not in (None, "!"):
                raise _NeedsNodes
            line = event.start_mark.line + 1
            tag = ""
            if kind is yaml.ScalarEvent:
                tag, value = self.scalar(event)
            elif len(stack) >= self.limits.max_depth:
                raise _too_deep(self.where, event, self.limits)
            else:
                value = [] if kind is yaml.SequenceStartEvent else {}
            if not stack:
                root, path = value, ()
                lines.setdefault(path, line)
            else:
                frame = stack[-1]
                parent = frame[0]
                if isinstance(parent, list):
                    path = frame[1] + (len(parent),)
                    parent.append(value)
                    lines.setdefault(path, line)
                elif frame[2] is _NO_KEY:  # a key
                    if tag not in _BUILT_TAGS:  # a collection as a key, a merge key (<<), a value key (=)
                        raise _NeedsNodes
                    seen = frame[4]
                    ident = (tag, event.value)
                    if ident in seen:
                        raise _duplicate(self.where, event.value, line, seen[ident])
                    seen[ident] = line
                    frame[2], frame[3] = value, event.value
                    lines[frame[1] + (event.value,)] = line
                    continue
                else:
                    path = frame[1] + (frame[3],)
                    parent[frame[2]] = value
                    frame[2] = _NO_KEY
            if kind is not yaml.ScalarEvent:
                stack.append([value, path, _NO_KEY, None, {}])
        return root, lines

    def scalar(self, event: yaml.ScalarEvent) -> tuple[str, object]:
        tag = self.resolver.resolve(yaml.ScalarNode, event.value, event.implicit)
        if tag == _STR:
            return tag, event.value
        if tag not in _BUILT_TAGS:
            raise _NeedsNodes
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
        return tag, self.constructor.yaml_constructors[tag](self.constructor, node)


def _second_document(where: str, event: yaml.Event) -> YamlError:
    return YamlError(f"{where}:{event.start_mark.line + 1}: more than one YAML document; keep one document per file "
                     "(remove the '---')")


def _too_deep(where: str, event: yaml.Event, limits: YamlLimits) -> YamlError:
    return YamlError(f"{where}:{event.start_mark.line + 1}: nested deeper than {limits.max_depth} levels "
                     "(yaml.max_depth); flatten the structure")


def _duplicate(where: str, key: str, line: int, first: int) -> YamlError:
    return YamlError(f"{where}:{line}: duplicate key '{_one_line(key)[:60]}' (first at line {first}); remove one of "
                     "them (a second key would silently replace the first)")


def _construct(node: yaml.Node) -> object:
    return SafeConstructor().construct_document(node)


def _walk(root: yaml.Node, lines: dict[tuple, int]) -> None:
    """Key paths to lines; iterative (depth is already bounded, aliases already counted)."""
    todo: list[tuple[yaml.Node, tuple]] = [(root, ())]
    while todo:
        node, prefix = todo.pop()
        lines.setdefault(prefix, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = prefix + (key_node.value if isinstance(key_node, yaml.ScalarNode) else "?",)
                lines[key] = key_node.start_mark.line + 1
                todo.append((value_node, key))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                todo.append((item, prefix + (index,)))


def line_of(lines: dict[tuple, int], loc: tuple) -> int | None:
    """The line of the deepest known prefix of loc."""
    for cut in range(len(loc), -1, -1):
        if tuple(loc[:cut]) in lines:
            return lines[tuple(loc[:cut])]
    return None
