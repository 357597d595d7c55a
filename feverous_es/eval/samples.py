"""Claim files as the benchmarks read them: raw records, seeded samples, and the gold a record
names (evidence sets, table). One reader for every bench, so that two benches given the same
file, size and seed measure the same claims.

Records stay the file's JSON objects (not :class:`~feverous_es.eval.claims.ClaimRecord`): the
benches write them back out as claim files for ``predict`` and read fields the scorer ignores.
"""

from __future__ import annotations

import json
import os
import random
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any

from feverous_es.index.element_ids import table_key

Record = dict[str, Any]


def read_records(
    path: str | os.PathLike[str], keep: Callable[[Record], bool] | None = None
) -> list[Record]:
    """The records of a claim file that have a claim (the dummy first line has none), in file
    order; with ``keep``, only those it keeps."""
    with open(path, encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    return [r for r in records if r.get("claim") and (keep is None or keep(r))]


def seeded_sample(records: list[Record], n: int, seed: int | random.Random) -> list[Record]:
    """``n`` records drawn with ``seed`` (a seed, or a generator shared by several files): all
    of them when ``n`` is 0 or not smaller than their number, none when ``n`` is negative."""
    if n < 0:
        return []
    if n == 0 or n >= len(records):
        return records
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    return rng.sample(records, n)


def claim_texts(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Every claim of the files, file after file."""
    return [record["claim"] for path in paths for record in read_records(path)]


def has_gold_table(record: Record) -> bool:
    return bool(record.get("gold_tables"))


def gold_table(record: Record) -> tuple[str, int]:
    """The record's first gold table as ``(page, table number)``."""
    key = table_key(record["gold_tables"][0])
    if key is None:
        raise ValueError(f"not a table id: {record['gold_tables'][0]!r}")
    return key


def gold_sets(record: Record) -> list[set[str]]:
    """The gold evidence sets as sets of element ids (NFD, as the index keeps them); empty sets
    are left out."""
    return [
        {unicodedata.normalize("NFD", i) for i in group["content"]}
        for group in record.get("evidence") or []
        if group["content"]
    ]


def table_claims(path: str | os.PathLike[str], n: int, seed: int) -> list[Record]:
    """A seeded sample of ``n`` of the file's records that name a gold table (0: all)."""
    return seeded_sample(read_records(path, has_gold_table), n, seed)
