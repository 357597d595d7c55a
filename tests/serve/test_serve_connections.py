"""A crowd, a client that never reads, and the caps, against a real `feverous-es serve` process
with real sockets: the server's descriptors are counted from /proc, so each test fails if its
protection is removed (feverous_es/serve/connections.py)."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families

from bench.serve_process import Server, running_server
from feverous_es.serve.connections import ConnectionGuard
from feverous_es.serve.limits import ConnectionLimits, default_connection_cap

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")


def descriptors(server: Server) -> int:
    return len(os.listdir(f"/proc/{server.pid}/fd"))


def address(server: Server) -> tuple[str, int]:
    url = urlparse(server.url)
    return str(url.hostname), int(url.port or 80)


def samples(server: Server, name: str) -> list:
    text = httpx.get(server.url + "/metrics", timeout=30).text
    return [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]


def refused(server: Server) -> dict[str, float]:
    return {
        s.labels["reason"]: s.value
        for s in samples(server, "feverous_es_connections_refused_total")
    }


def answered(server: Server) -> float:
    """Requests the server answered, its /metrics aside (the tests poll it)."""
    found = samples(server, "feverous_es_requests_total")
    return sum(s.value for s in found if s.labels["route"] != "/metrics")


def settles(value: Callable[[], int], wanted: Callable[[int], bool], seconds: float) -> int:
    """``value()`` once ``wanted`` holds of it, or when ``seconds`` are up."""
    deadline = time.monotonic() + seconds
    while not wanted(found := value()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def crowd(server: Server, n: int) -> list[socket.socket]:
    sockets = []
    for _ in range(n):
        s = socket.create_connection(address(server), timeout=30)
        sockets.append(s)
    return sockets


def test_a_crowd_past_the_cap_is_refused_at_accept_with_the_json_error(sample_index) -> None:
    args = ("--max-connections", "40", "--exempt-loopback")
    with running_server(sample_index, args=args) as server:
        before = descriptors(server)
        held = crowd(server, 400)
        try:
            during = settles(lambda: descriptors(server), lambda n: n <= before + 45, 10)
            first_refused = held[-1].recv(4096)  # the last came when the cap was full
        finally:
            for s in held:
                s.close()
        assert during <= before + 45, f"{during} descriptors held, {before} before the crowd"
        head, _, body = first_refused.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 ")
        assert "connections" in json.loads(body)["error"]
        settles(lambda: descriptors(server), lambda n: n <= before + 2, 30)
        answer = httpx.get(server.url + "/v1/health/live", timeout=30)
        assert answer.status_code == 200  # normal again once the crowd has gone
        assert refused(server)["cap"] >= 350


def test_one_client_address_holds_at_most_its_own_cap(sample_index) -> None:
    args = ("--max-connections", "40", "--max-connections-per-client", "10")
    with running_server(sample_index, args=args) as server:
        before = descriptors(server)
        held = crowd(server, 30)
        try:
            during = settles(lambda: descriptors(server), lambda n: n <= before + 12, 10)
            answers = [s.recv(4096) for s in held[10:]]
        finally:
            for s in held:
                s.close()
        assert during <= before + 12
        assert all(a.startswith(b"HTTP/1.1 503 ") and b"one client" in a for a in answers)
        settles(lambda: descriptors(server), lambda n: n <= before + 2, 30)
        assert refused(server)["client_cap"] == 20


def test_a_refused_client_that_sent_its_request_reads_the_503_not_a_reset(sample_index) -> None:
    """Closing a socket with unread bytes resets it, and a reset loses the answer the client
    had not read yet: a refused client that sends its request (here after the refusal was
    written, in two parts) sends it whole and still reads the JSON 503, then the end of the
    connection."""
    args = ("--max-connections", "4", "--max-connections-per-client", "4")
    with running_server(sample_index, args=args) as server:
        held = crowd(server, 4)
        try:
            time.sleep(0.5)  # the crowd admitted (the cap is full: no /metrics to ask)
            late = [socket.create_connection(address(server), timeout=30) for _ in range(3)]
            for part in (b"POST /v1/verify HTTP/1.1\r\nhost: localhost\r\n", b"content-length: "
                         b"2\r\ncontent-type: application/json\r\n\r\n{}"):  # fmt: skip
                time.sleep(0.3)  # the refusal written first; a request sent in two parts
                for s in late:
                    s.sendall(part)  # a closed socket would reset the first, refuse the second
            answers = [b"".join(iter(partial(s.recv, 4096), b"")) for s in late]
            for s in late:
                s.close()
        finally:
            for s in held:
                s.close()
        for answer in answers:
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503 ") and "connections" in json.loads(body)["error"]


# Twenty stalled readers from one address: more than a client may hold by default.
STALLED_ARGS = ("--write-timeout", "3", "--max-connections-per-client", "32")


def stalled_readers(server: Server, requests: list[bytes]) -> list[socket.socket]:
    """A client for each of ``requests`` that sends it (as much as its socket takes) and reads
    nothing."""
    readers = []
    for each in requests:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills at once
        s.connect(address(server))
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.send(each)
        readers.append(s)
    return readers


def test_a_client_that_never_reads_is_cut_at_the_write_deadline(sample_index) -> None:
    requests = b"GET /static/app.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 2000
    with running_server(sample_index, args=STALLED_ARGS) as server:
        before = descriptors(server)
        readers = stalled_readers(server, [requests] * 20)
        try:
            stalled = settles(lambda: descriptors(server), lambda n: n >= before + 20, 10)
            # Each is cut once its answers have filled the socket's buffers and then waited the
            # deadline (how soon they fill depends on the machine's load).
            cut = settles(lambda: int(refused(server)["write_deadline"]), lambda n: n >= 20, 120)
            # The kernel queued little for them: the deadline began after a few dozen answers
            # each (~27 here; ~300 with the socket's auto-tuned 4 MiB, ~25 s more writing).
            written = answered(server)
            after = settles(lambda: descriptors(server), lambda n: n <= before + 2, 20)
        finally:
            for s in readers:
                s.close()
        assert stalled >= before + 20, "the slow readers were connected"
        assert cut == 20, f"{cut} of 20 slow readers cut at the write deadline"
        assert written <= 20 * 60, f"{written:.0f} answers written to clients that never read"
        assert after <= before + 2, f"{after} descriptors after the deadline, {before} before"


def test_a_stalled_reader_with_less_than_the_high_water_mark_waiting_is_released(
    sample_index,
) -> None:
    """Answers that fill the kernel's buffers and leave under 64 KiB in the transport never
    paused its writing; the rate is checked whenever anything waits, so the client is cut."""
    get = b"GET /static/app.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"  # 10,359 bytes an answer
    with running_server(sample_index, args=STALLED_ARGS) as server:
        before = descriptors(server)
        # 22 to 41 answers each: some fill the kernel's buffers and leave under 64 KiB waiting
        readers = stalled_readers(server, [get * n for n in range(22, 42)])
        try:
            cut = settles(lambda: int(refused(server)["write_deadline"]), lambda n: n >= 20, 45)
            after = settles(lambda: descriptors(server), lambda n: n <= before + 2, 20)
        finally:
            for s in readers:
                s.close()
        assert cut == 20, f"{cut} of 20 stalled readers released"
        assert after <= before + 2, f"{after} descriptors after the deadline, {before} before"


@pytest.mark.slow
def test_a_slow_steady_reader_receives_a_whole_batch_answer(sample_index) -> None:
    """A 64-claim batch answer (hundreds of KiB) read at ~40 KB/s takes several write
    deadlines: the client keeps reading, so it keeps its connection to the last byte."""
    claims = [f"The sample page number {n} is about a city." for n in range(64)]
    body = json.dumps({"claims": claims}).encode()
    request = (
        b"POST /v1/verify/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    with running_server(sample_index, args=("--write-timeout", "2")) as server:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        s.connect(address(server))
        s.settimeout(300)
        s.sendall(request + body)
        received = bytearray()
        while chunk := s.recv(4096):
            received += chunk
            time.sleep(0.1)  # ~40 KB/s: each window of 2 s takes ~80 KB
        s.close()
        head, _, answer = bytes(received).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 "), head[:200]
        assert len(answer) > 200_000 and len(json.loads(answer)["results"]) == 64
        assert refused(server)["write_deadline"] == 0


def test_a_burst_past_the_open_file_limit_leaves_the_server_under_it(sample_index) -> None:
    """3,000 connections at once against a server at `ulimit -n` 1,024: the accept loop takes
    at most the backlog a turn, so its descriptors stay under the limit, and it answers after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 3200:
        pytest.skip(f"the burst needs 3,200 open files here (hard limit {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        with running_server(sample_index, open_files=1024) as server:
            peak, stop = [descriptors(server)], threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    with contextlib.suppress(FileNotFoundError):
                        peak.append(descriptors(server))

            watcher = threading.Thread(target=sample)
            watcher.start()
            burst = []
            try:
                for _ in range(3000):
                    s = socket.socket()
                    s.setblocking(False)
                    with contextlib.suppress(BlockingIOError):
                        s.connect(address(server))
                    burst.append(s)
                time.sleep(3)
            finally:
                stop.set()
                watcher.join()
                for s in burst:
                    s.close()
            live = httpx.get(server.url + "/v1/health/live", timeout=30)
            log = "\n".join(server.log_lines())
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert max(peak) < 1024, f"{max(peak)} descriptors at the peak of the burst"
    assert "Too many open files" not in log
    assert live.status_code == 200


def test_the_cap_is_derived_from_the_open_file_limit_and_checked_against_it() -> None:
    assert default_connection_cap(1024) == 672 and default_connection_cap(65536) == 1024
    assert ConnectionLimits(cap=100).client_cap == 16
    with pytest.raises(ValueError, match="over this process's limit of 1024"):
        ConnectionLimits(cap=1000).check(limit=1024)
    ConnectionLimits(cap=600).check(limit=1024)
    guard = ConnectionGuard(ConnectionLimits(cap=3, per_client=2))
    assert [guard.admit("10.0.0.1") for _ in range(3)] == [None, None, "client_cap"]
    assert guard.admit("10.0.0.2") is None and guard.admit("10.0.0.3") == "cap"
    guard.leave("10.0.0.1")
    assert guard.admit("10.0.0.3") is None and guard.open == 3


def test_a_websocket_upgrade_gives_its_connection_slot_back(sample_index) -> None:
    """The service has no WebSocket route: an upgrade is an HTTP request like any other, and
    its connection leaves the count when the client closes it (with wsproto importable, as the
    dev extra makes it, uvicorn's "auto" switched the protocol and the slot was never freed)."""
    pytest.importorskip("wsproto")
    upgrade = (b"GET /v1/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               b"Sec-WebSocket-Version: 13\r\n\r\n")  # fmt: skip
    args = ("--max-connections", "40", "--max-connections-per-client", "10")
    with running_server(sample_index, args=args) as server:
        for _ in range(30):  # three times what one client may hold
            with socket.create_connection(address(server), timeout=30) as s:
                s.sendall(upgrade)
                assert s.recv(4096).startswith(b"HTTP/1.1 ")
        live = httpx.get(server.url + "/v1/health/live", timeout=30)
        assert live.status_code == 200, f"after the upgrades this address gets {live.text}"
        opened = lambda: int(samples(server, "feverous_es_connections_open")[0].value)  # noqa: E731
        assert settles(opened, lambda n: n <= 1, 10) <= 1  # only the metrics request's own
        log = server.log_lines()
    assert not [line for line in log if "Unsupported upgrade" in line or "No supported" in line]
    assert len([line for line in log if "upgrade requests answered" in line]) == 1  # 30 in 10 s
