"""What the driver hands a condition's function: the condition's name and the places it may
read (the mini index, the mini dump, a reader run's held-out pairs), each given on the driver's
command line so that no condition or record names a machine's path."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.data import unpacked_mini
from bench.errors import BenchError

# The places a condition may read, filled by the driver's options of the same names.
PLACES = {
    "index": "the mini index",
    "wiki": "the gunzipped mini-FEVEROUS wiki.db",
    "pairs": "a `train verdict` run's WORK/pairs.jsonl.gz (the readers' held-out pairs)",
}


@dataclass(frozen=True)
class Context:
    """One run of one condition."""

    condition: str
    index: Path | None = None
    wiki: Path | None = None
    pairs: Path | None = None

    def place(self, name: str) -> Path:
        """The place ``name`` (one of :data:`PLACES`); BenchError naming the driver's option
        when the run was not given it, or when it is not there."""
        path = getattr(self, name)
        if path is None:
            raise BenchError(f"{self.condition} needs --{name} ({PLACES[name]})")
        if not Path(path).exists():
            raise BenchError(f"{self.condition}: --{name} {path}: no such file or directory")
        return Path(path)

    def dump(self, work: Path) -> Path:
        """The driver's --wiki, else the mini-FEVEROUS dump unpacked into ``work``."""
        return self.place("wiki") if self.wiki else unpacked_mini(work)
