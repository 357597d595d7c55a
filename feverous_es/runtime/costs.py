"""What verifying costs, counted rather than timed: model runs, the pairs and tokens they read,
store calls and the hits they return.

Counts do not move with the machine's load, so a test can hold the pipeline to a recorded
budget (``tests/bench/test_cost_budget.py``) where a timed test could not: a change that makes a
claim read more pairs, longer pairs, or fetch more hits fails it. Timings stay in the bench
records (``bench/pipeline.py``).

:data:`METER` counts what a thread's work costs into the tallies that thread has open
(:meth:`CostMeter.tally`): :class:`~feverous_es.runtime.model.OnnxModel` counts each run under
the model directory's name, in the thread that asked for it (or, for work handed to a worker
thread, into the tallies :meth:`CostMeter.carried` takes along), and :class:`CountedStore` each
store call. The pipeline opens one tally a stage (``Pipeline.costs``), so work that runs on
another thread at the same time (the next batch's retrieval, a prefetch) is not counted twice,
and two pipelines verifying at once count their own work.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sized
from contextlib import contextmanager
from typing import Any, TypeVar

A = TypeVar("A")
R = TypeVar("R")


class CostMeter:
    """Counters by name (``"sentence-ranker rows"``, ``"store search_cells hits"``) for the
    blocks of a thread that ask for them."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()  # carried tallies are counted into from several threads

    def _open(self) -> list[Counter[str]]:
        if not hasattr(self._local, "tallies"):
            self._local.tallies = []
        return self._local.tallies

    def add(self, counts: Mapping[str, int]) -> None:
        """Count into every tally this thread has open (none: nobody is counting); a zero
        count is not recorded."""
        nonzero = {name: count for name, count in counts.items() if count}
        with self._lock:
            for tally in self._open():
                tally.update(nonzero)

    def carried(self, function: Callable[[A], R]) -> Callable[[A], R]:
        """``function`` counting into the tallies open in this thread wherever it runs: on a
        worker thread this one waits on (a reader's students, read at once)."""
        tallies = list(self._open())

        def run(argument: A) -> R:
            own = self._open()
            self._local.tallies = list(tallies)
            try:
                return function(argument)
            finally:
                self._local.tallies = own

        return run

    @contextmanager
    def tally(self) -> Iterator[Counter[str]]:
        """What this thread counts inside the block (an enclosing tally counts it too)."""
        counts: Counter[str] = Counter()
        tallies = self._open()
        tallies.append(counts)
        try:
            yield counts
        finally:
            tallies.pop()  # blocks in a thread nest: this one is the last opened


METER = CostMeter()
MODEL_KINDS = ("runs", "rows", "tokens")
STORE_KINDS = ("calls", "hits")


def count_name(subject: str, kind: str) -> str:
    """The meter's name of a count: ``"<model> runs"``, ``"store <method> hits"``."""
    return f"{subject} {kind}"


def read_count_name(name: str) -> tuple[str, str, str]:
    """``(what, subject, kind)`` of a meter's name: ``("store", method, kind)`` for a store
    call's count, ``("model", model, kind)`` for a model run's."""
    subject, _, kind = name.rpartition(" ")
    method = subject.removeprefix("store ")
    return ("store", method, kind) if method != subject else ("model", subject, kind)


def count_model_run(model: str, rows: int, tokens: int) -> None:
    """Count one run of ``model`` (its directory's name) over ``rows`` inputs holding ``tokens``
    non-padding tokens in all."""
    counts = dict(zip(MODEL_KINDS, (1, rows, tokens), strict=True))
    METER.add({count_name(model, kind): count for kind, count in counts.items()})


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
            METER.add({count_name(f"store {name}", "calls"): 1,
                       count_name(f"store {name}", "hits"): hits})  # fmt: skip
            return result

        return counted
