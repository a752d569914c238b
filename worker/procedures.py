"""Verifying what a task staged as a procedure, before the gate: ga re-runs it itself (worker/rerun.py).

A procedure is an L3 SOP (front matter naming its scripts: `scripts: [L3/scripts/x.py]` or `script:`; an
optional `expect:` the output must hold) or a script staged under L3/scripts/. It is verified only when every
script it names re-runs with no arguments in a fresh sandbox outside the task's directory, holding only the
procedure's files laid out at their memory paths, with the network off (a procedure naming hosts it needs,
`network: [host]`, is not verified: ga's re-run has no network yet, so it fails closed), exits 0, is not one that only says
something (worker.evidence.is_trivial), and prints something; with an `expect`, its output must hold that text,
which the script may not spell out (worker.evidence.backed). An SOP naming no script cannot be verified: it stays proposed. Whether the task's
own runs succeeded does not count here: a tool having run somewhere in the task proves nothing.
"""
from __future__ import annotations

import hashlib
import re
from typing import Callable, Optional

from configs.settings import SandboxSettings
from memory_shared import parse_sop
from memory_shared.provenance import Verification
from worker.evidence import backed, is_trivial
from worker.rerun import SCRIPT_RUNNERS, rerun

SCRIPTS = "L3/scripts/"
_NAMED = re.compile(r"\bL3/scripts/[A-Za-z0-9._/-]+\.(?:py|sh)\b")
MAX_SCRIPTS = 8


def procedure_paths(paths: list[str]) -> list[str]:
    """The staged paths that are procedures: L3 SOPs and scripts."""
    return [p for p in paths if p.startswith("L3/") and (p.endswith(".md") or _is_script(p))]


def _is_script(path: str) -> bool:
    return path.startswith(SCRIPTS) and any(path.endswith(s) for s in SCRIPT_RUNNERS)


def named_scripts(path: str, text: str) -> tuple[list[str], str]:
    """(the scripts a procedure names, the `expect` text): a script names itself; an SOP names its scripts in
    its front matter, or in its body when the front matter does not."""
    if _is_script(path):
        return [path], ""
    try:
        front, body = parse_sop(text, path)
    except ValueError:
        return [], ""
    listed = front.get("scripts", front.get("script"))
    scripts = [listed] if isinstance(listed, str) else [str(s) for s in listed] if isinstance(listed, list) else []
    if not scripts:
        scripts = sorted(set(_NAMED.findall(body)))
    expect = front.get("expect")
    return [s.strip() for s in scripts if s.strip()][:MAX_SCRIPTS], "" if expect is None else str(expect)


def _hosts(path: str, text: str) -> list[str]:
    """The hosts an SOP says it needs (front matter `network: [host, ...]`)."""
    if _is_script(path):
        return []
    try:
        front, _ = parse_sop(text, path)
    except ValueError:
        return []
    hosts = front.get("network")
    return [hosts] if isinstance(hosts, str) and hosts not in ("off", "") else \
        [str(h) for h in hosts] if isinstance(hosts, list) else []


def verify(path: str, text: str, read: Callable[[str], Optional[str]], *, timeout: float,
           sandbox: Optional[SandboxSettings]) -> Verification:
    """ga's verdict on the procedure at `path` (module doc); `read` gives the text of any memory path as the
    task left it (its staged writes over its snapshot)."""
    scripts, expect = named_scripts(path, text)
    hosts = _hosts(path, text)
    if hosts:  # fail closed: the re-run has no network, so what needs one cannot be shown to work
        return Verification(False, scripts, network=", ".join(hosts),
                            why=f"needs the network ({', '.join(hosts)}); ga re-runs procedures with the network off")
    if not scripts:
        return Verification(False, why="names no script that ga could re-run (scripts: in its front matter)")
    files: dict[str, str] = {}
    for script in scripts:
        if not _is_script(script):
            return Verification(False, scripts, why=f"{script}: a procedure's script lives under {SCRIPTS} (.py, .sh)")
        found = read(script)
        if found is None:
            return Verification(False, scripts, why=f"{script}: no such script in memory")
        files[script] = found
    outcome = Verification(False, scripts)
    for script in scripts:
        source = files[script]
        if is_trivial(source, "bash" if script.endswith(".sh") else "python"):
            outcome.why = f"{script} only prints what it spells out (echo, true, a literal): that proves nothing"
            return outcome
        code, output = rerun(script, files, timeout, sandbox)
        outcome.exit_codes.append(code)
        outcome.output_sha256.append(hashlib.sha256(output.encode("utf-8", "replace")).hexdigest())
        if code != 0:
            last = output.strip().splitlines()[-1:] or [""]
            outcome.why = f"ga re-ran {script}: exit {code} ({last[0][:120]})"
            return outcome
        if not backed(source, output, expect if len(scripts) == 1 or script == scripts[-1] else ""):
            outcome.why = (f"ga re-ran {script}: exit 0, but " + ("it printed nothing" if not output.strip() else
                           f"its output lacks the expected {expect[:60]!r}, computed (not spelled out in the script)"))
            return outcome
    outcome.verified = True
    outcome.why = "ga re-ran " + ", ".join(f"{s} (exit 0)" for s in scripts) + " in a fresh sandbox, network off"
    return outcome
