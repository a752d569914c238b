"""Context control: head+tail cuts, tag compression, the budget with FIFO eviction, the anchor."""
from __future__ import annotations

import json
import random
import re

import pytest

from configs.settings import ContextSettings
from worker.context import (
    Anchor,
    compress_if_due,
    compress_tags,
    compress_text,
    compression_due,
    cut_arguments,
    cut_head_tail,
    evict_fifo,
    manage_context,
    output_cap,
    repair_tool_pairs,
    serialized_size,
    split_units,
    summarize_call,
    trim_to_budget,
)
from worker.context.compress import exempt_start

SYSTEM = {"role": "system", "content": "You are ga. " * 20}


# ---- helpers: a session built the way the loop builds it ------------------------------------------------

def call(cid: str, name: str = "code_run", **args) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args or {"script": "ls"})}}


def assistant(*calls: dict, content: str | None = "") -> dict:
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def tool(cid: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def user(content: str) -> dict:
    return {"role": "user", "content": content}


def orphans(messages: list[dict]) -> list[str]:
    """Protocol problems a provider rejects: tool results not answering the directly preceding tool_calls,
    and tool_calls left without their results."""
    problems, pending = [], set()
    for m in messages:
        if m["role"] == "tool":
            if m["tool_call_id"] not in pending:
                problems.append(f"orphaned result {m['tool_call_id']}")
            pending.discard(m["tool_call_id"])
            continue
        if pending:
            problems.append(f"unanswered calls {sorted(pending)}")
        pending = {c["id"] for c in m.get("tool_calls") or []}
    if pending:
        problems.append(f"unanswered calls {sorted(pending)}")
    return problems


def dumps(messages: list[dict]) -> str:
    return json.dumps(messages, ensure_ascii=False)


class Session:
    """Drives context control exactly as the loop does: maintain before each request, then append the turn."""

    def __init__(self, ctx: ContextSettings, task: str = "Do the thing."):
        self.ctx, self.anchor = ctx, Anchor(ctx, task=task)
        self.messages = [SYSTEM, user(task)]
        self.key_info = ""
        self.steps = []

    def request(self, turn: int) -> list[dict]:
        step = manage_context(self.messages, turn, self.ctx, self.anchor)
        self.steps.append(step)
        return step.messages

    def turn(self, turn: int, outputs: list[str], thinking: str = "") -> list[dict]:
        request = self.request(turn)
        calls = [call(f"c{turn}_{i}", script=f"echo {turn} {i}; " + "x" * (turn % 7) * 50) for i in range(len(outputs))]
        reply = assistant(*calls, content=f"<thinking>{thinking}</thinking>" if thinking else None)  # None: as the client sends
        self.messages = request + [reply]
        for c, out in zip(calls, outputs):
            self.messages.append(tool(c["id"], out))
            self.anchor.add(turn, summarize_call("code_run", c["function"]["arguments"], out, True))
        self.messages.append(user(self.anchor.render(turn, self.key_info)))
        return request


# ---- level 1: head+tail cut -----------------------------------------------------------------------------

@pytest.mark.parametrize("length,limit", [(0, 10), (10, 10), (11, 10), (1000, 100), (1000, 40), (5000, 800),
                                          (10_000, 9_950), (100_010, 100_000), (200_000, 10_000), (50, 30), (50, 3)])
def test_cut_head_tail_is_exact_and_keeps_both_ends(length: int, limit: int) -> None:
    text = "".join(chr(97 + i % 26) for i in range(length))
    out = cut_head_tail(text, limit)
    if length <= limit:
        assert out == text
        return
    assert len(out) == limit
    marker = re.search(r"\n\[\.\.\. (\d+) chars cut \.\.\.\]\n", out)
    if marker is None:  # too small for a marker: a plain head
        assert out == text[:limit]
        return
    head, tail = out[:marker.start()], out[marker.end():]
    assert text.startswith(head) and text.endswith(tail) and head and tail
    assert int(marker.group(1)) == length - len(head) - len(tail)


def test_cut_head_tail_is_idempotent_and_handles_zero() -> None:
    text = "line\n" * 3000
    once = cut_head_tail(text, 1000)
    assert cut_head_tail(once, 1000) == once
    assert cut_head_tail(text, 0) == ""


def test_cut_arguments_keeps_valid_json_and_is_idempotent() -> None:
    args = json.dumps({"script": "print(1)\n" * 500, "type": "python", "timeout": 30})
    once = cut_arguments(args, 800)
    value = json.loads(once)
    assert value["type"] == "python" and value["timeout"] == 30
    assert value["script"].startswith("print(1)") and "chars cut" in value["script"]
    assert len(once) < 1000
    assert cut_arguments(once, 800) == once
    assert cut_arguments('{"a": 1}', 800) == '{"a": 1}'
    broken = "{not json " + "z" * 2000
    assert len(cut_arguments(broken, 800)) == 800


# ---- level 2: tag-level compression ---------------------------------------------------------------------

def test_compress_text_cuts_tags_and_replaces_old_anchors() -> None:
    text = (f"<thinking>{'t' * 3000}</thinking> kept prose <tool_use>{'u' * 500}</tool_use>"
            f"<history>\n[turn 3]\nt1 a\n</history>\n<key_info>\nold note\n</key_info>")
    out = compress_text(text, 800)
    assert "<thinking>" in out and len(re.search(r"<thinking>([\s\S]*?)</thinking>", out)[1]) == 800
    assert f"<tool_use>{'u' * 500}</tool_use>" in out  # short enough: untouched
    assert "<history>[old]</history>" in out and "<key_info>[old]</key_info>" in out
    assert "old note" not in out and "kept prose" in out
    assert compress_text(out, 800) == out


def test_compress_text_keeps_tag_attributes() -> None:
    text = f'<tool_result id="call_1">{"r" * 3000}</tool_result><think>{"k" * 900}</think><thinkingX>x</thinkingX>'
    out = compress_text(text, 100)
    assert out.startswith('<tool_result id="call_1">rrr') and "chars cut" in out
    assert re.search(r"<think>([\s\S]*?)</think>", out)[1].count("k") < 100
    assert out.endswith("<thinkingX>x</thinkingX>")
    assert compress_text(out, 100) == out


def test_compress_text_reaches_a_fixed_point_on_quoted_tags() -> None:
    # Tool output that quotes tags: a cut can join halves into a new pair; the result must still be stable.
    text = "<tool_result>" + "a<thinking>" + "b" * 2000 + "</tool_result>" + "c" * 2000 + "</thinking>"
    once = compress_text(text, 200, whole=True)
    assert len(once) <= 200
    assert compress_text(once, 200, whole=True) == once


def big_session(turns: int = 6) -> list[dict]:
    messages = [SYSTEM, user("task")]
    for t in range(1, turns + 1):
        messages += [assistant(call(f"c{t}", script="s" * 3000), content=f"<thinking>{'r' * 2000}</thinking>"),
                     tool(f"c{t}", f"out{t} " + "o" * 5000),
                     user(f"<history>\n[turn {t}]\n</history>\n<key_info>\nnote {t}\n</key_info>")]
    return messages


def test_compress_tags_changes_only_old_messages_and_is_idempotent() -> None:
    messages = big_session()
    out = compress_tags(messages, keep_recent=10, max_len=800)
    boundary = len(messages) - 10
    assert out[0] is messages[0]
    assert out[boundary:] == messages[boundary:]
    assert all(a is b for a, b in zip(out[boundary:], messages[boundary:]))
    old = out[1:boundary]
    assert any(m is not n for m, n in zip(old, messages[1:boundary]))
    for m in old:
        if m["role"] == "tool":
            assert len(m["content"]) <= 800
        if m.get("tool_calls"):
            args = json.loads(m["tool_calls"][0]["function"]["arguments"])
            assert len(args["script"]) <= 800
        if m["role"] == "assistant":
            assert len(re.search(r"<thinking>([\s\S]*?)</thinking>", m["content"])[1]) <= 800
        if m["role"] == "user" and "<history>" in m["content"]:
            assert "<history>[old]</history>" in m["content"] and "note" not in m["content"]
    assert dumps(compress_tags(out, 10, 800)) == dumps(out)
    assert messages == big_session()  # pure: the input is not modified


def test_compress_tags_keeps_the_latest_turn_whole_even_past_keep_recent() -> None:
    messages = [SYSTEM, user("task"), assistant(*[call(f"c{i}") for i in range(6)])]
    messages += [tool(f"c{i}", "r" * 3000) for i in range(6)] + [user("<history>\n[turn 1]\n</history>")]
    out = compress_tags(messages, keep_recent=4, max_len=800)
    assert out[2:] == messages[2:]


@pytest.mark.parametrize("turn,every,due", [(0, 5, False), (1, 5, False), (4, 5, False), (5, 5, True),
                                            (10, 5, True), (11, 5, False), (3, 1, True), (5, 0, False)])
def test_compression_due(turn: int, every: int, due: bool) -> None:
    assert compression_due(turn, every) is due


def test_watermark_policy_touches_nothing_old_until_the_budget_is_crossed() -> None:
    ctx = ContextSettings(context_tokens=10_000, low_water=0.25)  # 30,000 chars
    assert ctx.policy == "watermark"  # the default
    session = Session(ctx)
    previous, breaks = None, []
    for turn in range(1, 61):
        request = session.turn(turn, ["y" * (1500 + 37 * turn)] * (1 + turn % 3), thinking="z" * 1200)
        step = session.steps[-1]
        assert serialized_size(request) <= ctx.budget_chars
        assert_well_formed(request)
        if previous is not None and not dumps(request).startswith(dumps(previous)[:-1]):
            breaks.append(turn)
            # a break happens only when the request would cross the budget, and makes room in one step
            assert step.trim.before > ctx.budget_chars and step.compressed and step.trim.strict
            assert step.trim.after <= ctx.low_water * ctx.budget_chars or step.trim.hard_cut
        else:
            assert not step.compressed and step.trim.evicted == 0
        previous = request
    assert len(breaks) >= 5  # the budget was crossed again and again
    assert min(b - a for a, b in zip(breaks, breaks[1:])) >= 2  # each break leaves room for several turns


def test_watermark_anchor_shows_the_new_turn_between_breaks_and_everything_after_one() -> None:
    ctx = ContextSettings(context_tokens=10_000, low_water=0.25, anchor_turns=20)
    session = Session(ctx)
    session.key_info = "port 8123"
    breaks = 0
    for turn in range(1, 61):
        request = session.turn(turn, ["y" * 2500] * (1 + turn % 2))
        if turn == 1:
            continue
        anchor = request[-1]["content"]
        lines = re.search(r"<history>\n([\s\S]*?)\n</history>", anchor)[1].splitlines()
        turns_shown = [int(line.split()[0][1:]) for line in lines if re.match(r"t\d+ ", line)]
        assert lines[0].startswith(f"[turn {turn - 1}]") and anchor.endswith("<key_info>\nport 8123\n</key_info>")
        if session.steps[-1].trim.strict:  # a break: the thread is carried by the full anchor
            breaks += 1
            assert turns_shown == list(range(max(1, turn - 20), turn))
        else:  # the earlier turns are all in the request: only the new one is listed
            assert turns_shown == [turn - 1]
    assert breaks >= 5


def test_compress_if_due_only_on_compression_turns() -> None:
    ctx = ContextSettings()
    messages = big_session()
    assert compress_if_due(messages, 4, ctx) is messages
    assert compress_if_due(messages, 5, ctx) == compress_tags(messages, ctx.keep_recent, ctx.tag_keep_chars) != messages


@pytest.mark.parametrize("kind,calls,expected", [("code_run", 1, 10000), ("code_run", 2, 5000), ("code_run", 50, 2000),
                                                 ("file_read", 1, 20000), ("web_scan_html", 0, 35000)])
def test_output_cap_is_shared_by_the_calls_of_a_turn(kind: str, calls: int, expected: int) -> None:
    assert output_cap(ContextSettings(), kind, calls) == expected


def test_periodic_policy_keeps_the_prefix_stable_between_compression_points() -> None:
    ctx = ContextSettings(context_tokens=1_000_000, policy="periodic")  # no eviction: isolate compression
    session = Session(ctx)
    previous, compressed_upto, stable = None, 0, 0
    for turn in range(1, 31):
        boundary = exempt_start(session.messages, ctx.keep_recent)
        request = session.turn(turn, ["y" * (1500 + 37 * turn)] * (1 + turn % 3), thinking="z" * 1200)
        if previous is not None:
            extends = dumps(request).startswith(dumps(previous)[:-1])
            if compression_due(turn, ctx.compress_every):
                assert not extends, f"turn {turn}: compression point changed nothing"
                # what the previous compression point compressed stays byte-identical (a cacheable prefix)
                assert compressed_upto > 0 or turn == ctx.compress_every
                assert dumps(request[:compressed_upto]) == dumps(previous[:compressed_upto])
                compressed_upto = boundary
            else:
                assert extends, f"turn {turn}: the request does not extend the previous one"
                stable += 1
        previous = request
    assert stable == 29 - 6  # 30 requests, 29 transitions, 6 of them compression points
    assert [step.compressed for step in session.steps] == [compression_due(t, 5) for t in range(1, 31)]
    assert all(step.trim.evicted == 0 and not step.trim.strict for step in session.steps)


# ---- level 3: budget, eviction, pairing repair ----------------------------------------------------------

def test_split_units_groups_tool_calls_with_their_results() -> None:
    messages = [user("a"), assistant(call("1"), call("2")), tool("1", "x"), tool("2", "y"), user("b"),
                assistant(content="done"), tool("9", "stray")]
    assert [len(u) for u in split_units(messages)] == [1, 3, 1, 1, 1]


REPAIRS = [
    ("orphan result dropped", [SYSTEM, user("u"), tool("x", "r"), user("v")], [SYSTEM, user("u"), user("v")]),
    ("leading assistant dropped", [SYSTEM, assistant(call("1")), tool("1", "r"), user("u")], [SYSTEM, user("u")]),
    ("unanswered call removed", [SYSTEM, user("u"), assistant(call("1"), call("2")), tool("1", "r"), user("v")],
     [SYSTEM, user("u"), assistant(call("1")), tool("1", "r"), user("v")]),
    ("call without any result, text kept", [SYSTEM, user("u"), assistant(call("1"), content="hm"), user("v")],
     [SYSTEM, user("u"), {"role": "assistant", "content": "hm"}, user("v")]),
    ("call without any result, nothing kept", [SYSTEM, user("u"), assistant(call("1")), user("v")],
     [SYSTEM, user("u"), user("v")]),
    ("result after a user message is orphaned", [SYSTEM, user("u"), assistant(call("1")), user("v"), tool("1", "r")],
     [SYSTEM, user("u"), user("v")]),
    ("well formed unchanged", [SYSTEM, user("u"), assistant(call("1")), tool("1", "r"), user("v")],
     [SYSTEM, user("u"), assistant(call("1")), tool("1", "r"), user("v")]),
]


@pytest.mark.parametrize("name,given,expected", REPAIRS, ids=[r[0] for r in REPAIRS])
def test_repair_tool_pairs(name: str, given: list[dict], expected: list[dict]) -> None:
    out = repair_tool_pairs(given)
    assert out == expected
    assert not orphans(out)


def assert_well_formed(messages: list[dict]) -> None:
    assert messages[0] is SYSTEM or messages[0] == SYSTEM
    assert messages[1]["role"] == "user"
    assert not orphans(messages), orphans(messages)


def test_trim_to_budget_evicts_whole_units_to_the_target() -> None:
    ctx = ContextSettings(context_tokens=10_000)  # 30,000 chars
    messages = big_session(12)
    assert serialized_size(messages) > ctx.budget_chars
    out = trim_to_budget(messages, ctx)
    assert_well_formed(out)
    assert serialized_size(out) <= ctx.evict_to * ctx.budget_chars
    assert out[-1] == messages[-1]  # the last user message, with its anchor, is kept as is
    assert len(out) < len(messages)
    assert trim_to_budget(out, ctx) is out  # under budget: nothing to do


def test_trim_under_budget_returns_the_same_list() -> None:
    messages = big_session(2)
    assert trim_to_budget(messages, ContextSettings()) is messages


def test_eviction_never_drops_the_latest_exchange() -> None:
    messages = big_session(5)
    out = evict_fifo(messages, target=1)  # impossible target: keep the minimum
    assert out[0] == SYSTEM
    assert [m["role"] for m in out[1:]] == ["user", "assistant", "tool", "user"]
    assert out[1:] == messages[-4:]


def test_oversized_newest_turn_is_cut_harder_keeping_anchor_and_key_info() -> None:
    ctx = ContextSettings(context_tokens=4_000)  # 12,000 chars
    anchor = "<history>\n[turn 2]\nt1 code_run(script='ls') -> exit 0, 50.0k chars\n</history>\n<key_info>\nport 8123\n</key_info>"
    messages = [SYSTEM, user("task"), assistant(call("1", script="cat big")), tool("1", "B" * 50_000),
                user("tool says hi " * 200 + anchor)]
    out = trim_to_budget(messages, ctx)
    assert_well_formed(out)
    assert serialized_size(out) <= ctx.evict_to * ctx.budget_chars
    assert out[-1]["content"].endswith(anchor)
    assert out[3]["content"].startswith("BBB") and "chars cut" in out[3]["content"]


@pytest.mark.parametrize("policy", ["watermark", "periodic"])
def test_synthetic_300_turn_session_stays_under_budget_and_keeps_key_info(policy: str) -> None:
    ctx = ContextSettings(context_tokens=8_000, policy=policy)  # 24,000 chars
    rng = random.Random(7)
    session = Session(ctx, task="Keep the service alive and report its port.")
    for turn in range(1, 301):
        shown_key_info = session.key_info  # what the previous turn's anchor carried
        if turn % 37 == 0:
            session.key_info = f"port={8000 + turn}; next: check logs"
        outputs = [rng.choice(["ok", "x" * rng.randint(100, 3000), "y" * rng.randint(3000, 9000)])
                   for _ in range(rng.choice([1, 1, 1, 2, 3]))]
        if turn % 97 == 0:
            outputs = ["HUGE" * 10_000]  # bigger than the whole budget
        request = session.turn(turn, outputs, thinking="t" * rng.randint(0, 2500))
        assert serialized_size(request) <= ctx.budget_chars, f"turn {turn}"
        assert_well_formed(request)
        if turn > 1:
            assert request[-1]["role"] == "user" and f"<key_info>\n{shown_key_info or '(empty)'}\n</key_info>" in request[-1]["content"]
            assert f"[turn {turn - 1}]" in request[-1]["content"]
    evictions = sum(1 for s in session.steps if s.trim.evicted)
    assert evictions >= 10
    assert any(s.trim.hard_cut for s in session.steps)
    sizes = [s.trim.after for s in session.steps]
    assert max(sizes) <= ctx.budget_chars


# ---- level 4: the anchor --------------------------------------------------------------------------------

def test_anchor_renders_the_newest_summaries_turn_and_key_info() -> None:
    anchor = Anchor(ContextSettings(anchor_turns=20), task="Find the bug")
    for t in range(1, 26):
        anchor.add(t, f"file_read(path='f{t}.py') -> ok, 10 chars")
    anchor.add(25, "code_run(script='pytest') -> exit 1, 2.0k chars")
    text = anchor.render(25, "bug is in f3.py line 9", full=True)
    history = re.search(r"<history>\n([\s\S]*?)\n</history>", text)[1].splitlines()
    assert history[0] == "[turn 25] task: Find the bug"
    assert history[1] == "(5 earlier turns not shown)"
    lines = history[2:]
    assert len(lines) == 20 and lines[0].startswith("t6 ") and lines[-1].startswith("t25 ")
    assert lines[-1] == "t25 file_read(path='f25.py') -> ok, 10 chars; code_run(script='pytest') -> exit 1, 2.0k chars"
    assert text.endswith("<key_info>\nbug is in f3.py line 9\n</key_info>")
    assert "(empty)" in Anchor().render(1)


SUMMARIES = [
    (("code_run", json.dumps({"script": "pip list | grep torch and more things here", "type": "bash"}),
      "exit code 0\n" + "p" * 1200, True), "code_run(script='pip list | grep torch and more things h…', type='bash') -> exit 0, 1.2k chars"),
    (("code_run", json.dumps({"script": "x" * 100}), "exit code 2\nboom", False),
     f"code_run(script='{'x' * 39}…') -> exit 2: boom"),
    (("code_run", "{}", "exit code 1\nTraceback (most recent call last):\n  File \"c.py\", line 1\n"
      "ModuleNotFoundError: No module named 'sympy'\n", False),
     "code_run() -> exit 1: ModuleNotFoundError: No module named 'sympy'"),
    (("code_run", "{}", "exit code 1\n", False), "code_run() -> exit 1, 12 chars"),
    (("file_read", '{"path": "a.py", "start": 1, "count": 5}', "1|a", True), "file_read(path='a.py', start=1, …) -> ok, 3 chars"),
    (("file_patch", '{"path": "a.py"}', "error: old_content matched 0 times\nmore", False),
     "file_patch(path='a.py') -> error: error: old_content matched 0 times"),
    (("ask_user", "{bad json", "error: not json", False), "ask_user('{bad json') -> error: error: not json"),
]


@pytest.mark.parametrize("given,expected", SUMMARIES)
def test_summarize_call(given: tuple, expected: str) -> None:
    assert summarize_call(*given) == expected
