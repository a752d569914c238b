"""A trigger for `ga reflect`: hands each new note in ./inbox to the agent, one per check.

    mkdir -p inbox && echo "Call the bank about the card." > inbox/todo.md
    ga reflect configs/examples/reflect/inbox.py --model scripted:configs/examples/scripts/reflect_inbox.yaml

Edit this file while `ga reflect` runs: it is reloaded at the next check.
"""
from pathlib import Path

INTERVAL = 60   # seconds between two check() calls
ONCE = False    # True: stop after the first task
INBOX = Path("inbox")


def check():
    """Return a task for the agent, or None when there is nothing to do."""
    for note in sorted(INBOX.glob("*.md")):
        seen = note.with_suffix(".seen")
        if not seen.exists():
            seen.touch()
            return f"Summarize the note {note.resolve()} in one line"
    return None
