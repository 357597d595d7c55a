"""Connections a slow or idle client cannot hold: uvicorn's h11 protocol with a deadline for
reading a request.

uvicorn closes a keep-alive connection idle after a response (``timeout_keep_alive``), but
waits without end for a request that never finishes arriving: a client that connects and sends
nothing, or sends its headers and half a body, holds a file descriptor for as long as it likes.
Here every request — its headers and its body — must arrive within ``READ_DEADLINE`` seconds of
its first byte (of the connection, for the first request): a client still sending then gets
408 if no answer has begun, and the connection is closed either way.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

READ_DEADLINE = 10.0  # seconds a request's headers and body have to arrive
_TIMEOUT_BODY = b'{"error": "the request did not arrive within its read deadline"}'
_TIMEOUT_ANSWER = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(_TIMEOUT_BODY), _TIMEOUT_BODY)
)


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol; a request that has not fully arrived ``READ_DEADLINE`` seconds
    after it began is answered 408 (or, once an answer began, cut) and its connection closed."""

    read_deadline = READ_DEADLINE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._read_timer is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the next request on a kept-alive connection begins
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE and self.conn.their_state is not h11.SEND_BODY:
            self._disarm()  # the request has arrived (or the connection is ending)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(self.read_deadline, self._too_slow)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _too_slow(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(_TIMEOUT_ANSWER)
        self.transport.close()
