"""Sessions a person finds again, in a real 80x24 terminal and real processes: `ga chat` shows its id at the start
and the way back at the end, has /help, refuses a bad --model before the first message; `last` is the person's
last chat or run, never a trigger's task; `ga sessions show` prints the transcript; `ga runs show last`."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pexpect
import yaml

from tests.ga_support import drawn, on_terminal, run_ga, spawn_terminal

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "configs" / "examples" / "scripts" / "hello.yaml"
NO_MODEL = {"OPENAI_API_KEY": None, "GA_MODEL": None}


def test_a_chat_shows_its_id_lists_its_commands_and_says_how_to_come_back(tmp_path: Path) -> None:
    child = spawn_terminal("chat", "--model", f"scripted:{HELLO}", cwd=tmp_path, env=NO_MODEL)
    child.expect(r"session (chat-\d{8}-\d{6}-[0-9a-f]{6}) \(new\)")
    session = child.match.group(1)
    child.expect_exact("you> ")
    child.sendline("/help")
    child.expect_exact("/resume ID")
    child.expect_exact("you> ")
    child.sendline("Hello")
    child.expect_exact("I am ga's offline scripted model")
    child.expect_exact("you> ")
    child.sendline("/cost")
    child.expect(r"([\d,]+) tokens \(")
    cost = int(child.match.group(1).replace(",", ""))
    child.sendline("/quit")
    rest = child.read()
    child.close()
    assert child.exitstatus == 0
    lines = drawn(rest)
    assert any(f"ga chat --resume {session}" in line for line in lines), lines
    [record] = json.loads(run_ga("sessions", "list", "--json", cwd=tmp_path, env=NO_MODEL).stdout)
    assert record["id"] == session and record["origin"] == "chat" and record["usage"]["total"] == cost

    shown, status = on_terminal("sessions", "show", session, cwd=tmp_path, env=NO_MODEL)
    assert status == 0, shown
    text = "\n".join(shown)
    assert "Hello" in text and "I am ga's offline scripted model" in text and f"ga chat --resume {session}" in text
    assert all(len(line) <= 80 for line in shown), shown


def test_a_bad_model_is_refused_before_the_first_message(tmp_path: Path) -> None:
    child = spawn_terminal("chat", "--model", "no-such-model", cwd=tmp_path, env=NO_MODEL)
    index = child.expect(["you> ", pexpect.EOF])
    out = child.before
    child.close()
    assert index == 1 and child.exitstatus == 2, out
    assert "no-such-model" in out and "error:" in out


def test_last_is_the_persons_session_never_a_triggers(tmp_path: Path) -> None:
    person = run_ga("run", "Hello", "--model", f"scripted:{HELLO}", "--json", cwd=tmp_path, env=NO_MODEL)
    assert person.returncode == 0, person.stderr
    mine = json.loads(person.stdout)["task_id"]
    trigger = tmp_path.parent / f"{tmp_path.name}-trigger.py"  # never where its tasks may write (triggers/authority.py)
    trigger.write_text("INTERVAL = 0\nONCE = True\n\ndef check():\n    return 'Hello from the trigger'\n")
    reflected = run_ga("reflect", str(trigger), "--model", f"scripted:{HELLO}", "--max-cycles", "2", cwd=tmp_path,
                       env=NO_MODEL)
    assert "I am ga's offline scripted model" in reflected.stdout, reflected.stdout + reflected.stderr  # its answer
    assert reflected.returncode == 0, reflected.stderr  # a question answered: done
    sessions = json.loads(run_ga("sessions", "list", "--json", cwd=tmp_path, env=NO_MODEL).stdout)
    assert [s["origin"] for s in sessions] == ["reflect", "run"]  # the trigger's is the newest

    child = spawn_terminal("chat", "--resume", "last", cwd=tmp_path, env=NO_MODEL)
    child.expect(r"session (\S+)")
    assert child.match.group(1) == mine
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    went_on = run_ga("run", "--continue", "last", "Hello again", "--json", cwd=tmp_path, env=NO_MODEL)
    assert json.loads(went_on.stdout)["task_id"] == mine, went_on.stderr


def test_runs_show_last_is_the_newest_run(tmp_path: Path) -> None:
    model = tmp_path / "answer.yaml"
    model.write_text(yaml.safe_dump({"tasks": [{"match": ".*", "turns": [{"content": "done"}]}]}))
    runs = tmp_path / "runs"
    ids = []
    for name in ("older", "newer"):
        tasks = tmp_path / f"{name}.yaml"
        tasks.write_text(yaml.safe_dump({"version": 1, "name": name, "defaults": {"model": f"scripted:{model}"},
                                         "tasks": [{"id": "t", "prompt": "say done"}]}))
        done = run_ga("fanout", str(tasks), "--out", str(runs), "--json", cwd=tmp_path, env=NO_MODEL)
        ids.append(json.loads(done.stdout)["run_id"])
    shown = run_ga("runs", "show", "last", "--out", str(runs), cwd=tmp_path, env=NO_MODEL)
    assert shown.returncode == 0 and re.match(rf"run {ids[1]}: ", shown.stdout), shown.stdout + shown.stderr
    empty = run_ga("runs", "show", "last", "--out", str(tmp_path / "none"), cwd=tmp_path, env=NO_MODEL)
    assert empty.returncode == 2 and "no runs in" in empty.stderr and "ga fanout FILE" in empty.stderr


def test_a_chat_shows_the_running_tool_and_its_seconds(tmp_path: Path) -> None:
    script = tmp_path / "sleepy.yaml"
    script.write_text(yaml.safe_dump({"tasks": [{"match": ".*", "turns": [
        {"content": "Running it.", "tool_calls": [{"name": "code_run", "arguments": {
            "type": "bash", "script": "sleep 4; echo slept", "timeout": 60}}]},
        {"content": "It said:", "echo_last_tool_result": True}]}]}))
    child = spawn_terminal("chat", "--model", f"scripted:{script}", cwd=tmp_path, env=NO_MODEL)
    child.expect_exact("you> ")
    child.sendline("wait a little")
    child.expect(r"code_run [1-3]s")  # the screen moves while the tool runs
    child.expect(r"code_run\S* '.* -> (\x1b\[[0-9;]*m)?ok")  # then the turn's line in its place
    child.expect_exact("slept")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
