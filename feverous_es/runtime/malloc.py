"""glibc's allocator, held to what a long-running server needs (a no-op on other C libraries).

Each thread that allocates gets a glibc arena of its own, up to eight per core: the server's
threads (the event loop, the pipeline worker, ONNX Runtime's and tantivy's pools) each keep the
freed pages of theirs, so its anonymous memory sat ~30 MB higher and crept up claim after claim
(docs/operations.md, memory over time). Two arenas serve these threads as fast (they mostly
wait on each other), and a trim after each batch hands free pages back.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from functools import partial

M_ARENA_MAX = -8  # glibc's mallopt parameter
SERVER_ARENAS = 2


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018 (glibc has both)
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(arenas: int = SERVER_ARENAS) -> bool:
    """At most ``arenas`` malloc arenas for the threads started from now on, unless the
    operator chose a number (``MALLOC_ARENA_MAX``); whether the limit was set here."""
    libc = _libc()
    if libc is None or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    return bool(libc.mallopt(ctypes.c_int(M_ARENA_MAX), ctypes.c_int(arenas)))


def _malloc_trim() -> Callable[[], object]:
    """glibc's ``malloc_trim(0)``: the free pages of every arena handed back."""
    libc = _libc()
    if libc is None:
        return lambda: None
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    return partial(libc.malloc_trim, 0)


# A batch frees nearly all it allocated, but glibc keeps the freed pages of its arenas: the
# server's anonymous memory crept up ~70 MB over 1,000 claims (bench/serve.py). Handing them
# back after each batch costs a few milliseconds against seconds of batch work.
release_free_memory = _malloc_trim()
