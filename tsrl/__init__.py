"""tsrl: GRPO training with rewards from LLM-judged tournaments.

`import tsrl` stays light; the plain scoring API is loaded on first use:
    tsrl.score_groups(prompts, completions, regime="ladder", judge="rubric_sim", **reward_options)
    tsrl.build_scorer(regime=..., ...).score(prompts, completions)
"""

from __future__ import annotations

from typing import Any

__all__ = ["score_groups", "build_scorer"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tsrl.integrations import scoring  # lazy: `import tsrl` stays light (no torch, hydra, numpy)

        return getattr(scoring, name)
    raise AttributeError(f"module 'tsrl' has no attribute {name!r}")
