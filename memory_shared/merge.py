"""A 3-way line merge of one memory file: what a task changed from the text it saw, applied to what is there
now. Used when a commit conflicts (someone else changed the same file since the task's snapshot) and when a
person accepts a proposal made on an older generation."""
from __future__ import annotations

from typing import Optional

from merge3 import Merge3


def merge(base: Optional[str], mine: Optional[str], theirs: Optional[str]) -> tuple[bool, Optional[str]]:
    """(clean, merged text): `mine` and `theirs` both made from `base` (None: the file did not exist, or was
    deleted). Lines both inserted at the same place are all kept (theirs first): two tasks adding a pointer line
at the end of L1 merge. Not clean when both changed the same lines, or one deleted what the other changed."""
    if theirs == base or theirs == mine:
        return True, mine
    if mine == base:
        return True, theirs
    if mine is None or theirs is None or base is None:  # a delete against a change, or both made the file anew
        return False, None
    regions = Merge3((base or "").splitlines(True), mine.splitlines(True), theirs.splitlines(True))
    out: list[str] = []
    base_lines, mine_lines, theirs_lines = list(regions.base), list(regions.a), list(regions.b)
    for region in regions.merge_regions():
        kind, bounds = region[0], [int(x) for x in region[1:]]
        if kind == "conflict":
            zstart, zend, astart, aend, bstart, bend = bounds
            if zstart != zend:  # both changed the same lines
                return False, None
            inserted = theirs_lines[bstart:bend]  # both only inserted here: keep theirs, then mine
            out += inserted + [line for line in mine_lines[astart:aend] if line not in inserted]
            continue
        start, end = bounds[0], bounds[1]
        if kind == "unchanged":
            out += base_lines[start:end]
        elif kind in ("a", "same"):
            out += mine_lines[start:end]
        else:
            out += theirs_lines[start:end]
    text = "".join(out)
    return True, text
