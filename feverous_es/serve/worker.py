"""One thread owns the pipeline; requests queue for it and claims that wait together are
verified as one batch.

The pipeline's stores and models are used from one thread only (tantivy searchers, ONNX
sessions and the Elasticsearch client are shared objects, and the CPU has no room for two
model batches at once anyway). The queue is bounded: a request that finds it full is refused at
once (:class:`QueueFull`, HTTP 503) rather than waiting without end. The event loop never
blocks on the pipeline: each request awaits a future the worker thread resolves.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from feverous_es.errors import FeverousError, WorkAbandoned
from feverous_es.runtime.costs import METER
from feverous_es.runtime.malloc import release_free_memory
from feverous_es.verify.pipeline import ClaimResult, Pipeline


class QueueFull(FeverousError):
    """The worker's queue holds as many requests as it may: try again shortly."""


class QueueShares:
    """Requests each client has in the service at once, at most ``share`` of them: one client
    (a crowd behind one proxy aside) cannot fill the queue for everyone (:class:`QueueFull`)."""

    def __init__(self, share: int) -> None:
        self.share = share
        self._held: Counter[str] = Counter()

    @contextmanager
    def held(self, client: str) -> Iterator[None]:
        """One of ``client``'s requests, for as long as the block runs."""
        if self._held[client] >= self.share:
            raise QueueFull(
                f"this client has {self.share} requests in the service, its share of the "
                "queue: wait for an answer first"
            )
        self._held[client] += 1
        try:
            yield
        finally:
            self._held[client] -= 1
            if not self._held[client]:
                del self._held[client]


class WorkerStopped(FeverousError):
    """The pipeline's thread has ended: no request can be answered (liveness says so, and the
    orchestrator restarts the process)."""


class ShuttingDown(WorkerStopped):
    """The server is shutting down and its drain time is over: requests still waiting are
    refused (retry on another instance)."""


class RequestTimeout(FeverousError):
    """A request was not answered within the service's deadline."""


@dataclass
class _Job:
    """A request for the worker: claims to verify (with their hop setting), or a call."""

    future: asyncio.Future[Any]
    claims: Sequence[str] = ()
    hops: int | None = None
    call: Callable[[Pipeline], Any] | None = None


_STOP = object()
SHUTDOWN_GRACE = 5.0  # seconds a batch may run past the drain's end, and the thread after that
log = logging.getLogger("feverous_es.serve")


