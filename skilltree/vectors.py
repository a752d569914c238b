"""The four scoring dimensions, a score vector over them, and the planner's weights: part of skilltree.json's
format, so they live with it (memory_shared/skilltree_format.py)."""
from memory_shared.skilltree_format import DIMENSIONS, INITIAL_WEIGHTS, ScoreVector, Weights

__all__ = ["DIMENSIONS", "INITIAL_WEIGHTS", "ScoreVector", "Weights"]
