"""Readiness: may this instance take traffic now?

Ready means the pipeline's thread runs, every model file the pipeline runs is still there
(the models are loaded before the server listens, but a later session reads them again), and
the store answers a cheap query (:meth:`Store.ping`: the embedded store also checks that its
files were not removed, replaced or truncated) within ``timeout`` seconds. The answer is kept
for ``ttl`` seconds, so an orchestrator polling every instance does not load the cluster;
concurrent probes share one check. The ping runs on a thread of its own, not the pipeline's: a
probe must not wait behind a queue of claims. :meth:`Readiness.watch` checks every
``interval`` seconds in the background, so the readiness metric is right from the start,
whether anything probes or not.

A check that fails has a public ``category`` (``store unreachable``, ``store not answering``,
…: what anyone may read, with no host, port or path in it) and a ``detail`` (the error itself,
for the log and for the token holder's ``/v1/health``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from feverous_es.errors import StoreError
from feverous_es.index.store import Store
from feverous_es.serve.metrics import store_error_kind

TTL = 3.0  # seconds a check is kept
TIMEOUT = 2.0  # seconds the store has to answer
INTERVAL = 10.0  # seconds between background checks

# The public words for each kind of store error (the metrics' kinds).
CATEGORIES = {
    "unreachable": "store unreachable",
    "unauthorized": "store refused the credentials",
    "incompatible": "index incompatible",
    "changed": "index changed",
    "other": "store error",
}
STORE_NOT_ANSWERING = "store not answering"
MODEL_MISSING = "model missing"
PIPELINE_STOPPED = "pipeline stopped"

log = logging.getLogger("feverous_es.serve")


@dataclass(frozen=True)
class Check:
    """One readiness check: ``category`` says why not in words anyone may read, ``detail``
    in the words of the error."""

    ready: bool
    category: str = ""
    detail: str = ""

    def to_dict(self, *, detail: bool = False) -> dict[str, str]:
        """The check as ``/v1/health`` reports it (``detail``: with the error's own words)."""
        if self.ready:
            return {"status": "ready"}
        answer = {"status": "unavailable", "reason": self.category}
        return {**answer, "detail": self.detail} if detail else answer


class Readiness:
    """Checks ``store``; ``stopped()`` says why the pipeline's thread ended, if it did;
    ``on_store_error`` hears of each store error a check meets, ``on_check`` of each check."""

    def __init__(
        self,
        store: Store,
        *,
        stopped: Callable[[], str | None] = lambda: None,
        ttl: float = TTL,
        timeout: float = TIMEOUT,
        on_store_error: Callable[[StoreError], None] = lambda _: None,
        on_check: Callable[[Check], None] = lambda _: None,
        model_files: Sequence[Path] = (),
    ) -> None:
        self.store, self.stopped, self.ttl, self.timeout = store, stopped, ttl, timeout
        self.model_files = list(model_files)  # read again by a later session: they must stay
        self.on_store_error, self.on_check = on_store_error, on_check
        self._last: Check | None = None
        self._checked_at = 0.0
        self._lock = asyncio.Lock()

    async def check(self) -> Check:
        async with self._lock:  # a probe arriving during a check waits for it, then reuses it
            if (failure := self.stopped()) is not None:  # known at once: no store call, no ttl
                self._record(Check(False, PIPELINE_STOPPED, failure))
            elif self._last is None or time.monotonic() - self._checked_at >= self.ttl:
                self._record(await self._probe())
            assert self._last is not None
            return self._last

    def _record(self, check: Check) -> None:
        if not check.ready and check != self._last:  # the detail is logged, once
            log.warning("not ready: %s (%s)", check.category, check.detail)
        self._last, self._checked_at = check, time.monotonic()
        self.on_check(check)

    async def watch(self, interval: float = INTERVAL) -> None:
        """Check every ``interval`` seconds until cancelled."""
        while True:
            await self.check()
            await asyncio.sleep(interval)

    async def _probe(self) -> Check:
        if missing := [str(f) for f in self.model_files if not f.is_file()]:
            return Check(False, MODEL_MISSING, f"model files gone: {', '.join(missing)}")
        try:
            # The thread's own timeout bounds a store that hangs past its client's timeout.
            await asyncio.wait_for(
                asyncio.to_thread(self.store.ping, self.timeout), self.timeout + 1
            )
        except StoreError as error:
            self.on_store_error(error)
            return Check(False, CATEGORIES[store_error_kind(error)], str(error))
        except TimeoutError:
            detail = f"the store did not answer within {self.timeout:g} s"
            return Check(False, STORE_NOT_ANSWERING, detail)
        return Check(True)
