"""The cascade's threshold (``--reader auto``), chosen through the whole pipeline on the
validation claims (:mod:`bench.validation`).

    run = "bench.cascade:cascade_threshold"   # on the mini index (--index); options:
    # thresholds, per_file, within

The verdict reads each claim's evidence with the default reader, the large one, and the cascade
at each threshold (the large tier reads a pair when the default reader's top probability is
below it). The threshold chosen is the cheapest one whose mean accuracy is within ``within`` of
the best cascade's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.context import Context
from bench.validation import first_within, read_variants


def cascade_threshold(
    context: Context,
    *,
    thresholds: Sequence[float] = (0.5, 0.6, 0.7, 0.8, 0.9),
    per_file: int = 150,
    within: float = 0.005,
) -> dict[str, Any]:
    """Each reader's and each threshold's validation accuracy and verdict seconds a claim."""
    readers: dict[str, dict[str, Any]] = {"default": {"model": "default"},
                                          "large": {"model": "large"}}  # fmt: skip
    for t in thresholds:
        readers[f"auto {round(t * 100)}"] = {"model": "auto", "cascade_below": t}
    figures = read_variants(context, readers, per_file)
    chosen = first_within(figures, [n for n in readers if n.startswith("auto")], within)
    figures["chosen"] = {"reader": chosen, "threshold": readers[chosen]["cascade_below"]}
    print(f"chosen: {chosen}")
    return figures
