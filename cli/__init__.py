"""The `ga` command line: parses, calls, prints; the work is done by the packages below.

Where each command is defined: work.py (`ga run`, `ga chat`, `ga fanout`, `ga replay`), fakellm.py (`ga fake-llm`),
sessions.py (`ga sessions`), runs.py (`ga runs`), triggers.py (`ga reflect`, `ga schedule`), explore.py
(`ga explore`), skills.py (`ga skills`), memory.py (`ga memory`); turns.py is what `ga run` and `ga chat` share.
root.py assembles them under the global flags and loads a command's module only when it runs; kit.py holds what
they share, errors.py which exceptions a user can cause.
"""
from cli.root import app

__all__ = ["app"]
