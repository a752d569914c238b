"""Runs one task through the GenericAgent reference's own loop, from its checkout (run by bench/paper/agents.py with
the reference's virtualenv, under bubblewrap).

    python ref_driver.py CHECKOUT PROMPT_FILE RESULT_JSON MAX_TURNS

It does what the reference's `agentmain.py --task` mode does (GenericAgent().run on a thread, put_task, wait for
'done'), with two measurements added from outside its code: the loop's max_turns is set (the reference hard-codes
180), and the tool calls its handler dispatches are counted. RESULT_JSON gets the final turn's text, the exit
reason, the turns and the calls per tool.
"""
from __future__ import annotations

import json
import os
import sys
import threading
from collections import Counter
from typing import Any


def main() -> None:
    checkout, prompt_file, result_file, max_turns = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    os.chdir(checkout)
    sys.path.insert(0, checkout)
    import agent_loop  # pyright: ignore[reportMissingImports]  (the reference, from its checkout)
    import agentmain  # pyright: ignore[reportMissingImports]

    calls: Counter[str] = Counter()
    state: dict[str, Any] = {"turns": 0, "exit": "max turns or stopped"}
    original_loop = agentmain.agent_runner_loop

    def limited_loop(*args: Any, **kwargs: Any) -> Any:
        kwargs["max_turns"] = max_turns
        outcome = yield from original_loop(*args, **kwargs)
        state["exit"] = (outcome or {}).get("result", "?")
        return outcome

    original_dispatch = agent_loop.BaseHandler.dispatch

    def counted_dispatch(self: Any, tool_name: str, args: Any, response: Any, index: int = 0, tool_num: int = 1) -> Any:
        state["turns"] = max(state["turns"], getattr(self, "current_turn", 0))
        if tool_name != "no_tool":
            calls[tool_name] += 1
        return (yield from original_dispatch(self, tool_name, args, response, index, tool_num))

    agentmain.agent_runner_loop = limited_loop
    agent_loop.BaseHandler.dispatch = counted_dispatch
    agent = agentmain.GenericAgent()
    agent.log_path = False
    agent.next_llm(0)
    agent.verbose = False
    agent.peer_hint = False
    threading.Thread(target=agent.run, daemon=True).start()
    with open(prompt_file, encoding="utf-8") as f:
        prompt = f.read()
    queue = agent.put_task(prompt, source="task")
    while "done" not in (item := queue.get(timeout=7200)):
        pass
    outputs = item.get("outputs") or [item["done"]]
    with open(result_file, "w", encoding="utf-8") as f:
        json.dump({"answer": outputs[-1] if outputs else "", "exit": state["exit"], "turns": state["turns"],
                   "tool_calls": dict(calls)}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
