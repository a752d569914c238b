"""`ga chat` in a real terminal (pexpect): a follow-up uses the earlier answer, Ctrl-C stops a turn and
not the session, /cost, and `--resume` the next day; `ga run --continue` and `ga sessions list`."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect
import pytest

from tests.fanout_support import read_jsonl, start_server

ROOT = Path(__file__).resolve().parents[1]
CONVERSATION = {"tasks": [{"match": "capital", "turns": [
    {"content": "Paris is the capital of France."},
    {"content": "About 2.1 million people live in Paris."},
    {"content": "Timing it.", "tool_calls": [{"name": "code_run", "arguments": {
        "type": "bash", "script": "echo $$ > sleeper.pid; sleep 60", "timeout": 120}}]},
    {"content": "The Seine flows through Paris."},
]}]}


@pytest.fixture()
def server(tmp_path: Path):
    server = start_server(CONVERSATION, tmp_path / "requests.jsonl")
    yield server
    server.stop()


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "GA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT), "COLUMNS": "120",
           "TERM": "dumb"}
    env.pop("GA_MODEL", None)
    return env


def _chat(tmp_path: Path, *args: str) -> pexpect.spawn:
    child = pexpect.spawn(sys.executable, ["-m", "cli", "chat", *args], cwd=str(tmp_path), env=_env(tmp_path),
                          encoding="utf-8", timeout=60, dimensions=(40, 120))
    child.expect_exact("you> ")
    return child


def _requests(tmp_path: Path) -> list[list[dict]]:
    return [r["body"]["messages"] for r in read_jsonl(tmp_path / "requests.jsonl")]


def test_a_conversation_goes_on_survives_ctrl_c_and_resumes(tmp_path: Path, server) -> None:
    child = _chat(tmp_path, "--model", f"scripted@{server.base_url}")
    child.sendline("What is the capital of France?")
    child.expect_exact("Paris is the capital of France.")
    child.expect_exact("you> ")
    child.sendline("How many people live there?")
    child.expect_exact("About 2.1 million people live in Paris.")
    child.expect_exact("you> ")
    second = _requests(tmp_path)[-1]  # the follow-up was asked with the earlier answer in the conversation
    assert [m["role"] for m in second[-3:]] == ["user", "assistant", "user"]
    assert second[-2]["content"] == "Paris is the capital of France." and second[-1]["content"] == "How many people live there?"

    child.sendline("How long does a walk around it take?")  # the model starts a 60 s script
    pid_file = tmp_path / "sleeper.pid"
    for _ in range(200):
        if pid_file.is_file() and pid_file.read_text().strip():
            break
        child.expect([pexpect.TIMEOUT], timeout=0.1)
    sleepers = _sleepers(tmp_path)  # host pids: the script's $$ is its pid inside code_run's PID namespace
    assert sleepers, "the turn's script is not running"
    child.sendintr()
    child.expect_exact("stopping this turn")
    child.expect_exact("stopped")
    child.expect_exact("you> ")
    assert not any(_alive(pid) for pid in sleepers), "Ctrl-C left the turn's script running"
    child.sendline("/cost")
    child.expect(r"[\d,]+ tokens \(")
    child.sendline("/quit")
    child.expect(pexpect.EOF)

    sessions = json.loads(pexpect.run(f"{sys.executable} -m cli sessions list --json", cwd=str(tmp_path),
                                      env=_env(tmp_path), encoding="utf-8"))
    assert len(sessions) == 1 and sessions[0]["first_task"] == "What is the capital of France?"
    assert sessions[0]["exchanges"] == 3 and sessions[0]["usage"]["total"] > 0

    child = _chat(tmp_path, "--resume", "last")  # later: the same session, its model remembered
    child.sendline("And its river?")
    child.expect_exact("The Seine flows through Paris.")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    last = _requests(tmp_path)[-1]
    assert last[-1]["content"] == "And its river?"
    assert any(m.get("content") == "About 2.1 million people live in Paris." for m in last)
    tool_ids = {c["id"] for m in last for c in m.get("tool_calls") or []}
    assert tool_ids <= {m["tool_call_id"] for m in last if m["role"] == "tool"}  # the stopped call was answered


def test_ga_run_continue_follows_up_in_the_same_history(tmp_path: Path, server) -> None:
    from worker.history import replay

    model = f"scripted@{server.base_url}"
    first = pexpect.run(f"{sys.executable} -m cli run 'What is the capital of France?' --model {model} --json",
                        cwd=str(tmp_path), env=_env(tmp_path), encoding="utf-8")
    first = json.loads(first[first.index("{"):])
    session_id = first["task_id"]
    out = pexpect.run(f"{sys.executable} -m cli run --continue {session_id[:12]} 'How many people live there?' --json",
                      cwd=str(tmp_path), env=_env(tmp_path), encoding="utf-8")
    second = json.loads(out[out.index("{"):])
    assert second["answer"] == "About 2.1 million people live in Paris." and second["task_id"] == session_id
    assert replay(Path(second["history_path"])) == _requests(tmp_path)  # one history, every request exact
    missing = pexpect.run(f"{sys.executable} -m cli run --continue nope 'hi'", cwd=str(tmp_path),
                          env=_env(tmp_path), encoding="utf-8", withexitstatus=True)
    assert missing[1] == 2 and "no session named 'nope'" in missing[0]


def _sleepers(cwd: Path) -> list[int]:
    """Host pids of `sleep 60` processes running in `cwd`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit() and (entry / "cmdline").read_bytes().startswith(b"sleep\x0060")
                    and (entry / "cwd").resolve() == cwd.resolve()):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
