"""Filing one exploration task's result in the memory tier: ONE atomic commit per task, idempotent.

verified    L3/<folder>/<skill>.md (the SOP: the report's procedure with SOP front matter), the
            artifacts under L3/scripts/<skill>/, one L1 pointer line (skilltree.l1index), a skill node
            in skilltree.json (predicted score and score vector from the plan, `report` pointing to
            the report) and the report itself, all in one commit. A skill the tree has already (the
            same name up to case, separators and a -N suffix, or the same scripts byte for byte:
            same_skill) is never filed twice: the report is filed and added to that skill's evidence
            (its `evidence` list and its SOP's evidence line), in one commit.
unverified  the report alone, in one commit.
failed      nothing (the cycle records it in the run directory).

Every task's report lives at reports/<run id>/<task id>.md, so the report path names the run and the
task. Each task's commit carries the key `explore/<run id>/<task id>` (memory_shared.StoreHandle):
consolidating a task whose commit is in the store's log changes nothing, so re-running a crashed
cycle's consolidation never duplicates a skill. A crash mid-commit leaves the store on the previous
generation (the store's own guarantee); the tree and its files always land together.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Callable, Optional

import structlog

from memory_shared import L1_INDEX, StoreHandle, TransactionHandle, faults, format_sop, parse_sop
from memory_shared.jsontypes import JSONObject
from memory_shared.provenance import Record, digest, line_key, record_id
from skilltree.commit import commit_with_retry
from skilltree.l1index import add_skill_line, skill_line
from skilltree.reports import REPORTS_DIR, ExplorationReport, render
from skilltree.tree import TREE_FILE, Skill, SkillTree, load, parse, save, slugify, utc
from skilltree.vectors import ScoreVector
from skilltree.verify import Collected

log = structlog.get_logger("skilltree.consolidate")
AUTHOR = "ga explore"
SCRIPTS_DIR = "L3/scripts"


@dataclass(frozen=True)
class TaskPlan:
    """One selected candidate as a task of an exploration run (what consolidation needs of the plan)."""

    task_id: str
    title: str
    category: str
    target_skill: str
    description: str
    predicted: float
    vector: ScoreVector

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "vector": self.vector.model_dump()}

    @classmethod
    def from_dict(cls, data: JSONObject) -> "TaskPlan":
        """A task as explore.json holds it (written by this ga or an older one)."""
        return cls(**{**data, "vector": ScoreVector.model_validate(data["vector"])})


@dataclass
class Consolidated:
    task_id: str
    # "skill", "evidence" (the tree had this skill, named by skill_id: the report was added to its evidence),
    # "report", "failed", or "already" (consolidated before)
    outcome: str
    generation: Optional[int] = None
    skill_id: Optional[str] = None
    report_path: Optional[str] = None
    problems: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)


def report_path(run_id: str, task_id: str) -> str:
    return f"{REPORTS_DIR}/{run_id}/{task_id}.md"


def commit_key(run_id: str, task_id: str) -> str:
    """The key of a task's one commit: a second consolidation of the task commits nothing."""
    return f"explore/{run_id}/{task_id}"


def _report_text(task: TaskPlan, collected: Collected, *, category: str, skill: str, artifacts: list[str],
                 run_id: str, tokens: int, now: datetime) -> str:
    claimed = collected.report
    assert claimed is not None
    provenance: dict[str, Any] = dict(  # extra fields of the report (ExplorationReport allows extras)
        run=run_id, task=task.task_id, claimed_verified=claimed.verified,
        checks=collected.checks, problems=collected.problems, evidence=collected.evidence)
    stored = ExplorationReport(
        title=claimed.title, category=category, skill=skill, score_vector=task.vector,
        predicted=round(task.predicted, 6), verified=collected.outcome == "verified", artifacts=artifacts,
        tokens=tokens, created=now, **provenance)
    return render(stored, claimed.body)


def _sop_text(task: TaskPlan, collected: Collected, skill_id: str, category: str, files: list[str],
              run_id: str, now: datetime) -> str:
    report = collected.report
    assert report is not None
    description = str(getattr(report, "description", "") or task.description).strip().splitlines()[0][:300]
    reruns = ", ".join(f"{a.rel} exit 0" for a in collected.artifacts if a.script)
    evidence = (f"explore run {run_id} task {task.task_id}: code_run {', '.join(collected.evidence)} exited 0; "
                f"re-run from the stored files: {reruns}")
    front = {"name": skill_id, "category": category, "description": description, "created": now.date().isoformat(),
             "evidence": evidence, "title": report.title, "scripts": files,
             "report": report_path(run_id, task.task_id)}
    listing = "\n".join(f"- {path}" for path in files)
    body = report.body.strip() + f"\n\n## Files\nRun a script with `python <path>` from a copy of these files:\n{listing}\n"
    return format_sop(front, body)


