"""Rebuild the test data in this directory from the reference data (see README.md here).

    python tests/data/make_test_data.py ../shared/data [--wiki UNPACKED_WIKI_DB]

* ``wiki-slice.db.gz``: 300 real mini-FEVEROUS pages, chosen to cover what the parser and the
  build meet: 75 tables with captions, 75 without, 75 pages with wiki-link markup, 75 prose
  pages without either (the first of each kind in rowid order).
* ``feverous_dev_sample50.jsonl``: the 50 official FEVEROUS dev claims, byte for byte.
* ``feverous_s_dev_head.jsonl`` / ``tabfact_dev_head.jsonl``: the first 20 claims of the
  mini-FEVEROUS claim files, with their dummy first line.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sqlite3
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PER_KIND = 75
HEAD_CLAIMS = 20
KINDS = (
    "data LIKE '%\"caption\"%'",
    "data LIKE '%\"table_0\"%' AND data NOT LIKE '%\"caption\"%'",
    "data LIKE '%[[%'",
    "data NOT LIKE '%\"table_0\"%' AND data NOT LIKE '%[[%'",
)


def write_slice(wiki: Path, out: Path) -> int:
    source = sqlite3.connect(wiki)
    rows: dict[str, str] = {}
    for where in KINDS:
        query = f"SELECT id, data FROM wiki WHERE {where} ORDER BY rowid LIMIT {PER_KIND}"
        rows.update(source.execute(query).fetchall())
    source.close()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "wiki.db"
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE wiki (id PRIMARY KEY, data json)")
        conn.executemany("INSERT INTO wiki VALUES (?, ?)", rows.items())
        conn.commit()
        conn.execute("VACUUM")
        conn.close()
        with db.open("rb") as src, gzip.GzipFile(out, "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    return len(rows)


def write_head(source: Path, out: Path) -> None:
    with source.open(encoding="utf-8") as lines:
        head = [next(lines) for _ in range(HEAD_CLAIMS + 1)]
    out.write_text("".join(head), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="the reference data directory (../shared/data)")
    parser.add_argument("--wiki", type=Path, help="mini-FEVEROUS wiki.db, already unpacked")
    args = parser.parse_args()
    mini = args.data / "minifeverous"
    with tempfile.TemporaryDirectory() as tmp:
        wiki = args.wiki
        if wiki is None:
            wiki = Path(tmp) / "wiki.db"
            with gzip.open(mini / "wiki.db.gz") as src, wiki.open("wb") as dst:
                shutil.copyfileobj(src, dst)
        pages = write_slice(wiki, HERE / "wiki-slice.db.gz")
    shutil.copyfile(
        args.data / "feverous" / "dev_sample50.jsonl", HERE / "feverous_dev_sample50.jsonl"
    )
    write_head(mini / "feverous_s_dev.jsonl", HERE / "feverous_s_dev_head.jsonl")
    write_head(mini / "tabfact_dev.jsonl", HERE / "tabfact_dev_head.jsonl")
    print(f"wrote {pages} pages and the claim files to {HERE}")


if __name__ == "__main__":
    main()
