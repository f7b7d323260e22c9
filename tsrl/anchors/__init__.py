"""Anchor ladders built before training: `tsrl-ladder` (build.py) and tsrl-train's ladder step (step.py)."""