def _provenance(txn: TransactionHandle, key: str, run_id: str, task: TaskPlan, collected: Collected, model: str,
                files: list[str], trust: str, line: Optional[str] = None) -> None:
    """A provenance record for each file this commit filed (and the L1 line it added): ga explore wrote it for
    the task; `verified` only when every check of skilltree.verify passed, re-run included."""
    who: dict[str, object] = {"author": AUTHOR, "run": run_id, "task": task.task_id, **({"model": model} if model else {})}
    backs = [{"tool": "code_run", "call": call, "ok": True, "exit_code": 0, "evidence": True}
             for call in collected.evidence]
    reruns = [a for a in collected.artifacts if a.script and a.exit_code is not None]
    verification = {"verified": trust == "verified", "scripts": [a.rel for a in reruns],
                    "exit_codes": [a.exit_code for a in reruns],
                    "output_sha256": [digest(a.output) for a in reruns], "network": "off",
                    "why": "; ".join(c for c in collected.checks if c.startswith("re-ran"))
                    or "; ".join(collected.problems[:2])}
    for path in files:
        text = txn.read(path)
        if text is None:
            continue
        record = Record(id=record_id(key, path), path=path, scope="file", trust=trust, who=who, backs=backs,
                        verification=verification, file_sha256=digest(text), time=datetime.now().timestamp())
        txn.write(record.rel, record.to_text())
    if line is not None:
        record = Record(id=record_id(key, L1_INDEX), path=L1_INDEX, scope="lines", trust=trust, who=who, backs=backs,
                        verification=verification, lines=[{"sha256": line_key(line), "text": line}],
                        time=datetime.now().timestamp())
        txn.write(record.rel, record.to_text())


def consolidate_task(store: StoreHandle, run_id: str, task: TaskPlan, collected: Collected, *, tokens: int,
                     now: datetime, model: str = "") -> Consolidated:
    """File one task's result (see the module doc); one commit, or none when it was filed before."""
    now = utc(now)
    rel = report_path(run_id, task.task_id)
    done = Consolidated(task.task_id, collected.outcome, problems=collected.problems, checks=collected.checks)
    if collected.outcome == "failed":
        return done
    faults.point("explore.consolidating")
    key = commit_key(run_id, task.task_id)
    if collected.outcome == "verified":
        txn, skill_id, again = _commit_skill(store, key, run_id, task, collected, rel, tokens, now, model)
        done.outcome, done.skill_id = "evidence" if again else "skill", skill_id
    else:
        txn = _commit_report(store, key, run_id, task, collected, rel, tokens, now, model)
        done.outcome = "report"
    if txn.already_committed:
        done.outcome, done.skill_id = "already", _skill_with_report(store, rel)
        log.info("explore.already_consolidated", run=run_id, task=task.task_id, report=rel, skill=done.skill_id)
    else:
        faults.point("explore.committed")
        done.generation = txn.generation
    done.report_path = rel
    return done


def _skill_with_report(store: StoreHandle, rel: str) -> Optional[str]:
    with store.snapshot() as snap:
        return next((s.id for s in load(snap.path).skills.values() if rel in (s.report, *s.evidence)), None)


@dataclass
class _Chosen:
    """What a commit attempt of _commit_skill chose: the skill, and whether it was in the tree already."""

    skill: Optional[Skill] = None
    again: bool = False


def _commit_skill(store: StoreHandle, key: str, run_id: str, task: TaskPlan, collected: Collected, rel: str,
                  tokens: int, now: datetime, model: str) -> tuple[TransactionHandle, Optional[str], bool]:
    """A new skill, or, when the tree has this skill already (same_skill), its evidence updated (True)."""
    chosen = _Chosen()
    report = collected.report
    assert report is not None
    evidence = ", ".join(collected.evidence)

    def stage(txn: TransactionHandle) -> bool:
        tree = parse(txn.read(TREE_FILE) or "", f"{TREE_FILE} (generation {txn.base})")
        same = same_skill(tree, [report.skill or task.target_skill, report.title],
                          [a.text for a in collected.artifacts if a.script], txn.read)
        if same is not None:
            chosen.skill, chosen.again = same, True
            _stage_evidence(txn, tree, same, task, collected, rel, run_id, tokens, now)
            _provenance(txn, key, run_id, task, collected, model, [rel], "verified")
            txn.message = (f"explore {run_id}/{task.task_id}: skill '{same.id}' verified again; evidence: "
                           f"code_run {evidence} exited 0")
            return True
        category = tree.category_name(task.category)
        skill_id = tree.unique_id(report.skill or task.target_skill)
        folder = slugify(category, fallback="misc")
        files = [f"{SCRIPTS_DIR}/{skill_id}/{a.rel}" for a in collected.artifacts]
        description = str(getattr(report, "description", "") or task.description).strip().splitlines()[0][:300]
        sop = f"L3/{folder}/{skill_id}.md"
        skill = Skill(id=skill_id, name=report.title, category=category, description=description,
                      sop=sop, scripts=files, created=now, report=rel,
                      predicted=round(task.predicted, 6), score_vector=task.vector, verified=True)
        chosen.skill, chosen.again = skill, False
        save(txn, tree.add(skill))
        for artifact, path in zip(collected.artifacts, skill.scripts, strict=False):
            txn.write(path, artifact.text)
        txn.write(sop, _sop_text(task, collected, skill.id, skill.category, skill.scripts, run_id, now))
        txn.write(rel, _report_text(task, collected, category=skill.category, skill=skill.id,
                                    artifacts=[sop, *skill.scripts], run_id=run_id, tokens=tokens, now=now))
        line = skill_line(folder, skill.id, skill.name)
        index = add_skill_line(txn.read(L1_INDEX), line, store.l1_max_lines, store.l1_max_chars)
        if index is None:
            log.warning("explore.l1_full", skill=skill.id, fix="move pointers out of L1/index.md by hand")
        else:
            txn.write(L1_INDEX, index)
        _provenance(txn, key, run_id, task, collected, model, [sop, rel, *skill.scripts], "verified",
                    line if index is not None and line in index.splitlines() else None)
        return True

    message = (f"explore {run_id}/{task.task_id}: verified skill '{task.title}' ({task.category}); evidence: "
               f"code_run {evidence} exited 0, {'; '.join(c for c in collected.checks if c.startswith('re-ran'))}")
    txn = _commit_once(store, stage, message=message, key=key)
    skill = chosen.skill
    return txn, None if skill is None else skill.id, chosen.again


