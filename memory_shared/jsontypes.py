"""The one name for JSON that crosses ga's edge: a body a server sent, a reply a model wrote, a line a task or an
older ga wrote and ga reads back. Its fields are unchecked until the code that reads it checks them, so it stays
`Any` inside; ga's own records have types of their own (dataclasses, TypedDicts). Kept at the bottom of the
package direction (docs/design.md §2) so every package may name it. `bench/edges.py` counts its uses beside Any's.
"""
from __future__ import annotations

from typing import Any, TypeAlias

JSONObject: TypeAlias = dict[str, Any]
