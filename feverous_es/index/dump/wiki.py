"""Read a FEVEROUS Wikipedia dump: a SQLite file with one table ``wiki(id, data)``, ``id`` the
NFD page title and ``data`` the page JSON."""

from __future__ import annotations

import bisect
import hashlib
import re
import sqlite3
import unicodedata
import zlib
from array import array
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from feverous_es.errors import WikiError

SQLITE_MAGIC = b"SQLite format 3\x00"
MAX_PARTS = 1024  # a build's chunk numbers leave room for this many parts (elastic.parts)


@dataclass(frozen=True)
class Part:
    """Part ``number`` (from 1) of a build split ``count`` ways: the dump's pages whose title
    hashes to it (:func:`page_part`). Spread over the whole dump, so every part gets its share of
    prose and table pages; fixed by the titles, so a part run twice, or on a copy of the dump
    whose rowids moved (``VACUUM`` may renumber them), reads the same pages."""

    number: int = 1
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> Part:
        """``"I/N"``, 1 <= I <= N <= MAX_PARTS; anything else is a ValueError saying so."""
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not match or not 1 <= int(match[1]) <= int(match[2]) <= MAX_PARTS:
            raise ValueError(
                f"{text!r} is not a part: give I/N, the part's number and the number of parts "
                f"(1 <= I <= N <= {MAX_PARTS}), e.g. 2/8"
            )
        return cls(int(match[1]), int(match[2]))

    @property
    def whole(self) -> bool:
        return self.count == 1

    def __str__(self) -> str:
        return f"{self.number}/{self.count}"


WHOLE = Part()  # the dump as one part: a build by one writer


def page_part(page_id: str, count: int) -> int:
    """The part (from 1, of ``count``) page ``page_id`` (its NFD title, as the dump stores it)
    belongs to: CRC-32 of its UTF-8 bytes, the same in every process and version of Python."""
    return zlib.crc32(page_id.encode("utf-8")) % count + 1


@dataclass(frozen=True)
class DumpSurvey:
    """What one pass over the dump's titles gives: its identity (page count and a SHA-256 of its
    (rowid, title) pairs in title order: another dump, or a copy whose rowids moved, differs)
    and the rowids of one part's pages, ascending."""

    pages: int
    digest: str
    rowids: array

    @property
    def fingerprint(self) -> str:
        return f"{self.pages}:{self.digest}"

    def after(self, after_rowid: int, until: int | None) -> array:
        """The part's rowids above ``after_rowid`` (up to ``until``)."""
        low = bisect.bisect_right(self.rowids, after_rowid)
        high = len(self.rowids) if until is None else bisect.bisect_right(self.rowids, until)
        return self.rowids[low:high]


