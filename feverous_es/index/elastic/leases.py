"""Leases in a build's progress index: one writer a part, one publisher a build.

A lease is a document (a part's progress, or the build's ``publish`` claim) that names its
holder and the time its hold runs out. It is taken with a create-only write where no document is
yet, else with a write conditioned on the sequence number read (``if_seq_no`` /
``if_primary_term``) over a document whose hold has run out; every later write by the holder is
conditioned the same way and renews the hold. So of two workers that race for one part, one
write wins and the other gets a 409: it never writes that part, and a holder whose lease was
taken over (it stalled past its hold) learns so at its next write and stops. A thread renews the
hold while the holder works between writes (a slow chunk, a long segment merge).

Holds are compared with the clock of the worker that reads them: clocks of the workers' hosts
must agree to well within the lease's seconds (NTP does). How long a holder has gone without a
lease write is measured on a clock that counts time suspended (``CLOCK_BOOTTIME``):
``time.monotonic`` stands still while a VM is suspended, and a holder resumed after its hold
ran out would think it still held it.

**Fencing.** A worker that was stopped (SIGSTOP, a swapped-out VM) or kept waiting on a request
learns at its next write that its lease was taken, but a part's data is written in bulk, which
no condition guards. So a holder fences itself: before writing data, or deleting what a failed
chunk left, it checks that its last successful lease write is younger than ``FENCE_SHARE`` of
the lease (:meth:`Lease.fence`): nobody can have taken the lease over since, and nobody can
before the lease's other half has run. The check is made before every bulk request, a retry
too, and deletes are conditioned on the sequence numbers they read besides. A lease write waits
at most ``WRITE_SHARE`` of the lease and is never retried blindly: a write whose answer was lost
but which was applied reads as a 409 next time, and is recognised as the holder's own by its
holder name.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from elastic_transport import ConnectionTimeout
from elasticsearch import ConflictError, Elasticsearch

from feverous_es.errors import StoreError

_log = logging.getLogger(__name__)
# The share of the lease a holder may go without a successful lease write and still write data
# (past it, another may take the lease once the rest has run), and the share a lease write may
# take before it is given up, but never under WRITE_MIN seconds (a write waits for a refresh:
# a second or so on a busy node). Fencing counts from when a write was sent, so a slow write
# never stretches a hold.
FENCE_SHARE = 0.5
WRITE_SHARE = 0.25
WRITE_MIN = 5.0
RENEW_SHARE = 0.2  # renewals a lease: two may fail before a holder fences itself


BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)  # Linux only


def since_boot() -> float:
    """Seconds on a clock that keeps counting while the machine is suspended (Linux's
    ``CLOCK_BOOTTIME``; ``time.monotonic`` where there is none)."""
    return time.clock_gettime(BOOTTIME) if BOOTTIME is not None else time.monotonic()


class LeaseHeld(StoreError):
    """Another worker holds the lease, and its hold has not run out."""


class LeaseLost(StoreError):
    """Another worker took the lease over (this one's hold ran out): it writes nothing more."""


def holder_name() -> str:
    """This process, as a lease names its holder: host, pid and a random tag (a pid is reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def until_text(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%H:%M:%S UTC")


class Lease:
    """The lease on document ``doc_id`` of ``index`` (its holder's fields ``holder`` and
    ``lease_until`` beside the document's own), for ``what`` (as messages name it), held
    ``seconds`` from each write."""

    def __init__(
        self, client: Elasticsearch, index: str, doc_id: str, what: str, seconds: float,
        clock: Callable[[], float] = since_boot,
    ) -> None:  # fmt: skip
        self.client, self.index, self.doc_id, self.what = client, index, doc_id, what
        self._clock = clock  # how long since the last lease write (fencing)
        self.seconds = seconds
        self.holder = holder_name()
        self._version: dict[str, int] | None = None  # if_seq_no / if_primary_term of our write
        self._document: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._lost: str | None = None
        self._ended = False  # released: no renewing after that
        self._written_at = float("-inf")  # the clock when our last applied lease write was sent
        # Lease writes wait a share of the lease, never retried blindly (the module).
        self.write_timeout = max(WRITE_MIN, seconds * WRITE_SHARE)
        self._writer = client.options(request_timeout=self.write_timeout, max_retries=0)

    def read(self) -> dict[str, Any] | None:
        """The document as the cluster holds it now (None: none yet)."""
        answer = self.client.options(ignore_status=404).get(index=self.index, id=self.doc_id)
        return answer.body["_source"] if answer.body.get("found") else None

    def take(self, document: dict[str, Any]) -> dict[str, Any] | None:
        """Take the lease, writing ``document`` (a document found keeps its own fields: they
        are the holder's to carry on). Returns the document as it was (None: new); LeaseHeld
        when another holds it."""
        answer = self._writer.options(ignore_status=404).get(index=self.index, id=self.doc_id)
        found = answer.body.get("found", False)
        source = answer.body["_source"] if found else None
        if source is not None:
            held_until = float(source.get("lease_until", 0))
            if source.get("holder") and held_until > time.time():
                raise LeaseHeld(
                    f"{self.what} is held by {source['holder']} until "
                    f"{until_text(held_until)} (renewed while it works)"
                )
            version = {"if_seq_no": answer.body["_seq_no"],
                       "if_primary_term": answer.body["_primary_term"]}  # fmt: skip
        else:
            version = {}
        self._version = version
        try:
            self._write({**document, **(source or {})}, create=source is None)
        except LeaseLost:
            raise LeaseHeld(f"{self.what} was taken by another worker just now") from None
        return source

    def take_when_free(
        self, document: dict[str, Any], done: Callable[[dict[str, Any]], bool]
    ) -> tuple[bool, dict[str, Any] | None]:
        """Take the lease as :meth:`take` does, waiting while another holds it (saying so once)
        until its hold ends or the document says its work is ``done``: (taken, the document as
        found); not taken only when done."""
        told = False
        while True:
            found = self.read()
            if found is not None and done(found):
                return False, found
            try:
                return True, self.take(document)
            except LeaseHeld as held:
                if not told:
                    _log.warning("waiting: %s", held)
                    told = True
                time.sleep(min(5.0, self.seconds / 3))

    def write(self, document: dict[str, Any]) -> None:
        """Write ``document`` as the holder (renewing the hold); LeaseLost when another worker
        took the lease over."""
        with self._lock:
            self._write(document)

    def release(self, document: dict[str, Any]) -> None:
        """Write ``document`` a last time with the hold ended (another may take it at once)."""
        with self._lock:
            self._write(document, until=0.0)
            self._ended = True

    def check(self) -> None:
        """LeaseLost when another worker took the lease over (the renewing thread saw it)."""
        if self._lost:
            raise LeaseLost(self._lost)

    def fence(self) -> None:
        """Before writing data under the lease: LeaseLost when it was taken over, or when this
        holder's last successful lease write is older than ``FENCE_SHARE`` of the lease (it
        was stopped or cut off: another may hold the lease now or soon)."""
        self.check()
        quiet = self._clock() - self._written_at
        if quiet > self.seconds * FENCE_SHARE:
            raise LeaseLost(
                f"{self.what}: this worker's hold was last renewed {quiet:.0f} s ago, past "
                f"{FENCE_SHARE:.0%} of its {self.seconds:g} s lease (it was stopped or cut off "
                "from the cluster): it stops without writing more; run it again to resume"
            )

    def fenced_in(self) -> bool:
        """Whether :meth:`fence` lets this holder write (or delete) now."""
        try:
            self.fence()
        except LeaseLost:
            return False
        return True

    def _write(
        self,
        document: dict[str, Any],
        create: bool = False,
        until: float | None = None,
        refresh: str = "wait_for",
    ) -> None:
        self.check()
        sent = self._clock()
        held_until = time.time() + self.seconds if until is None else until
        body = {**document, "holder": self.holder, "lease_until": held_until}
        conditions: dict[str, Any] = {"op_type": "create"} if create else dict(self._version or {})
        try:
            answer = self._writer.index(index=self.index, id=self.doc_id, document=body,
                                        refresh=refresh, **conditions)  # fmt: skip
        except ConnectionTimeout:
            raise StoreError(
                f"{self.what}: the cluster did not take the lease's write within "
                f"{self.write_timeout:g} s (it is slow or away); run again to resume"
            ) from None
        except ConflictError:
            answer = self._own_write_landed(body, refresh)
            if answer is None:
                self._lost = (
                    f"{self.what} was taken over by another worker (this one's hold ran out): "
                    "it stops without writing more"
                )
                raise LeaseLost(self._lost) from None
        self._version = {"if_seq_no": answer["_seq_no"], "if_primary_term": answer["_primary_term"]}
        self._document = document
        self._written_at = sent

    def _own_write_landed(self, body: dict[str, Any], refresh: str) -> Any:
        """After a 409: the answer of this write made again, when the document is still this
        holder's (an earlier write of ours was applied though its answer was lost, so the
        version we held was old); None when another worker holds it."""
        found = self._writer.options(ignore_status=404).get(index=self.index, id=self.doc_id)
        if not found.body.get("found") or found.body["_source"].get("holder") != self.holder:
            return None
        version = {"if_seq_no": found.body["_seq_no"],
                   "if_primary_term": found.body["_primary_term"]}  # fmt: skip
        try:
            return self._writer.index(index=self.index, id=self.doc_id, document=body,
                                      refresh=refresh, **version)  # fmt: skip
        except ConflictError:
            return None

    @property
    def lost(self) -> bool:
        return self._lost is not None

    @contextmanager
    def kept(self) -> Iterator[Lease]:
        """Renew the hold every ``RENEW_SHARE`` of its seconds while the block runs (a renewal
        rewrites the document as it is, so it waits for no refresh: a read by id sees it)."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self.seconds * RENEW_SHARE) and not self._ended:
                try:
                    with self._lock:
                        if not self._ended:
                            self._write(self._document, refresh="false")
                except LeaseLost:
                    return
                except Exception:  # the cluster busy or away: the next write says so, or renews
                    continue

        thread = threading.Thread(target=renew, name=f"lease {self.doc_id}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
