"""Evaluation: held-out win-rate against reference anchors."""

from tsrl.evaluation.winrate import winrate_sums, winrate_summary

__all__ = ["winrate_sums", "winrate_summary"]