class WikiDB:
    """Read-only access to a dump, in rowid order so a build can resume after any page."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise WikiError(f"{self.path}: no such file")
        if not self.path.is_file():
            raise WikiError(f"{self.path}: not a file")
        with self.path.open("rb") as handle:
            if handle.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise WikiError(f"{self.path}: not a SQLite file (a FEVEROUS wiki.db is one)")
        # A URI: "#", "?" and "%" in a file name are quoted, or SQLite reads them as URI syntax.
        uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
        self._conn = sqlite3.connect(uri, uri=True)
        try:
            columns = {row[1] for row in self._conn.execute("PRAGMA table_info(wiki)")}
        except sqlite3.DatabaseError as exc:
            raise WikiError(f"{self.path}: unreadable SQLite file ({exc})") from exc
        if not columns:
            raise WikiError(f"{self.path}: no 'wiki' table (expected wiki(id, data))")
        if not {"id", "data"} <= columns:
            raise WikiError(f"{self.path}: table 'wiki' lacks the columns id and data")
        self._surveys: dict[Part, DumpSurvey] = {}

    def survey(self, part: Part = WHOLE) -> DumpSurvey:
        """The dump's identity and ``part``'s rowids, from one pass over the titles (the title
        index of a FEVEROUS dump, ``id PRIMARY KEY``, covers it: no page is read). Kept."""
        if part not in self._surveys:
            digest, pages, rowids = hashlib.sha256(), 0, array("q")
            for rowid, page_id in self._conn.execute("SELECT rowid, id FROM wiki ORDER BY id"):
                digest.update(f"{rowid}\t{page_id}\n".encode())
                pages += 1
                if part.whole or page_part(page_id, part.count) == part.number:
                    rowids.append(rowid)
            self._surveys[part] = DumpSurvey(pages, digest.hexdigest(), array("q", sorted(rowids)))
        return self._surveys[part]

    def count(self, after_rowid: int = 0, *, until: int | None = None, part: Part = WHOLE) -> int:
        """The rows after ``after_rowid`` (up to rowid ``until``, of ``part``)."""
        if not part.whole:
            return len(self.survey(part).after(after_rowid, until))
        where, args = _rowids_between(after_rowid, until)
        (total,) = self._conn.execute(f"SELECT count(*) FROM wiki WHERE {where}", args).fetchone()
        return int(total)

    def rows(
        self,
        after_rowid: int = 0,
        limit: int | None = None,
        *,
        until: int | None = None,
        part: Part = WHOLE,
    ) -> Iterator[tuple[int, str, str]]:
        """(rowid, page id, page JSON text) in rowid order, after ``after_rowid`` (up to rowid
        ``until``, of ``part``: one seek a page, never a scan of the others), at most
        ``limit``."""
        if not part.whole:
            rowids = self.survey(part).after(after_rowid, until)[:limit]
            for rowid in rowids:
                yield self._conn.execute(
                    "SELECT rowid, id, data FROM wiki WHERE rowid = ?", (rowid,)
                ).fetchone()
            return
        where, args = _rowids_between(after_rowid, until)
        query = f"SELECT rowid, id, data FROM wiki WHERE {where} ORDER BY rowid"
        if limit is not None:
            query += " LIMIT ?"
            args.append(limit)
        yield from self._conn.execute(query, args)

    def rowid_at(self, n: int | None) -> int | None:
        """The rowid of the dump's ``n``-th row (None: no bound, or fewer rows than ``n``)."""
        if n is None or n < 1:
            return None
        row = self._conn.execute(
            "SELECT rowid FROM wiki ORDER BY rowid LIMIT 1 OFFSET ?", (n - 1,)
        ).fetchone()
        return None if row is None else int(row[0])

    def spread_rows(self, n: int) -> Iterator[tuple[int, str, str]]:
        """About ``n`` rows spread evenly over the dump (one rowid seek each, no full scan), in
        rowid order: a sample that sees the dump's later parts (tables, lists) as well."""
        low, high = self._conn.execute("SELECT min(rowid), max(rowid) FROM wiki").fetchone()
        if low is None or n < 1:
            return
        step = max(1.0, (high - low + 1) / n)
        last = low - 1
        for i in range(n):
            row = self._conn.execute(
                "SELECT rowid, id, data FROM wiki WHERE rowid >= ? ORDER BY rowid LIMIT 1",
                (max(last + 1, low + int(i * step)),),
            ).fetchone()
            if row is None:
                return
            last = row[0]
            yield row

    def reopened(self) -> WikiDB:
        """Another connection to the dump, for another thread (a SQLite connection belongs to
        the thread that made it), sharing what this one surveyed."""
        other = WikiDB(self.path)
        other._surveys = self._surveys
        return other

    def page_json(self, title: str) -> str | None:
        row = self._conn.execute(
            "SELECT data FROM wiki WHERE id = ?", (unicodedata.normalize("NFD", title),)
        ).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> WikiDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _rowids_between(after_rowid: int, until: int | None) -> tuple[str, list[int]]:
    """The SQL condition (and its arguments) of the rows after ``after_rowid`` up to ``until``."""
    where, args = "rowid > ?", [after_rowid]
    if until is not None:
        where, args = where + " AND rowid <= ?", [*args, until]
    return where, args


def write_dump(path: Path, rows: Iterable[tuple[str, str]]) -> int:
    """Write ``(page id, page JSON)`` rows as a new FEVEROUS dump at ``path`` (atomically: a
    temporary file renamed at the end); returns the number of pages."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    with closing(sqlite3.connect(tmp)) as conn:
        conn.execute("CREATE TABLE wiki (id PRIMARY KEY, data json)")
        count = 0
        for page_id, data in rows:
            conn.execute("INSERT INTO wiki VALUES (?, ?)", (page_id, data))
            count += 1
        conn.commit()
    tmp.replace(path)
    return count
