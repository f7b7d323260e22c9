"""Adapters for use outside the trainer: the plain scoring API (scoring.py) and a TRL reward function (trl.py)."""
