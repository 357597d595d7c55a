"""A client that pipelines its requests: the server reads no further ahead than one request,
starts a pipelined request's read deadline when it begins, and closes a connection after its
requests (feverous_es/serve/connections.py); the probe port and the per-client accounting
(feverous_es/serve/guard.py)."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

pytest.importorskip("fastapi")

import httpx
import uvicorn
from uvicorn.server import ServerState

from bench.serve_process import free_port, running_server
from feverous_es.serve.connections import LOOKAHEAD, guarded_protocol
from feverous_es.serve.guard import ConnectionGuard, client_key
from feverous_es.serve.limits import CLIENT_CAP, ConnectionLimits

SMALL_POST = (b"POST /v1/verify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1\r\n\r\nx")  # fmt: skip
LIVE = b"GET /v1/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


class Transport(asyncio.Transport):
    """A socket as the protocol sees it: records whether reading is on, keeps what is written."""

    def __init__(self) -> None:
        super().__init__()
        self.reading, self.written, self.closing = True, bytearray(), False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("10.0.0.9", 40000), "sockname": ("127.0.0.1", 8080)}.get(name)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def write(self, data: Any) -> None:
        self.written += data

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def can_write_eof(self) -> bool:
        return True


def test_a_pipelining_client_is_read_no_further_ahead_than_one_request() -> None:
    """The first request is slow and looks at its client every few milliseconds (as the API's
    routes do while a claim is verified): each look used to turn reading on again, and h11 kept
    whatever came. Now reading stays off once a request's worth waits behind it."""

    async def slow(scope: Any, receive: Any, send: Any) -> None:
        await receive()  # the body
        while True:  # as Starlette's is_disconnected: a look at receive(), cancelled at once
            look = asyncio.ensure_future(receive())
            await asyncio.sleep(0.001)
            if not look.done():
                look.cancel()
                continue
            return  # the client went

    async def scenario() -> tuple[bool, int, bool]:
        config = uvicorn.Config(slow, lifespan="off")
        config.load()
        protocol_class = guarded_protocol(ConnectionGuard(ConnectionLimits(cap=8)))
        protocol = protocol_class(config=config, server_state=ServerState(), app_state={},
                                  _loop=asyncio.get_running_loop())  # fmt: skip
        transport = Transport()
        protocol.connection_made(transport)
        protocol.data_received(LIVE)  # the slow request
        sent = 0
        for _ in range(200):  # what the client pipelines behind it, 64 KiB a read
            await asyncio.sleep(0.002)  # the app looks at its client meanwhile
            if transport.reading:
                protocol.data_received(SMALL_POST * 600)
                sent += len(SMALL_POST) * 600
        paused, kept = not transport.reading, protocol._kept()
        protocol.connection_lost(None)
        await asyncio.sleep(0.01)
        return paused, kept, sent > 3 * LOOKAHEAD

    paused, kept, client_had_more = asyncio.run(scenario())
    assert client_had_more is False, "the server went on reading past one request's worth"
    assert paused and LOOKAHEAD < kept <= LOOKAHEAD + 64 * 1024


def address(url: str) -> tuple[str, int]:
    host, port = url.rsplit("//", 1)[1].rsplit(":", 1)
    return host, int(port)


def test_a_pipelined_request_whose_body_never_comes_is_closed_at_the_read_deadline(
    sample_index,
) -> None:
    pipelined = LIVE + (b"POST /v1/verify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                        b"application/json\r\nContent-Length: 10\r\n\r\n")  # fmt: skip
    with running_server(sample_index) as server:
        clients = [socket.create_connection(address(server.url), timeout=30) for _ in range(5)]
        started = time.monotonic()
        for s in clients:
            s.sendall(pipelined)
        answers = []
        for s in clients:
            received = bytearray()
            while chunk := s.recv(4096):  # until the server closes it
                received += chunk
            answers.append(bytes(received))
            s.close()
        took = time.monotonic() - started
    assert took < 10 + 5, f"the body-less requests held their connections {took:.0f} s"
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 200 ")  # the first request was answered
        assert b"HTTP/1.1 408 " in answer  # the pipelined one timed out


def test_a_connection_is_closed_after_its_requests(sample_index) -> None:
    with (
        running_server(sample_index) as server,
        socket.create_connection(address(server.url), timeout=30) as s,
    ):
        s.sendall(LIVE * 1001)
        received = bytearray()
        while chunk := s.recv(65536):
            received += chunk
    answers = bytes(received).split(b"HTTP/1.1 ")[1:]
    assert len(answers) == 1000  # the 1,001st request is never read
    assert b"connection: close" in answers[-1] and b"connection: close" not in answers[-2]


def test_the_probe_port_answers_while_the_api_port_is_full(sample_index) -> None:
    probe = free_port()
    args = ("--max-connections", "4", "--max-connections-per-client", "4",
            "--probe-port", str(probe))  # fmt: skip
    with running_server(sample_index, args=args) as server:
        held = [socket.create_connection(address(server.url), timeout=30) for _ in range(4)]
        try:
            time.sleep(0.5)  # the four admitted: the API port is full
            refused = httpx.get(server.url + "/v1/health/live", timeout=30)
            probes = f"http://127.0.0.1:{probe}"
            live = httpx.get(probes + "/v1/health/live", timeout=30)
            ready = httpx.get(probes + "/v1/health/ready", timeout=30)
            other = httpx.post(probes + "/v1/verify", json={"claim": "A claim."}, timeout=30)
        finally:
            for s in held:
                s.close()
    assert refused.status_code == 503
    assert live.status_code == 200 and ready.status_code == 200
    assert other.status_code == 404 and "probe" in other.json()["error"]


def test_a_client_is_counted_by_its_address_or_its_ipv6_64() -> None:
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:ffff::7")
    assert client_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:10.1.2.3") == "10.1.2.3" and client_key("10.1.2.3") == "10.1.2.3"
    assert ConnectionLimits(cap=600).client_cap == CLIENT_CAP == 16
    assert ConnectionLimits(cap=4).client_cap == 4
    guard = ConnectionGuard(ConnectionLimits(cap=10, per_client=2, exempt=frozenset({"10.9.9.9"})))
    assert [guard.admit(f"2001:db8::{n}") for n in (1, 2, 3)] == [None, None, "client_cap"]
    assert all(guard.admit("10.9.9.9") is None for _ in range(3))  # a trusted proxy
    assert guard.admit("10.0.0.1", probe=True) is None and guard.probes == 1 and guard.open == 5
