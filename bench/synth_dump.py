"""Write a FEVEROUS dump N times the size of a real one, from its own pages, for scale benchmarks.

    from bench.synth_dump import synthesize   # bench/scale.py's dumps
    write_dump(out, synthesize(WikiDB(wiki), 4))   # mini-FEVEROUS and 3 altered copies

Copy 0 is the dump as it is. Copy k (1 .. N-1) of each page gets:

* a new title, ``"<title> (copy k)"``, and links rewritten to the copies of their targets (a
  link to a page the dump lacks is left as it was), so links resolve within each copy;
* its sentences in another order, and each table's data rows in another order (cell ids
  renumbered by position, header rows kept on top);
* about a fifth of its words replaced, the same way across the copy (word -> another word of the
  dump's vocabulary, chosen by a hash of the copy and the word). Copies therefore differ in text
  and in vectors, as pages of a larger Wikipedia would, while word frequencies and the shape of
  pages, tables and links stay those of the real dump; numbers are kept.

The texts carry no meaning a claim could verify: these dumps measure the stores (time, memory,
disk, latency, recall), never retrieval quality.
"""

from __future__ import annotations

import random
import re
import unicodedata
import zlib
from collections.abc import Iterator
from typing import Any

import orjson

from feverous_es.index.dump.page import parse_page
from feverous_es.index.dump.wiki import WikiDB

REPLACED_SHARE = 0.2
_WORD = re.compile(r"[^\W\d_]{3,}")
_LINK = re.compile(r"\[\[([^\]|]*)(?:\|([^\]]*))?\]\]")  # as feverous_es.index.dump.linearize reads
_CELL_ID = re.compile(r"^(header_cell|cell)_(\d+)_(\d+)_(\d+)$")


def _unit(*parts: object) -> float:
    return zlib.crc32("\x1f".join(map(str, parts)).encode()) / 2**32


def vocabulary(db: WikiDB, pages: int = 500) -> list[str]:
    """Lower-case words of a sample of the dump's pages, sorted (the replacement words)."""
    words: set[str] = set()
    for _, page_id, data in db.spread_rows(pages):
        for element in parse_page(page_id, data).elements:
            words.update(w.lower() for w in _WORD.findall(element.text))
    return sorted(words)


class Copy:
    """The alterations of copy ``k`` (k >= 1)."""

    def __init__(self, k: int, vocab: list[str], titles: set[str]) -> None:
        self.k = k
        self.vocab = vocab
        self.titles = titles
        self._rng = random.Random(k)

    def title(self, title: str) -> str:
        return f"{title} (copy {self.k})"

    def word(self, match: re.Match[str]) -> str:
        word = match.group(0)
        if _unit(self.k, word.lower()) >= REPLACED_SHARE:
            return word
        new = self.vocab[int(_unit("to", self.k, word.lower()) * len(self.vocab))]
        return new.capitalize() if word[0].isupper() else new

    def text(self, text: str) -> str:
        """Words replaced outside links; link targets moved to this copy, anchors altered."""
        out, last = [], 0
        for link in _LINK.finditer(text):
            out.append(_WORD.sub(self.word, text[last : link.start()]))
            target, anchor = link.group(1), link.group(2)
            page = unicodedata.normalize("NFD", target.replace("_", " ").strip())
            if page in self.titles:
                target = self.title(page)
            anchor = _WORD.sub(self.word, anchor if anchor is not None else link.group(1))
            out.append(f"[[{target}|{anchor}]]")
            last = link.end()
        out.append(_WORD.sub(self.word, text[last:]))
        return "".join(out)

    def page(self, data: dict[str, Any]) -> dict[str, Any]:
        page = dict(data)
        page["title"] = self.title(str(data.get("title", "")))
        sentences = [key for key in data.get("order", []) if key.startswith("sentence_")]
        texts = [data[key] for key in sentences]
        self._rng.shuffle(texts)
        for key, text in zip(sentences, texts, strict=True):
            page[key] = self.text(str(text))
        for key in data.get("order", []):
            value = data[key]
            if key.startswith("table_"):
                page[key] = self._table(value, int(key.split("_")[1]))
            elif key.startswith("list_"):
                items = [{**item, "value": self.text(str(item["value"]))} for item in value["list"]]
                page[key] = {**value, "list": items}
            elif key.startswith("section_"):
                page[key] = {**value, "value": self.text(str(value["value"]))}
        return page

    def _table(self, value: dict[str, Any], number: int) -> dict[str, Any]:
        rows = value["table"]
        headers = [r for r in rows if r and all(c.get("is_header") for c in r)]
        data_rows = [r for r in rows if not (r and all(c.get("is_header") for c in r))]
        self._rng.shuffle(data_rows)
        table = []
        for r, row in enumerate(headers + data_rows):
            cells = []
            for cell in row:
                kind, _, _, column = _CELL_ID.match(cell["id"]).groups()  # type: ignore[union-attr]
                new_id = f"{kind}_{number}_{r}_{column}"
                cells.append({**cell, "id": new_id, "value": self.text(str(cell["value"]))})
            table.append(cells)
        altered = {**value, "table": table}
        if "caption" in value:
            altered["caption"] = self.text(str(value["caption"]))
        return altered


def synthesize(db: WikiDB, factor: int) -> Iterator[tuple[str, str]]:
    """``(page id, page JSON)`` of the dump and ``factor - 1`` altered copies of it."""
    titles = {page_id for _, page_id, _ in db.rows()}
    vocab = vocabulary(db)
    for _, page_id, data in db.rows():
        yield page_id, data
    for k in range(1, factor):
        copy = Copy(k, vocab, titles)
        for _, page_id, data in db.rows():
            yield copy.title(page_id), orjson.dumps(copy.page(orjson.loads(data))).decode()
