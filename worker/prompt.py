"""The worker's prompt: a short, dense system prompt carrying the L1 index, and the first user message."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from string import Template

SYSTEM_TEMPLATE = Path(__file__).with_name("prompts") / "system.md"
L0_HINT = "- Rules for writing memory: memory/L0/rules.md.\n"
NO_INDEX = "(empty: no skills or facts yet)"


def build_system_prompt(l1_text: str, l0_hint: bool = True, extra: str = "") -> str:
    """Who the agent is, its working rules, the memory layers, then the L1 index (and `extra`, if any)."""
    text = _system_template().substitute(l0_hint=L0_HINT if l0_hint else "", memory_index=l1_text.strip() or NO_INDEX)
    return text.rstrip() + ("\n\n" + extra.strip() if extra.strip() else "") + "\n"


@lru_cache(maxsize=1)
def _system_template() -> Template:
    """Read once a process: the file ships with the package."""
    return Template(SYSTEM_TEMPLATE.read_text(encoding="utf-8"))


def build_first_user_message(task: str, key_info: str = "") -> str:
    """The task as given; `key_info` (e.g. from a parent agent) seeds the working note."""
    text = task.strip()
    if key_info.strip():
        text += f"\n\n<key_info>\n{key_info.strip()}\n</key_info>"
    return text
