"""A real `feverous-es serve` process on a free loopback port, for the API and browser tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server(NamedTuple):
    url: str
    pid: int


@contextmanager
def running_server(
    index: Path, *, token: str | None = None, args: tuple[str, ...] = ()
) -> Iterator[Server]:
    """Start the service over ``index``, wait until it answers, yield its URL and process id,
    stop it."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "FEVEROUS_ES_SERVE_TOKEN"}
    if token:
        env["FEVEROUS_ES_SERVE_TOKEN"] = token
    command = [
        sys.executable,
        "-m",
        "feverous_es",
        "serve",
        "--index",
        str(index),
        "--port",
        str(port),
        *args,
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                out = process.stdout.read().decode() if process.stdout else ""
                raise RuntimeError(f"the server exited ({process.returncode}): {out}")
            try:
                httpx.get(url + "/", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the server did not start in 120 s") from None
                time.sleep(0.3)
        yield Server(url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
