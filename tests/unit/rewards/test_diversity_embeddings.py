"""The ladder diversity report's semantic part: all-MiniLM-L6-v2 embeddings from the offline package (installed
by `make setup`), mean pairwise cosine distance per anchor set."""

import pytest

from tsrl.rewards.diversity import diversity_report, embedding_distance


def test_paraphrases_are_closer_than_unrelated_texts() -> None:
    near = embedding_distance([["The cat sat on the mat.", "A cat was sitting on the mat."]])
    far = embedding_distance([["The cat sat on the mat.", "Interest rates rose by half a point in March."]])
    same = embedding_distance([["The cat sat on the mat.", "The cat sat on the mat."]])
    assert same == pytest.approx(0.0, abs=1e-5) and 0.0 < near < far <= 2.0


def test_the_report_holds_the_embedding_distance() -> None:
    report = diversity_report([["a joke about cats", "a joke about dogs", "tax law"]], embeddings=True)
    assert isinstance(report["embedding_distance"], float) and report["embedding_distance"] > 0
