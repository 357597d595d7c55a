"""Whether a host is this machine: the service binds loopback by default and counts its
clients, and the Elasticsearch client gzips only what leaves the host."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ``::1``); any other name, a Unix
    socket's path or nothing is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
