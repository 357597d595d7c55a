"""A real `feverous-es serve` process on a free loopback port: what the tests, the browser
tests and the service benchmark talk to."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import IO, NamedTuple


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server(NamedTuple):
    url: str
    pid: int
    process: subprocess.Popen
    log: Path  # what the server printed so far (its request log lines among it)

    def log_lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()


@contextmanager
def running_server(
    index: Path | None,
    *,
    token: str | None = None,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    open_files: int | None = None,
) -> Iterator[Server]:
    """Start the service over ``index`` (None: the store's own settings, from ``env``), wait
    until it answers, yield it, stop it. ``cwd``: where it runs (a checkout's directory runs
    that checkout's code: ``python -m`` puts it first on the path); ``open_files``: its soft
    open-file limit (``ulimit -n``), else this process's."""
    port = free_port()
    environment = {k: v for k, v in (env or os.environ).items() if k != "FEVEROUS_ES_SERVE_TOKEN"}
    if token:
        environment["FEVEROUS_ES_SERVE_TOKEN"] = token
    where = ["--index", str(index)] if index is not None else []
    command = [sys.executable, "-m", "feverous_es", "serve", *where, "--port", str(port), *args]
    # The server's log goes to a file: a pipe nobody reads fills up and blocks the server.
    with tempfile.NamedTemporaryFile(prefix="feverous-es-serve-", suffix=".log") as log:
        process = subprocess.Popen(
            command, env=environment, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=None if open_files is None else partial(_limit_files, open_files),
        )  # fmt: skip
        try:
            url = _wait_until_up(process, log, port)
            yield Server(url, process.pid, process, Path(log.name))
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def _limit_files(soft: int) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _wait_until_up(process: subprocess.Popen, log: IO[bytes], port: int) -> str:
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            log.seek(0)
            output = log.read().decode()
            raise RuntimeError(f"the server exited ({process.returncode}): {output}")
        try:
            with urllib.request.urlopen(url + "/", timeout=1):
                return url
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start in 120 s") from None
            time.sleep(0.3)
