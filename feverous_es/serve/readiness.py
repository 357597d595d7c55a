"""Readiness: may this instance take traffic now?

Ready means the models are loaded (the server warms them before it listens, so an app that
answers has them) and the store answers a cheap query (:meth:`Store.ping`) within
``timeout`` seconds. The answer is kept for ``ttl`` seconds, so an orchestrator polling every
instance does not load the cluster; concurrent probes share one check. The ping runs on a
thread of its own, not the pipeline's: a probe must not wait behind a queue of claims.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from feverous_es.errors import StoreError
from feverous_es.index.store import Store

TTL = 3.0  # seconds a check is kept
TIMEOUT = 2.0  # seconds the store has to answer


@dataclass(frozen=True)
class Check:
    """One readiness check: ``reason`` says why not, in one line."""

    ready: bool
    reason: str = ""

    def to_dict(self) -> dict[str, str]:
        if self.ready:
            return {"status": "ready"}
        return {"status": "unavailable", "reason": self.reason}


class Readiness:
    """Checks ``store``; ``on_store_error`` hears of each store error a check meets."""

    def __init__(
        self,
        store: Store,
        *,
        ttl: float = TTL,
        timeout: float = TIMEOUT,
        on_store_error: Callable[[StoreError], None] = lambda _: None,
    ) -> None:
        self.store, self.ttl, self.timeout = store, ttl, timeout
        self.on_store_error = on_store_error
        self._last: Check | None = None
        self._checked_at = 0.0
        self._lock = asyncio.Lock()

    async def check(self) -> Check:
        async with self._lock:  # a probe arriving during a check waits for it, then reuses it
            if self._last is None or time.monotonic() - self._checked_at >= self.ttl:
                self._last = await self._probe()
                self._checked_at = time.monotonic()
            return self._last

    async def _probe(self) -> Check:
        try:
            # The thread's own timeout bounds a store that hangs past its client's timeout.
            await asyncio.wait_for(
                asyncio.to_thread(self.store.ping, self.timeout), self.timeout + 1
            )
        except StoreError as error:
            self.on_store_error(error)
            return Check(False, str(error))
        except TimeoutError:
            return Check(False, f"the store did not answer within {self.timeout:g} s")
        return Check(True)
