"""Pure ranking math: Bradley–Terry (and, later, Elo and tournament topologies). No I/O."""

from tsrl.ranking.bradley_terry import bradley_terry_loss, fit_bradley_terry

__all__ = ["bradley_terry_loss", "fit_bradley_terry"]