class PipelineWorker:
    """Runs ``pipeline`` on its own thread. ``max_queue``: requests that may wait (more are
    refused); ``max_batch``: claims verified together, across requests with the same hops;
    ``on_batch(claims, stage_seconds)``: told of each verified batch, ``on_costs(counts)`` of
    what each job counted (:mod:`feverous_es.runtime.costs`), on the worker thread (an error
    either raises is logged; it neither fails the job nor ends the thread).

    A request whose client went away (its future cancelled, as when a drain's timeout ends
    the requests still waiting, or its deadline passed) is dropped unread. If the thread ends
    anyway (a plugin raising ``BaseException``), :attr:`failure` says why, every request in
    flight or waiting is answered :class:`WorkerStopped`, and so is every later one."""

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        max_queue: int = 64,
        max_batch: int = 16,
        on_batch: Callable[[int, dict[str, float]], None] = lambda claims, seconds: None,
        on_costs: Callable[[Mapping[str, int]], None] = lambda counts: None,
    ) -> None:
        self.pipeline = pipeline
        self.max_queue = max_queue
        self.max_batch = max_batch
        self.on_batch, self.on_costs = on_batch, on_costs
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queue)
        self._held: _Job | None = None  # taken while batching, but for another hop setting
        self._thread = threading.Thread(target=self._run, name="feverous-es-pipeline", daemon=True)
        self._in_flight: list[_Job] = []
        self.batches = 0
        self.failure: str | None = None  # why the thread ended, if it did
        self.batch_started: float | None = None  # monotonic time the running batch began
        self.closing: str | None = None  # set by cut_off: why waiting requests are refused

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> bool:
        """Finish the jobs already queued, then end the thread; wait at most ``timeout``
        seconds (a batch stuck on a hung store must not hold the process: the thread is a
        daemon, and goes with it). Whether the thread ended."""
        self._queue.put(_STOP)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("the pipeline worker did not finish within %g s; leaving it", timeout)
        return not self._thread.is_alive()

    def cut_off(self, reason: str) -> None:
        """The drain's end: every request still waiting, and every later one, is answered
        :class:`ShuttingDown` with ``reason`` at once; the batch running finishes."""
        self.closing = reason
        waiting = self._take_waiting()
        for job in waiting:
            if job is not _STOP and not job.future.done():
                _settle(job.future, _raiser(ShuttingDown(reason)))
        if _STOP in waiting:  # stop() asked first: the thread still ends
            self._queue.put(_STOP)

    @property
    def waiting(self) -> int:
        return self._queue.qsize()

    def running_for(self) -> float:
        """Seconds the batch now running has run (0 when none runs)."""
        started = self.batch_started
        return 0.0 if started is None else time.monotonic() - started

    async def verify(
        self, claims: Sequence[str], hops: int | None = None, *, timeout: float | None = None
    ) -> list[ClaimResult]:
        """The results of ``claims`` (``hops``: next-hop rounds, None for the pipeline's),
        within ``timeout`` seconds (:class:`RequestTimeout` after)."""
        return await self._submit(lambda f: _Job(f, claims=claims, hops=hops), timeout)

    async def run(self, call: Callable[[Pipeline], Any], *, timeout: float | None = None) -> Any:
        """``call(pipeline)`` on the worker thread (searches and other reads of the store)."""
        return await self._submit(lambda future: _Job(future, call=call), timeout)

    async def _submit(
        self, make: Callable[[asyncio.Future[Any]], _Job], timeout: float | None
    ) -> Any:
        if self.failure is not None:
            raise WorkerStopped(self.failure)
        if self.closing is not None:
            raise ShuttingDown(self.closing)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait(make(future))
        except queue.Full:
            raise QueueFull(
                f"the server is busy ({self.max_queue} requests waiting): try again shortly"
            ) from None
        try:
            # wait_for cancels the future at the deadline: the worker then drops the request
            # unread if it has not begun it (a batch begun runs on; its answer is discarded).
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise RequestTimeout(
                f"no answer within {timeout:g} s (the store or the queue is slow): try again"
            ) from None

    def _run(self) -> None:
        try:
            self._serve()
        except BaseException as error:  # the thread ends: every request hears why
            self.failure = f"the pipeline worker stopped: {type(error).__name__}: {error}"
            log.critical(self.failure, exc_info=error)
            self._fail_all(WorkerStopped(self.failure))

    def _serve(self) -> None:
        while True:
            job = self._held or self._queue.get()
            self._held = None
            if job is _STOP:
                return
            if job.future.cancelled():
                continue
            if self.closing is not None:  # taken before cut_off could: refused all the same
                _settle(job.future, _raiser(ShuttingDown(self.closing)))
                continue
            self._in_flight = [job]
            if job.call is not None:
                with METER.tally() as counted:
                    _settle(job.future, partial(job.call, self.pipeline))
                self._in_flight = []
                self._after(partial(self.on_costs, counted))
                continue
            batch = self._in_flight = self._batch(job)
            claims = [claim for j in batch for claim in j.claims]
            seconds, costs = dict(self.pipeline.seconds), _total(self.pipeline.costs)
            self.pipeline.stop_when = partial(_abandoned, batch)
            self.batch_started = time.monotonic()
            try:
                results = self._verify(claims, job.hops)
            except WorkAbandoned:  # every request of the batch went away: nobody to answer
                log.info("a batch of %d claims stopped: nobody waits for it", len(claims))
            except Exception as error:
                self._answer_alone(batch, error)
            else:
                start = 0
                for j in batch:
                    _settle(j.future, partial(list, results[start : start + len(j.claims)]))
                    start += len(j.claims)
            finally:
                self.pipeline.stop_when, self.batch_started = None, None
            self._in_flight = []
            self.batches += 1
            self._after(partial(self._observe, len(claims), seconds, costs))

    def _answer_alone(self, batch: list[_Job], error: Exception) -> None:
        """A batch raised: each of its requests is verified again on its own, so that only the
        one whose claims raise gets an error (the thread goes on either way)."""
        if len(batch) == 1:
            _settle(batch[0].future, _raiser(error))
            return
        log.warning("a batch of %d requests failed (%s); verifying each alone", len(batch),
                    type(error).__name__)  # fmt: skip
        for j in batch:
            if not j.future.cancelled():
                _settle(j.future, partial(self._verify, list(j.claims), j.hops))

    def _observe(self, claims: int, seconds: dict[str, float], costs: Counter[str]) -> None:
        """Tell the hooks what a batch took: the pipeline's totals now less ``seconds`` and
        ``costs``, read before it."""
        self.on_batch(claims, _spent(seconds, self.pipeline.seconds))
        self.on_costs(_total(self.pipeline.costs) - costs)

    @staticmethod
    def _after(hook: Callable[[], object]) -> None:
        """Bookkeeping after a job: its failure is logged, never the requests' nor the
        thread's; the memory the job freed goes back to the system."""
        try:
            hook()
            release_free_memory()
        except Exception:
            log.exception("the pipeline worker's after-job hook failed")

    def _fail_all(self, error: Exception) -> None:
        """Answer every request in flight, held or waiting with ``error``."""
        jobs = [*self._in_flight, *([self._held] if self._held else []), *self._take_waiting()]
        for job in jobs:
            if job is not _STOP and not job.future.done():
                _settle(job.future, _raiser(error))

    def _take_waiting(self) -> list[Any]:
        """Every job in the queue, taken out of it (the stop marker too, if it is there)."""
        jobs = []
        while True:
            try:
                jobs.append(self._queue.get_nowait())
            except queue.Empty:
                return jobs

    def _batch(self, first: _Job) -> list[_Job]:
        """``first`` and the verify jobs queued behind it with the same hops, up to
        ``max_batch`` claims; a job that does not fit is held for the next round."""
        batch, size = [first], len(first.claims)
        while size < self.max_batch:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not _STOP and job.future.cancelled():
                continue
            fits = job is not _STOP and job.call is None and job.hops == first.hops
            if not fits or size + len(job.claims) > self.max_batch:
                self._held = job
                break
            batch.append(job)
            size += len(job.claims)
        return batch

    def _verify(self, claims: list[str], hops: int | None) -> list[ClaimResult]:
        config = self.pipeline.config
        if hops is None or hops == config.hops:
            return self.pipeline.verify_many(claims)
        self.pipeline.config = replace(config, hops=hops)
        try:
            return self.pipeline.verify_many(claims)
        finally:
            self.pipeline.config = config


def _abandoned(batch: Sequence[_Job]) -> bool:
    """Whether every request of ``batch`` went away (deadline passed, client gone)."""
    return all(job.future.cancelled() for job in batch)


def _spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Seconds per stage between two readings of ``Pipeline.seconds``."""
    return {stage: total - before.get(stage, 0.0) for stage, total in after.items()
            if total > before.get(stage, 0.0)}  # fmt: skip


def _total(costs: Mapping[str, Counter[str]]) -> Counter[str]:
    """``Pipeline.costs`` summed over its stages."""
    return sum(costs.values(), Counter())


def _raiser(error: Exception) -> Callable[[], Any]:
    def again() -> Any:
        raise error

    return again


def _settle(future: asyncio.Future[Any], compute: Callable[[], Any]) -> None:
    """Compute on this thread, then hand the value (or the error) to ``future``'s loop; a
    request whose client went away has a cancelled future, which is left alone."""
    try:
        value, error = compute(), None
    except Exception as raised:
        value, error = None, raised

    def deliver() -> None:
        if future.done():  # cancelled (the client went away), or answered when the thread died
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    future.get_loop().call_soon_threadsafe(deliver)
