"""Hits@k of a gold item in a ranking, at the cut-offs every ranking bench reports."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

HITS_AT = (1, 5, 10)


def hits_at(ranked: Sequence[Hashable], gold: Hashable) -> dict[int, bool]:
    """Whether ``gold`` is among the first k of ``ranked``, for each k of :data:`HITS_AT`."""
    if gold not in ranked:
        return dict.fromkeys(HITS_AT, False)
    position = list(ranked).index(gold)
    return {k: position < k for k in HITS_AT}


def print_hits(title: str, hits: Mapping[str, Mapping[str, float]]) -> None:
    """``title``, then each ranking's Hits@1 / 5 / 10 (per cent) on a line."""
    print(title)
    for name, shares in hits.items():
        print(f"  {name:<40} {' / '.join(f'{v:.1f}' for v in shares.values())}")