def _commit_once(store: StoreHandle, stage: Callable[[TransactionHandle], bool], *, message: str,
                 key: str) -> TransactionHandle:
    txn = commit_with_retry(store, stage, message=message, author=AUTHOR, key=key)
    assert txn is not None, "a task's stage always has something to commit"
    return txn


def same_skill(tree: SkillTree, names: list[str], scripts: list[str], read: Callable[[str], Optional[str]]) -> Optional[Skill]:
    """The skill of the tree this one repeats: the same name up to case, separators and a numeric suffix
    (`Count words`, `count_words`, `count-words-2`), or the same verified scripts, byte for byte."""
    wanted = {name_key(name) for name in names if name and name_key(name)}
    for skill in tree.skills.values():
        if wanted & {name_key(skill.id), name_key(skill.name)}:
            return skill
    digests = sorted(_digest(text) for text in scripts)
    if not digests:
        return None
    for skill in tree.skills.values():
        stored = [read(path) for path in skill.scripts]
        if stored and None not in stored and sorted(_digest(text) for text in stored if text is not None) == digests:
            return skill
    return None


def name_key(name: str) -> str:
    """'Count-Words-2' -> 'countwords': what tells two skill names apart."""
    return re.sub(r"-\d+$", "", slugify(name, fallback="")).replace("-", "")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stage_evidence(txn: TransactionHandle, tree: SkillTree, skill: Skill, task: TaskPlan, collected: Collected, rel: str,
                    run_id: str, tokens: int, now: datetime) -> None:
    """The skill verified again: its report filed, pointed to from the skill, and named in its SOP's evidence."""
    save(txn, tree.copy_with(skills={**tree.skills, skill.id: skill.model_copy(update={
        "evidence": [*skill.evidence, rel]})}))
    txn.write(rel, _report_text(task, collected, category=skill.category, skill=skill.id,
                                artifacts=[p for p in (skill.sop, *skill.scripts) if p], run_id=run_id, tokens=tokens,
                                now=now))
    text = txn.read(skill.sop) if skill.sop else None
    if skill.sop is None or text is None:
        return
    try:
        front, body = parse_sop(text)
    except ValueError:  # a hand-edited SOP: its evidence stays as it is, the tree and the report say it all
        return
    front["evidence"] = (f"{front.get('evidence', '')}; verified again by explore run {run_id} task {task.task_id} "
                         f"(code_run {', '.join(collected.evidence)} exited 0)").lstrip("; ")
    txn.write(skill.sop, format_sop(front, body))


def _commit_report(store: StoreHandle, key: str, run_id: str, task: TaskPlan, collected: Collected, rel: str,
                   tokens: int, now: datetime, model: str) -> TransactionHandle:
    report = collected.report
    assert report is not None
    text = _report_text(task, collected, category=task.category, skill=report.skill or task.target_skill,
                        artifacts=[a for a in report.artifacts], run_id=run_id, tokens=tokens, now=now)
    first = collected.problems[0] if collected.problems else "not verified"
    message = f"explore {run_id}/{task.task_id}: unverified report kept ({first[:160]})"

    def stage(txn: TransactionHandle) -> bool:
        txn.write(rel, text)
        _provenance(txn, key, run_id, task, collected, model, [rel], "proposed")
        return True

    return _commit_once(store, stage, message=message, key=key)
