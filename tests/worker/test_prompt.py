"""The worker's system prompt and first user message."""
from __future__ import annotations

import re

from worker.prompt import L0_HINT, NO_INDEX, SYSTEM_TEMPLATE, build_first_user_message, build_system_prompt
from worker.tools import REGISTRY

L1 = """# L1 index: what exists (read the deeper layers with file_read)
- How memory may be written: L0/rules.md
- Deploy a Flask app: L3/web/deploy-flask.md (costs $5/month)"""


def test_system_prompt_carries_rules_memory_layers_and_the_l1_index() -> None:
    text = build_system_prompt(L1)
    assert text.endswith("<memory_index>\n" + L1 + "\n</memory_index>\n")
    assert "$5/month" in text  # index text is inserted verbatim, never treated as a template
    for phrase in ("No Execution, No Memory", "start_long_term_update", "update_working_checkpoint",
                   'file_read("memory/', "<history>", "<key_info>", "ask_user", "no tool call"):
        assert phrase in text, phrase
    assert "$" not in text.replace("$5/month", "")  # every placeholder filled


def test_l0_hint_and_extra_are_optional() -> None:
    assert L0_HINT.strip() in build_system_prompt(L1)
    without = build_system_prompt(L1, l0_hint=False)
    assert L0_HINT.strip() not in without
    assert len(without) == len(build_system_prompt(L1)) - len(L0_HINT)
    extra = build_system_prompt(L1, extra="You are a subagent of run r-1.")
    assert extra.endswith("</memory_index>\n\nYou are a subagent of run r-1.\n")


def test_empty_index_says_so() -> None:
    assert f"<memory_index>\n{NO_INDEX}\n</memory_index>" in build_system_prompt("  \n")


def test_every_tool_the_prompt_names_exists() -> None:
    fixed = SYSTEM_TEMPLATE.read_text(encoding="utf-8")
    named = set(re.findall(r"\b(?:[a-z]+_)+[a-z]+\b", fixed)) - {"memory_index", "l0_hint", "key_info"}
    assert named, "the prompt names no tool"
    assert named <= set(REGISTRY), named - set(REGISTRY)


def test_fixed_prompt_text_stays_small() -> None:
    # The whole first request is meant to stay under 2,000 tokens (bench/prompt_size.py measures it);
    # the fixed text is the part this module controls.
    assert len(build_system_prompt("")) < 2000


def test_first_user_message() -> None:
    assert build_first_user_message("  Hello \n") == "Hello"
    assert build_first_user_message("Fix it", key_info="repo at /src\n") == "Fix it\n\n<key_info>\nrepo at /src\n</key_info>"
