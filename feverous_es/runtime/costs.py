"""What verifying costs, counted rather than timed: model runs, the pairs and tokens they read,
store calls and the hits they return.

Counts do not move with the machine's load, so a test can hold the pipeline to a recorded
budget (``tests/test_cost_budget.py``) where a timed test could not: a change that makes a
claim read more pairs, longer pairs, or fetch more hits fails it. Timings stay in the bench
records (``bench/pipeline.py``).

:data:`METER` is the process's counter: :class:`~feverous_es.runtime.model.OnnxModel` counts each
run into it under the model directory's name, and :class:`CountedStore` each store call. The
pipeline attributes the counts to its stages (``Pipeline.costs``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sized
from typing import Any


class CostMeter:
    """Counters by name (``"sentence-ranker pairs"``, ``"store search_cells hits"``), safe to add
    to from several threads."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, counts: Mapping[str, int]) -> None:
        with self._lock:
            self._counts.update(counts)

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)


METER = CostMeter()


def count_model_run(model: str, rows: int, tokens: int) -> None:
    """Count one run of ``model`` (its directory's name) over ``rows`` inputs holding ``tokens``
    non-padding tokens in all."""
    METER.add({f"{model} runs": 1, f"{model} rows": rows, f"{model} tokens": tokens})


class CountedStore:
    """A store (any :class:`~feverous_es.index.store.Store`) whose calls, and the hits or
    elements each returns, are counted into :data:`METER`: ``store <method> calls`` and
    ``store <method> hits``. Everything else passes through."""

    def __init__(self, store: Any) -> None:
        self._store = store

    @property
    def wrapped(self) -> Any:
        return self._store

    def ping(self, timeout: float) -> None:
        # A readiness probe, from another thread: not a claim's cost, so never counted.
        self._store.ping(timeout)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if name.startswith("_") or not callable(value):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            hits = len(result) if isinstance(result, Sized) else 0
            METER.add({f"store {name} calls": 1, f"store {name} hits": hits})
            return result

        return counted


def difference(after: Counter[str], before: Counter[str]) -> Counter[str]:
    """What was counted between two snapshots."""
    return Counter({k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)})
