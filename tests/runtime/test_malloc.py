"""The server's allocator settings (runtime/malloc.py): its arena limit yields to an operator's."""

from __future__ import annotations

import platform

import pytest

from feverous_es.runtime.malloc import limit_arenas, release_free_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")
def test_the_arena_limit_is_set_unless_the_operator_chose_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_arenas() is False  # the operator's number stands
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    assert limit_arenas() is True
    release_free_memory()  # callable after any batch, on any C library
