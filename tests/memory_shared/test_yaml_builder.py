"""The one YAML loader builds most files straight from the parser's events (memory_shared/yamlsource.py
`_Builder`): it must give what the node tree gives (values, key lines, errors), and leave to the node tree
every file it cannot read the same way."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memory_shared.yamlsource import YamlError, YamlLimits, _Builder, _Composer, _construct, _NeedsNodes, _walk

ROOT = Path(__file__).resolve().parents[2]
LIMITS = YamlLimits()

SAMPLES = {
    "tasks": "version: 1\nname: x\ntasks:\n  - {id: t1, prompt: \"a\"}\n  - id: t2\n    prompt: |\n      two\n      lines\n",
    "scalars": "i: 12\nh: 0x1f\nf: 1.5\ne: 1e3\ninf: .inf\nb: yes\nt: true\nn: ~\nnull2: null\nd: 2024-05-01\n"
               "ts: 2024-05-01 10:00:00\nq: '12'\ndq: \"true\"\nempty:\nstr: plain text\n",
    "keys": "1: one\n2.5: float\ntrue: bool\n~: none\n\"quoted\": q\n",
    "nested": "a:\n  b:\n    - 1\n    - [2, 3, {c: d}]\n    - {}\n    - []\n  e: {f: [g, {h: i}]}\n",
    "root list": "- a\n- b: c\n  d: e\n- [f]\n",
    "root scalar": "just text\n",
    "empty": "",
    "comments": "# only a comment\na: 1 # trailing\n",
    "non-specific tag": "a: ! 12\n",
}

NEEDS_NODES = {
    "anchor and alias": "base: &b {x: 1}\nother: *b\n",
    "merge key": "base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n",
    "explicit tag": "a: !!str 12\n",
    "set": "s: !!set {a, b}\n",
    "complex key": "? [a, b]\n: c\n",
    "value key": "=: v\n",
}

ERRORS = {
    "duplicate": "a: 1\nb: 2\na: 3\n",
    "nested duplicate": "x:\n  - {k: 1, k: 2}\n",
    "two documents": "a: 1\n---\nb: 2\n",
    "deep": "a: " + "[" * 101 + "]" * 101 + "\n",
}


def by_nodes(text: str) -> tuple[object, dict]:
    node = _Composer("f.yaml", LIMITS).compose(text)
    lines: dict[tuple, int] = {}
    if node is not None:
        _walk(node, lines)
    return (_construct(node) if node is not None else None), lines


def repository_yaml() -> list[Path]:
    found = [p for pattern in ("configs/**/*.yaml", "bench/**/*.yaml", "tests/**/*.yaml", "schemas/**/*.yaml",
                               "mkdocs.yml") for p in ROOT.glob(pattern)]
    return sorted(p for p in found if p.stat().st_size < 1_000_000)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_builder_gives_what_the_node_tree_gives(name):
    text = SAMPLES[name]
    assert _Builder("f.yaml", LIMITS).build(text) == by_nodes(text)


def test_every_yaml_file_of_the_repository_reads_the_same_both_ways():
    files = repository_yaml()
    assert len(files) > 20
    built = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        try:
            expected = by_nodes(text)
        except (YamlError, yaml.YAMLError, ValueError):
            continue  # a fixture of a bad file: the errors are compared below
        try:
            assert _Builder(str(path), LIMITS).build(text) == expected, path
            built += 1
        except _NeedsNodes:
            pass
    assert built > len(files) // 2  # most files need no node tree


@pytest.mark.parametrize("name", sorted(NEEDS_NODES))
def test_what_only_a_node_tree_reads_is_left_to_it(name):
    with pytest.raises(_NeedsNodes):
        _Builder("f.yaml", LIMITS).build(NEEDS_NODES[name])


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_a_bad_file_gets_the_same_one_line_error_both_ways(name):
    with pytest.raises(YamlError) as built:
        _Builder("f.yaml", LIMITS).build(ERRORS[name])
    with pytest.raises(YamlError) as composed:
        by_nodes(ERRORS[name])
    assert str(built.value) == str(composed.value) and "\n" not in str(built.value)
