from pathlib import Path

import numpy as np

from bench.sentence_ranker import hits_at_k, paired_against, recall_at_k


def _claim(source: str, gold: set[str], n: int = 8) -> tuple:
    return (source, "a claim", gold, [{"id": f"s{i}"} for i in range(n)])


def test_hits_at_k_needs_every_gold_sentence_in_the_first_five() -> None:
    lists = [_claim("fm2", {"s0", "s7"}), _claim("fm2", {"s1"})]
    scores = [np.arange(8.0)[::-1], np.arange(8.0)[::-1]]  # s0 first … s7 last
    assert hits_at_k(lists, scores) == {"fm2": [False, True]}
    assert recall_at_k(hits_at_k(lists, scores)) == {"fm2": 0.5}


def test_paired_against_counts_the_claims_only_one_ranker_gets() -> None:
    lists = [_claim("fm2", {"s7"}) for _ in range(4)]
    low_first = np.arange(8.0)  # s7 best
    high_first = np.arange(8.0)[::-1]  # s7 last
    shipped, candidate = Path("models/ranker"), Path("out/ranker")
    names = {shipped: "", candidate: "candidate: "}
    orders = {
        "fused, retrieval_weight 1": [high_first] * 4,
        "candidate: fused, retrieval_weight 1": [low_first] * 3 + [high_first],
    }
    hits = {name: hits_at_k(lists, scores) for name, scores in orders.items()}
    paired = paired_against(hits, names, [candidate], [1.0])
    ((name, by_file),) = paired.items()
    assert name == "candidate: fused, retrieval_weight 1 - MODEL fused, retrieval_weight 1"
    assert by_file["fm2"]["difference"] == 0.75
    assert (by_file["fm2"]["only_this"], by_file["fm2"]["only_baseline"]) == (3, 0)
