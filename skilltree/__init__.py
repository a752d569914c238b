"""Skill tree, exploration planner (scoring §6, selection), weight adaptation and reports."""
from skilltree.adapt import adapt_weights, feedback
from skilltree.plan import Plan, build_plan, read_plan, write_plan
from skilltree.scoring import Candidate, Judgement, ScoredCandidate, TreeStats, breadth, depth, score_task
from skilltree.selection import select_batch, top_k
from skilltree.summary import summary_for_prompt
from skilltree.tree import Category, Skill, SkillTree, SkillTreeError, load, parse, save
from skilltree.usage import usage
from skilltree.vectors import DIMENSIONS, INITIAL_WEIGHTS, ScoreVector, Weights

__all__ = ["DIMENSIONS", "INITIAL_WEIGHTS", "Candidate", "Category", "Judgement", "Plan", "ScoreVector",
           "ScoredCandidate", "Skill", "SkillTree", "SkillTreeError", "TreeStats", "Weights", "adapt_weights",
           "breadth", "build_plan", "depth", "feedback", "load", "parse", "read_plan", "save", "score_task",
           "select_batch", "summary_for_prompt", "top_k", "usage", "write_plan"]
