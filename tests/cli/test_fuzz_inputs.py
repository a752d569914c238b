"""Property-based fuzzing of everything `ga` reads (tasks files, config files, model files): mutated YAML,
raw bytes, deep nesting. Never a traceback: always exit 0, or exit 2 with nothing but `error:` lines, each
one line. In-process (CliRunner) for speed, plus a few examples through the real `ga` process."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ga_support import invoke_ga, run_ga
from tests.hostile_support import SCRIPT

pytestmark = pytest.mark.slow  # 60 generated examples a test: 5-20 s each, too long for the fast lane

TASKS = f"""version: 1
name: fuzz
defaults: {{model: "scripted:{SCRIPT}", max_turns: 4, timeout: 30, tools: [file_read, code_run]}}
concurrency: 2
budget: {{tokens: 1000, cost: 1.0}}
tasks:
  - id: one
    prompt: "say hello"
    inputs: [a.txt]
  - prompt: &p "count {{{{x}}}}"
matrix:
  template: *p
  items: [{{x: 1}}, {{x: 2}}]
  id: "m-{{{{x}}}}"
reduce: {{prompt: "merge", output: out.md}}
""".encode()
CONFIG = b"""worker:
  max_turns: 5
  max_cost: 2.5
fanout:
  concurrency: 2
  timeout: 60
context: {context_tokens: 20000, low_water: 0.3}
yaml: {max_depth: 50}
"""
MODELS = b"""models:
  m1:
    base_url: http://127.0.0.1:9/v1
    model: fake
    context_window: 8000
    price_input: 1.5
    price_output: 2.0
"""
TOKENS = [b"&a ", b"*a", b"<<: ", b"!!python/object:os.system ", b"---\n", b"\x00", b"\t", b"? ", b".nan", b".inf",
          b"-5", b"2024-13-45", b"!!binary ", b"%YAML 1.1\n", b"{", b"[", b"]", b"}", b": ", b"\n  - ", b"\xff",
          b"\xc3", b"'", b'"', b"|\n", b"{{", b"}}", b"../../etc/passwd", b"/etc/shadow", b"1e999", b"!!int ", b"~"]

scalars = st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats() | st.text(max_size=20)
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.sampled_from(["version", "tasks", "prompt", "defaults", "matrix", "items",
                                                            "inputs", "model", "worker", "fanout", "models", "timeout",
                                                            "max_turns", "reduce", "allow_paths", "truncate", "x"]),
                                           inner, max_size=4), max_leaves=20)


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 6))):
        where = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "token"]))
        if kind == "insert":
            data[where:where] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete":
            del data[where:where + draw(st.integers(1, 20))]
        elif kind == "replace":
            data[where:where + 1] = draw(st.binary(min_size=1, max_size=1))
        else:
            data[where:where] = draw(st.sampled_from(TOKENS))
    return bytes(data)


def nested(depth: int, mapping: bool) -> bytes:
    return (b"{a: " * depth + b"1" + b"}" * depth) if mapping else (b"[" * depth + b"]" * depth)


def hostile(base: bytes, top: str) -> st.SearchStrategy[bytes]:
    structured = documents.map(lambda doc: yaml.safe_dump(doc, allow_unicode=True).encode())
    deep = st.builds(lambda d, m: f"{top}: ".encode() + nested(d, m) + b"\n", st.integers(1, 3000), st.booleans())
    return st.one_of(mutated(base), structured, deep, st.binary(max_size=300))


FUZZ = settings(max_examples=60, deadline=timedelta(seconds=20), derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@contextmanager
def folder() -> Iterator[Path]:
    """A fresh current directory (ga.yaml and models.yaml are read from it) with one input file."""
    before = os.getcwd()
    with tempfile.TemporaryDirectory() as name:
        os.chdir(name)
        try:
            (Path(name) / "a.txt").write_text("hello\n")
            yield Path(name)
        finally:
            os.chdir(before)


def assert_clean(exit_code: int, output: str, exception: BaseException | None = None) -> None:
    assert exception is None or isinstance(exception, SystemExit), repr(exception)
    assert "Traceback" not in output, output[-2000:]
    assert exit_code in (0, 2), (exit_code, output[-2000:])
    if exit_code == 2:
        lines = [line for line in output.splitlines() if line.strip()]
        assert lines and all(line.startswith("error: ") for line in lines), output[-2000:]


def dry_run(here: Path, tasks: bytes) -> None:
    (here / "tasks.yaml").write_bytes(tasks)
    result = invoke_ga("fanout", "tasks.yaml", "--dry-run", "--json", "--out", str(here / "runs"))
    assert_clean(result.exit_code, result.output if result.exit_code else "", result.exception)
    assert not (here / "runs").exists()


@FUZZ
@given(hostile(TASKS, "tasks"))
def test_fuzzed_tasks_files_never_give_a_traceback(content: bytes) -> None:
    with folder() as here:
        dry_run(here, content)


@FUZZ
@given(hostile(CONFIG, "worker"))
def test_fuzzed_config_files_never_give_a_traceback(content: bytes) -> None:
    with folder() as here:
        (here / "ga.yaml").write_bytes(content)
        dry_run(here, TASKS)


@FUZZ
@given(hostile(MODELS, "models"))
def test_fuzzed_models_files_never_give_a_traceback(content: bytes) -> None:
    with folder() as here:
        (here / "models.yaml").write_bytes(content)
        dry_run(here, TASKS.replace(f"scripted:{SCRIPT}".encode(), b"m1"))


@FUZZ
@given(hostile(SCRIPT.read_bytes(), "tasks"))
def test_fuzzed_model_scripts_are_one_line_errors(content: bytes) -> None:
    from worker.scripted import ScriptError, load_script

    with folder() as here:
        (here / "script.yaml").write_bytes(content)
        try:
            load_script(here / "script.yaml")
        except ScriptError as exc:
            assert "\n" not in str(exc) and str(exc)
        dry_run(here, TASKS.replace(str(SCRIPT).encode(), b"script.yaml"))


@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hostile(TASKS, "tasks"))
def test_fuzzed_tasks_files_through_the_real_ga_process(content: bytes) -> None:
    with folder() as here:
        (here / "tasks.yaml").write_bytes(content)
        proc = run_ga("fanout", "tasks.yaml", "--dry-run", "--json", cwd=here, timeout=60)
        assert_clean(proc.returncode, proc.stderr)
