"""The bounds ``feverous-es serve`` holds its clients to, and their defaults: what the command
line reads (``serve --help``) without the ``serve`` extra installed; the protocol that enforces
them is :mod:`~feverous_es.serve.connections` (uvicorn's, imported only when serving)."""

from __future__ import annotations

import resource
from dataclasses import dataclass, field

READ_DEADLINE = 10.0  # seconds a request's headers and body have to arrive
WRITE_DEADLINE = 30.0  # seconds over which a client holding unsent answers must read MIN_WRITE_RATE
# Bytes a second a client must read while answers wait for it: a slow but steady client gets a
# whole batch answer (a 64-claim one is hundreds of KiB), one that stalls loses its connection.
MIN_WRITE_RATE = 1024
# Descriptors kept for the process itself (models, the index's files, logs, the store's
# connections) when the connection cap is derived from the open-file limit.
RESERVED_DESCRIPTORS = 128
# Idle connections cost a descriptor each and serve nobody: past a thousand, more come from a
# crowd, not from clients the pipeline (one batch at a time) could answer.
MAX_DEFAULT_CAP = 1024
# Connections one client may hold (nginx's limit_conn is set per client in the same way): the
# pipeline answers one batch at a time, so more than a few connections buy a client nothing but
# a larger share of the cap. At the default cap of 672 to 1,024, 42 to 64 clients fill it.
CLIENT_CAP = 16
# Connections the probe port holds at once (its own cap: probes never compete with the API).
PROBE_CAP = 8
# Requests one connection may carry, and seconds it may live, before the server closes it after
# an answer (nginx's keepalive_requests and keepalive_time defaults): a client cannot keep its
# slot for ever by sending a request every few seconds.
MAX_REQUESTS = 1000
MAX_LIFETIME = 3600.0


def open_file_limit() -> int:
    """The process's soft limit on open files."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def default_connection_cap(limit: int | None = None) -> int:
    """Three quarters of what the open-file limit leaves after the process's own descriptors
    (the accept loop never runs out: at a limit of 1,024, systemd's default, 672), and at most
    ``MAX_DEFAULT_CAP``."""
    limit = open_file_limit() if limit is None else limit
    return max(1, min(MAX_DEFAULT_CAP, (limit - RESERVED_DESCRIPTORS) * 3 // 4))


@dataclass(frozen=True)
class ConnectionLimits:
    """The bounds a server holds its clients to (``serve --help`` names each setting)."""

    cap: int = field(default_factory=default_connection_cap)
    per_client: int | None = None  # None: CLIENT_CAP, or the cap when it is smaller
    exempt_loopback: bool = False  # loopback counted like any other address unless told
    # Addresses not counted against the per-client cap: trusted proxies, whose clients they
    # count themselves (serve --trusted-proxy).
    exempt: frozenset[str] = frozenset()
    read_deadline: float = READ_DEADLINE
    write_deadline: float = WRITE_DEADLINE
    min_write_rate: int = MIN_WRITE_RATE
    max_requests: int = MAX_REQUESTS
    max_lifetime: float = MAX_LIFETIME
    probe_cap: int = PROBE_CAP

    @property
    def backlog(self) -> int:
        """Connections the listening socket queues, and the most one turn of the accept loop
        takes before any is counted: a third of what the open-file limit leaves past the cap
        and the process's own (a burst's accepted sockets and those refused but not yet closed
        fit in it), at least 16 and at most uvicorn's 2,048."""
        spare = open_file_limit() - RESERVED_DESCRIPTORS - self.cap
        return max(16, min(2048, spare // 3))

    @property
    def client_cap(self) -> int:
        return self.per_client if self.per_client is not None else min(CLIENT_CAP, self.cap)

    def check(self, limit: int | None = None) -> None:
        """Refuse a cap the open-file limit cannot hold, or a client cap over the cap
        (ValueError, the line a user reads)."""
        if self.client_cap > self.cap:
            raise ValueError(
                f"--max-connections-per-client {self.client_cap} is over --max-connections "
                f"{self.cap}"
            )
        limit = open_file_limit() if limit is None else limit
        if self.cap + RESERVED_DESCRIPTORS > limit:
            raise ValueError(
                f"a cap of {self.cap} connections needs {self.cap + RESERVED_DESCRIPTORS} open "
                f"files, over this process's limit of {limit} (raise it with `ulimit -n`, or "
                f"lower --max-connections to {default_connection_cap(limit)} or less)"
            )
