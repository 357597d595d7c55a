"""Rebuild sample/wiki.db: the mini-FEVEROUS pages behind the first claims of each dev file.

    python sample/make_sample.py ../shared/data/minifeverous

A small real slice for demos and the README: the evidence pages of the first 60 FEVEROUS-S dev
claims and the pages of the first 60 distinct TabFact gold tables (one claim each), copied row
for row.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

CLAIMS_PER_FILE = 60


def pages_of(claims_file: Path) -> tuple[list[str], list[dict]]:
    pages: list[str] = []
    claims: list[dict] = []
    seen_tables: set[str] = set()
    with claims_file.open() as lines:
        for line in lines:
            claim = json.loads(line)
            if not claim["claim"]:
                continue  # the dummy first line
            ids = [i for s in claim["evidence"] for i in s["content"]] + claim.get(
                "gold_tables", []
            )
            if claim.get("gold_tables") and set(claim["gold_tables"]) <= seen_tables:
                continue  # one TabFact claim per table: more pages, same size
            seen_tables.update(claim.get("gold_tables", []))
            pages.extend(i.split("_")[0] for i in ids)
            claims.append(claim)
            if len(claims) == CLAIMS_PER_FILE:
                break
    return pages, claims


def main(data_dir: Path, out_dir: Path) -> None:
    pages: list[str] = []
    claims: list[dict] = []
    for name in ("feverous_s_dev.jsonl", "tabfact_dev.jsonl"):
        file_pages, file_claims = pages_of(data_dir / name)
        pages += file_pages
        claims += file_claims
    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "wiki.db"
        with gzip.open(data_dir / "wiki.db.gz") as src, full.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        out = out_dir / "wiki.db"
        out.unlink(missing_ok=True)
        conn = sqlite3.connect(out)
        conn.execute("CREATE TABLE wiki (id PRIMARY KEY, data json)")
        conn.execute("ATTACH ? AS full", (str(full),))
        for page in dict.fromkeys(pages):
            conn.execute(
                "INSERT OR IGNORE INTO wiki SELECT id, data FROM full.wiki WHERE id = ?", (page,)
            )
        conn.commit()
        conn.execute("DETACH full")
        conn.execute("VACUUM")
        conn.close()
    with (out_dir / "claims.jsonl").open("w") as handle:
        for claim in claims:
            handle.write(json.dumps(claim, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(__file__).parent)
