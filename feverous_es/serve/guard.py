"""What one server's connections hold, counted the way nginx counts them: by client (an IPv6
client by its /64, which one host is usually given whole), against a cap for the server and a
small one a client; the probe port's connections against a cap of their own, so a flood of the
API cannot refuse a health probe. What is refused is counted by reason (read by ``/metrics``)
and logged, one line a reason at most every ``LOG_EVERY`` seconds."""

from __future__ import annotations

import ipaddress
import logging
import time
from collections import Counter
from collections.abc import Callable

from feverous_es.hosts import is_loopback
from feverous_es.serve.limits import ConnectionLimits

LOG_EVERY = 10.0  # seconds between two log lines of one refusal reason
# Why a connection was refused or cut (the ``reason`` label of the metrics).
CAP, CLIENT_CAP, PROBE_CAP = "cap", "client_cap", "probe_cap"
READ, WRITE = "read_deadline", "write_deadline"
REASONS = (CAP, CLIENT_CAP, PROBE_CAP, READ, WRITE)
UPGRADE = "upgrade"  # a logged event, not a refusal: the request is answered as plain HTTP
IPV6_CLIENT_PREFIX = 64  # one client's share of the IPv6 space (a /64 is one site's subnet)
log = logging.getLogger("feverous_es.serve")


def client_key(address: str) -> str:
    """The client an address counts as: an IPv4 address (an IPv4-mapped IPv6 one too) itself,
    an IPv6 address its /64, anything else (a Unix socket's peer) as it is."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, IPV6_CLIENT_PREFIX), strict=False))
    return str(parsed)


class ConnectionGuard:
    """The connections one server holds, by client, and what it refused, by reason; shared by
    every connection of the server."""

    def __init__(self, limits: ConnectionLimits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self.open = 0
        self.probes = 0  # connections on the probe port (their own cap)
        self.by_client: Counter[str] = Counter()
        self.refused: Counter[str] = Counter({reason: 0 for reason in REASONS})
        self.lingering = 0  # refused sockets still reading their client
        self.upgrades = 0
        self._clock = clock
        self._logged: dict[str, tuple[float, int]] = {}  # reason: (when, count then)

    def counted(self, address: str) -> str | None:
        """The key ``address`` is counted under against the per-client cap (None: exempt)."""
        if address in self.limits.exempt or (self.limits.exempt_loopback and is_loopback(address)):
            return None
        return client_key(address)

    def admit(self, address: str, probe: bool = False) -> str | None:
        """Count a new connection from ``address`` in (``probe``: on the probe port), or say
        why it is refused."""
        if probe:
            if self.probes >= self.limits.probe_cap:
                return self.refuse(PROBE_CAP)
            self.probes += 1
            return None
        key = self.counted(address)
        if self.open >= self.limits.cap:
            return self.refuse(CAP)
        if key is not None and self.by_client[key] >= self.limits.client_cap:
            return self.refuse(CLIENT_CAP)
        self.open += 1
        if key is not None:
            self.by_client[key] += 1
        return None

    def leave(self, address: str, probe: bool = False) -> None:
        if probe:
            self.probes -= 1
            return
        self.open -= 1
        key = self.counted(address)
        if key is not None and self.by_client[key] > 0:
            self.by_client[key] -= 1
            if not self.by_client[key]:
                del self.by_client[key]

    def refuse(self, reason: str) -> str:
        """Count a refusal (or a deadline's cut); log it, once a reason every ``LOG_EVERY``
        seconds with the count since the last line."""
        self.refused[reason] += 1
        if (since := self._due(reason, self.refused[reason])) is not None:
            log.warning("connections refused or cut (%s): %d since the last line, %d open",
                        reason, since, self.open)  # fmt: skip
        return reason

    def upgrade_refused(self) -> None:
        """An ``Upgrade`` request (the service has no WebSocket route: it is answered as plain
        HTTP), logged as refusals are, at most one line every ``LOG_EVERY`` seconds."""
        self.upgrades += 1
        if (since := self._due(UPGRADE, self.upgrades)) is not None:
            log.warning("upgrade requests answered as plain HTTP (no WebSocket route): %d "
                        "since the last line", since)  # fmt: skip

    def _due(self, what: str, count: int) -> int | None:
        """The count of ``what`` since its last log line, when a line is due now."""
        now, (last, before) = self._clock(), self._logged.get(what, (-LOG_EVERY, 0))
        if now - last < LOG_EVERY:
            return None
        self._logged[what] = (now, count)
        return count - before
