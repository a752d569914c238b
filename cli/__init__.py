"""The `ga` command line: parses, calls, prints; the work is done by the packages below.

Where each command is defined: work.py (`ga run`, `ga chat`, `ga fanout`), worker.py (`ga fake-llm`,
`ga sessions`, and the turn display `ga run` and `ga chat` share), replay.py (`ga replay`), runs.py (`ga runs`),
triggers.py (`ga reflect`, `ga schedule`), explore.py (`ga explore`), skills.py (`ga skills`), memory.py
(`ga memory`); root.py assembles them under the global flags; kit.py holds what they share, errors.py which
exceptions a user can cause.
"""
from cli.root import app

__all__ = ["app"]
