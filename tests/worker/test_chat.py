"""`ga chat` in a real terminal (pexpect): a follow-up uses the earlier answer, Ctrl-C stops a turn and
not the session, /cost, and `--resume` the next day; `ga run --continue` and `ga sessions list`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from tests.fanout_support import read_jsonl, start_server

PROCESS_TIMEOUT = 120  # pexpect.run gives a `ga` process 30 s by default: too short on a busy machine

ROOT = Path(__file__).resolve().parents[2]
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
    deadline = time.monotonic() + 120  # generous: a busy machine starts the sandboxed script late
    while time.monotonic() < deadline and not (pid_file.is_file() and pid_file.read_text().strip()):
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
                                      env=_env(tmp_path), encoding="utf-8", timeout=PROCESS_TIMEOUT))
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
                        cwd=str(tmp_path), env=_env(tmp_path), encoding="utf-8", timeout=PROCESS_TIMEOUT)
    first = json.loads(first[first.index("{"):])
    session_id = first["task_id"]
    out = pexpect.run(f"{sys.executable} -m cli run --continue {session_id[:12]} 'How many people live there?' --json",
                      cwd=str(tmp_path), env=_env(tmp_path), encoding="utf-8", timeout=PROCESS_TIMEOUT)
    second = json.loads(out[out.index("{"):])
    assert second["answer"] == "About 2.1 million people live in Paris." and second["task_id"] == session_id
    assert replay(Path(second["history_path"])) == _requests(tmp_path)  # one history, every request exact
    missing = pexpect.run(f"{sys.executable} -m cli run --continue nope 'hi'", cwd=str(tmp_path),
                          env=_env(tmp_path), encoding="utf-8", withexitstatus=True,
                          timeout=PROCESS_TIMEOUT)
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


REFUSED = {"tasks": [{"match": ".*", "turns": [{"content": "never sent"}],
                      "faults": [{"rate": 1.0, "kind": "unauthorized"}]}]}  # every request answered 401


def _ga(tmp_path: Path, *args: str) -> tuple[str, int]:
    """`ga ARGS` piped: its stdout and stderr together, and its exit code."""
    done = subprocess.run([sys.executable, "-m", "cli", *args], cwd=tmp_path, env=_env(tmp_path), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    return done.stdout, done.returncode


def test_a_chat_whose_first_turn_failed_goes_on_with_a_working_model(tmp_path: Path, server) -> None:
    refusing = start_server(REFUSED, tmp_path / "refused.jsonl")
    try:
        child = pexpect.spawn(sys.executable, ["-m", "cli", "chat", "--model", f"scripted@{refusing.base_url}"],
                              cwd=str(tmp_path), env={**_env(tmp_path), "COLUMNS": "80"}, encoding="utf-8",
                              timeout=60, dimensions=(24, 80))
        child.expect_exact("you> ")
        child.sendline("What is the capital of France?")
        child.expect(r"HTTP\s+401")  # the first turn failed before any reply
        child.expect_exact("you> ")
        child.sendline(f"/model scripted@{server.base_url}")
        child.expect_exact("you> ")
        child.sendline("Tell me the capital of France")  # the same session goes on, afresh: nothing to continue
        child.expect_exact("Paris is the capital of France.")
        child.expect_exact("you> ")
        child.sendline("How many people live there?")
        child.expect_exact("About 2.1 million people live in Paris.")
        child.expect_exact("you> ")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        refusing.stop()
    first, second = _requests(tmp_path)
    assert [m["role"] for m in first] == ["system", "user"] and "Tell me the capital" in first[1]["content"]
    assert second[-2]["content"] == "Paris is the capital of France."  # the follow-up continued that history
    out, status = _ga(tmp_path, "sessions", "list", "--json")
    sessions = json.loads(out)
    assert status == 0 and len(sessions) == 1
    assert sessions[0]["first_task"] == "What is the capital of France?" and sessions[0]["replies"] == 2


def test_run_continue_last_takes_up_a_session_whose_first_turn_failed(tmp_path: Path, server) -> None:
    out, status = _ga(tmp_path, "run", "Hello", "--model", "no-such-model")
    assert status == 2 and "unknown model" in out
    assert not list(tmp_path.glob("runs/*")) and not list(tmp_path.glob("home/sessions/*"))  # nothing ran

    refusing = start_server(REFUSED, tmp_path / "refused.jsonl")
    try:
        out, status = _ga(tmp_path, "run", "What is the capital of France?", "--model", f"scripted@{refusing.base_url}")
    finally:
        refusing.stop()
    assert status == 1 and "HTTP 401" in out
    listed, _ = _ga(tmp_path, "sessions", "list")
    assert "no sessions yet" in listed and "1 without a reply" in listed  # hidden, but not lost
    everything, _ = _ga(tmp_path, "sessions", "list", "--all", "--json")
    (failed,) = json.loads(everything)

    out, status = _ga(tmp_path, "run", "--continue", "last", "Tell me the capital of France", "--model",
                      f"scripted@{server.base_url}", "--json")
    result = json.loads(out[out.index("{"):])  # exit 1: an answer no tool run backs is "unverified"
    assert result["task_id"] == failed["id"] and result["answer"] == "Paris is the capital of France."
    out, _ = _ga(tmp_path, "run", "--continue", "last", "How many people live there?", "--json")
    assert json.loads(out[out.index("{"):])["answer"] == "About 2.1 million people live in Paris."
    listed, _ = _ga(tmp_path, "sessions", "list", "--json")
    assert [s["id"] for s in json.loads(listed)] == [failed["id"]]


def test_sessions_list_fits_80_columns_with_whole_ids(tmp_path: Path, server) -> None:
    tasks = ["What is the capital of France? Answer in one short sentence, and name the river too, please.",
             "What is the capital of France?"]
    for task in tasks:
        out, _ = _ga(tmp_path, "run", task, "--model", f"scripted@{server.base_url}", "--json")
        assert json.loads(out)["answer"] == "Paris is the capital of France."
    ids = [s["id"] for s in json.loads(_ga(tmp_path, "sessions", "list", "--json")[0])]
    child = pexpect.spawn(sys.executable, ["-m", "cli", "sessions", "list"], cwd=str(tmp_path),
                          env={k: v for k, v in _env(tmp_path).items() if k != "COLUMNS"}, encoding="utf-8",
                          timeout=60, dimensions=(24, 80))
    child.expect(pexpect.EOF)
    lines = [line for line in child.before.replace("\r", "").splitlines() if line.strip()]
    assert len(lines) == 1 + len(ids), lines  # a header and one line per session: nothing wrapped
    assert all(len(line) <= 80 for line in lines), lines
    assert [line.split()[0] for line in lines[1:]] == ids  # every id whole, as `--continue` takes it
    for line, task in zip(lines[1:], reversed(tasks)):  # the latest first; the first task gave way, cut to a line
        shown = line[len(ids[0]):].split("…")[0].strip()
        assert len(shown) >= 10 and task.startswith(shown) and "…" in line, line
    out, status = _ga(tmp_path, "run", "--continue", ids[1][:-3], "How many people live there?", "--json")
    assert json.loads(out[out.index("{"):])["task_id"] == ids[1]  # a unique prefix names it
