"""Skill tree, exploration planner (scoring §6, selection), weight adaptation and reports.

tree.py        load(snapshot_path), save(txn, tree); the SkillTree model and skilltree.json format: memory_shared/skilltree_format.py
commit.py      commit_tree(store, update): one atomic memory commit, re-applied on a conflict
usage.py       usage(tree, access_log, since, until): distinct tasks that read each skill's SOP
summary.py     summary_for_prompt(tree, max_chars): the compact view the planner prompt carries
vectors.py     the four dimensions, ScoreVector, Weights (defined with the format, in memory_shared)
scoring.py     §6 breadth/depth/score (pure); selection.py the >= 4-category batch (pure)
demand.py      the demand term of `planner.rule: demand` (docs/design.md §6b; pure) blended into the ranking
plan.py        ExplorationPlan, score_and_select (pure) and plan.json; planner.py plan_exploration:
               the model calls (propose, judge) before score_and_select
adapt.py       the 30-day rule (pure, clock passed in), bounded by a band under rule demand;
               operations.py what `ga skills` runs (its Typer commands: cli/skills.py)
reports.py     exploration reports (Markdown + YAML front matter) in reports/ of a generation
report*.py     report.md / report.html from report_data.gather (tree, access log, reports, runs'
               plan.json/explore.json, embedded files); charts.py: inline SVG; templates/: page, CSS, JS
synthetic.py   seeded synthetic trees and candidates for bench/planner.py and demos
explore.py     one exploration cycle: plan, fan out, collect, consolidate (`ga explore --once`)
verify.py      a task's report.md and the checks that make it verified (re-run of its scripts)
consolidate.py one atomic, idempotent memory commit per explored task; l1index.py its L1 line
daemon.py      `ga explore --when-idle`: idle rules, daily caps, state.json
explore_modes.py  which of the four `ga explore` modes runs; --once counted in the day's caps (the command:
               cli/explore.py)
"""
from skilltree.adapt import adapt_weights, feedback
from skilltree.plan import ExplorationPlan, read_plan, score_and_select, write_plan
from skilltree.scoring import Candidate, Judgement, ScoredCandidate, TreeStats, breadth, depth, score_task
from skilltree.selection import select_batch, top_k
from skilltree.summary import summary_for_prompt
from skilltree.tree import Category, Skill, SkillTree, SkillTreeError, load, parse, save
from skilltree.usage import usage
from skilltree.vectors import DIMENSIONS, INITIAL_WEIGHTS, ScoreVector, Weights

__all__ = ["Candidate", "Category", "DIMENSIONS", "ExplorationPlan", "INITIAL_WEIGHTS", "Judgement", "ScoreVector",
           "ScoredCandidate", "Skill", "SkillTree", "SkillTreeError", "TreeStats", "Weights", "adapt_weights", "breadth",
           "depth", "feedback", "load", "parse", "read_plan", "save", "score_and_select", "score_task", "select_batch",
           "summary_for_prompt", "top_k", "usage", "write_plan"]
