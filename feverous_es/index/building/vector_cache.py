"""Vectors a build embedded before, kept in one SQLite file, so that a build of the same texts
by the same embedder reads them instead of embedding them again (``index --vector-cache FILE``).

Embedding is most of a build's time, and the same texts are often embedded more than once: an
embedded index built, then the same dump into an Elasticsearch cluster; a build started again
from scratch after a changed setting; a part of a shared build run again on another machine
with the file on shared storage. A text's vector is keyed by a hash of the text, and the file
records the embedder that filled it (its graph's sha256 and the tokens a text keeps), so a
file filled by another is refused rather than mixed in. Several processes may read and fill
one file at once (SQLite's write-ahead log; a chunk's new vectors are one transaction).

A cached vector is the one its text got in the batch it was first embedded in: the int8
embedder quantizes activations per batch, so the same text embedded again beside other texts
would come out a few thousandths of cosine apart (as two builds written in other chunks do).
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import numpy as np

from feverous_es.errors import StoreError
from feverous_es.index.building.builder import Encoder

# Keys asked of SQLite in one statement (under its limit on bound parameters).
_KEYS_A_QUERY = 500


def text_key(text: str) -> bytes:
    """A text's key in the file: 16 bytes of BLAKE2b of its UTF-8."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class VectorCache:
    """An encoder for :func:`~feverous_es.index.building.builder.build`: ``encoder``'s vectors,
    read from ``path`` where a text is there and embedded (then added) where it is not.

    ``identity`` names what the vectors depend on (:attr:`Embedder.identity
    <feverous_es.runtime.embedder.Embedder.identity>`); a file filled under another is a
    :class:`StoreError`. ``reused`` and ``embedded`` count the texts of each kind so far (a text
    that comes twice in one call counts once).
    """

    def __init__(self, path: Path, encoder: Encoder, identity: str) -> None:
        self.path = Path(path)
        self.dim = encoder.dim
        self.reused = 0
        self.embedded = 0
        self._encoder = encoder
        try:
            # A part's process waits for another's write rather than failing on it.
            self._db = sqlite3.connect(self.path, timeout=120, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            with self._db:
                self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value)")
                # A rowid table: its rows are too long for WITHOUT ROWID's B-tree (twice the
                # bytes a vector on disk).
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB)"
                )
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('embedder', ?)", (identity,))
            (filled_by,) = self._db.execute(
                "SELECT value FROM meta WHERE key = 'embedder'"
            ).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path} is not a vector cache ({exc})") from None
        if filled_by != identity:
            self._db.close()
            raise StoreError(
                f"{self.path} holds the vectors of another embedder ({filled_by}), not of this "
                f"one ({identity}): give this build another --vector-cache file"
            )

    @property
    def tokens(self) -> int:
        """Non-padding tokens the encoder embedded (what the cache did not hold)."""
        return self._encoder.tokens

    def embed(self, texts: list[str]) -> np.ndarray:
        """Each text's vector, as ``encoder.embed`` gives it: float32, ``(len(texts), dim)``."""
        keys = [text_key(text) for text in texts]
        found = self._read(keys)
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
        if missing:
            vectors = self._encoder.embed(list(missing.values()))
            new = dict(zip(missing, vectors.astype(np.float32, copy=False), strict=True))
            with self._db:
                self._db.executemany(
                    "INSERT OR IGNORE INTO vectors VALUES (?, ?)",
                    [(key, vector.tobytes()) for key, vector in new.items()],
                )
            found.update(new)
        self.embedded += len(missing)
        self.reused += len(set(keys)) - len(missing)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, key in enumerate(keys):
            out[row] = found[key]
        return out

    def close(self) -> None:
        self._db.close()

    def _read(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        unique = list(dict.fromkeys(keys))
        found: dict[bytes, np.ndarray] = {}
        for start in range(0, len(unique), _KEYS_A_QUERY):
            batch = unique[start : start + _KEYS_A_QUERY]
            rows = self._db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(batch))})",
                batch,
            )
            for key, blob in rows:
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found
