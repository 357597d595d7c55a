"""Claim files as the benchmarks read them: raw records, seeded samples, the gold a record names
(evidence sets, table), and (claim, element text) pairs from its gold pages. One reader for every
bench, so that two benches given the same file, size and seed measure the same claims.

Records stay the file's JSON objects (not :class:`~feverous_es.eval.claims.ClaimRecord`): the
benches write them back out as claim files for ``predict`` and read fields the scorer ignores.
"""

from __future__ import annotations

import json
import os
import random
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from feverous_es.errors import FormatError, MalformedPage
from feverous_es.index.dump.page import parse_page
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.index.element_ids import element_to_triple, table_key

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
        raise FormatError(f"not a table id: {record['gold_tables'][0]!r}")
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


def gold_element_ids(group: Any) -> list[str]:
    """The element ids of one official gold evidence set (``content``), or of a plain list."""
    return list(group["content"]) if isinstance(group, dict) else list(group)


def gold_ids(record: Record) -> set[str]:
    """Every gold element id of a claim, as the index spells it (NFD titles)."""
    return {
        unicodedata.normalize("NFD", e)
        for group in record.get("evidence") or []
        for e in gold_element_ids(group)
    }


def gold_sentences(record: Record) -> frozenset[str] | None:
    """A claim's gold element ids where every one is a sentence (hiding them leaves its
    subject's page without the fact), else None."""
    ids = gold_ids(record)
    sentences = ids and all(element_to_triple(i)[1] == "sentence" for i in ids)
    return frozenset(ids) if sentences else None


def gold_pages(record: Record) -> set[str]:
    """The pages of a record's gold evidence and of its gold tables (TabFact's ``Page_table_i``)."""
    pages = {
        element_id.split("_", 1)[0]
        for group in record.get("evidence") or []
        for element_id in group.get("content", [])
    }
    return pages | {table.rsplit("_table_", 1)[0] for table in record.get("gold_tables", [])}


def gold_page_pairs(wiki: Path, claims: Path, n: int, per_claim: int) -> list[tuple[str, str]]:
    """``n`` (claim, linearization) pairs, up to ``per_claim`` a claim, of the elements of each
    claim's gold pages in ``wiki`` (a FEVEROUS wiki.db), shuffled with a fixed seed: real inputs
    of mixed claims and lengths, as a ranker's calls get them."""
    rng = random.Random(0)
    pairs: list[tuple[str, str]] = []
    with WikiDB(wiki) as db:
        for record in read_records(claims):
            texts = []
            for page in sorted(gold_pages(record)):
                data = db.page_json(page)
                if data is None:
                    continue
                try:
                    texts += [e.linearized for e in parse_page(page, data).elements]
                except MalformedPage:
                    continue
            rng.shuffle(texts)
            pairs += [(record["claim"], text) for text in texts[:per_claim]]
            if len(pairs) >= n:
                break
    rng.shuffle(pairs)
    return pairs[:n]
