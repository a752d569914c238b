"""Text a model or its code wrote is shown on the person's terminal, never obeyed: an answer carrying escape
sequences (clear the screen, set the clipboard through OSC 52, retitle the window) reaches `ga run`, `ga fanout`
and `ga runs show` as visible symbols (orchestrator/views/printable.py). Real `ga` processes in a real 80x24
terminal (pexpect), drawn by pyte."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.ga_support import drawn, spawn_terminal

ORDERS = ("\x1b[2J", "\x1b]52;", "\x1b]0;")  # clear the screen, set the clipboard, retitle the window
PRINTS = r"printf '\033[2J\033]52;c;ZXZpbA==\007\033]0;owned\007the answer\n'"


def hostile_model(folder: Path) -> str:
    script = folder / "hostile.yaml"
    script.write_text(yaml.safe_dump({"tasks": [{"match": ".*", "turns": [
        {"content": "printing", "tool_calls": [{"name": "code_run", "arguments": {"type": "bash", "script": PRINTS}}]},
        {"content": "It said:", "echo_last_tool_result": True}]}]}))
    return f"scripted:{script}"


def terminal(*args: str, cwd: Path) -> tuple[str, list[str]]:
    child = spawn_terminal(*args, cwd=cwd)
    raw = child.read()
    child.close()
    return raw, drawn(raw)


@pytest.mark.proc
def test_escape_sequences_in_an_answer_are_drawn_not_obeyed(tmp_path: Path) -> None:
    model = hostile_model(tmp_path)
    (tmp_path / "tasks.yaml").write_text(yaml.safe_dump({"version": 1, "defaults": {"model": model},
                                                        "tasks": [{"id": "t1", "prompt": "print it"}]}))
    shown = {
        "ga run": terminal("run", "print it", "--model", model, cwd=tmp_path),
        "ga fanout": terminal("fanout", "tasks.yaml", "--out", "runs", cwd=tmp_path),
        "ga runs show": terminal("runs", "show", "last", "t1", "--out", "runs", cwd=tmp_path),
    }
    for command, (raw, _) in shown.items():
        assert not [order for order in ORDERS if order in raw], (command, raw[-1500:])
    answer = [line for line in shown["ga runs show"][1] if "the answer" in line]
    assert answer and all("]52;c;ZXZpbA==" in line and line.endswith("│") for line in answer), answer  # seen, in place
    assert any("␛]52;c;ZXZpbA==␇" in line for line in shown["ga run"][1]), shown["ga run"][1]  # the streamed text
