"""A build written by several workers at once (``feverous-es index --store elasticsearch --part
I/N``): the numbers a part gives its documents, its progress in the cluster, and whether the
build may be published.

Each part writes its share of the dump (:class:`~feverous_es.index.dump.wiki.Part`: the pages
whose titles hash to it) into the same pending build, with the ids every build uses (from the
elements), so a part run twice writes the same documents. Its progress — a :class:`BuildState`
of its own, its whole-table count and its seconds — is one document (id: the part's number) of
the build's ``<elements index>-parts`` index, and a lease (:mod:`.leases`): one worker writes a
part at a time. Beside the parts' documents, ``dump`` names the dump the build reads (the first
part writes it; a part on another dump refuses) and ``publish`` is the lease of the one worker
that publishes. The elements index's ``_meta`` gets the whole build's state when the build is
published, which happens only when every part's document says complete. A part's chunk numbers
(``seq``) are its own, offset by ``(number - 1) * SEQ_STRIDE``, so what a killed part left is one
range; ``ord`` interleaves the parts' counts (``local * N + number - 1``): unique, and in page
order within a page.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from elasticsearch import Elasticsearch

from feverous_es.errors import IncompatibleIndex
from feverous_es.index.dump.wiki import MAX_PARTS, Part
from feverous_es.index.elastic.builds import create_index
from feverous_es.index.elastic.loader import BuildIndices
from feverous_es.index.store import BuildState

SEQ_STRIDE = 2**31 // MAX_PARTS  # chunk numbers a part may use (``seq`` is an integer field)
DUMP_ID, PUBLISH_ID = "dump", "publish"  # the progress index's documents that are not parts
PROGRESS_BODY = {
    "mappings": {"dynamic": False, "properties": {"part": {"type": "integer"}}},
    "settings": {"number_of_shards": 1},
}


def seq_of(part: Part, seq: int) -> int:
    """The ``seq`` the documents of the part's chunk ``seq`` carry."""
    return (part.number - 1) * SEQ_STRIDE + seq


def seq_range(part: Part, next_seq: int) -> tuple[int, int]:
    """The ``seq`` values, from the part's chunk ``next_seq`` on, of its documents (gte, lt)."""
    return seq_of(part, next_seq), seq_of(part, 0) + SEQ_STRIDE


def ord_of(part: Part, ordinal: int) -> int:
    """The ``ord`` of the part's ``ordinal``-th element (or page)."""
    return ordinal * part.count + part.number - 1


def progress_index(indices: BuildIndices) -> str:
    return f"{indices.elements}-parts"


@dataclass
class PartProgress:
    """What one part has written: its state, whole tables, the rows of the dump it covers (of
    ``dump_rows`` the whole build covers), and the seconds it has spent writing (every run of
    it)."""

    part: Part
    state: BuildState = field(default_factory=BuildState)
    tables: int = 0
    rows: int = 0
    dump_rows: int = 0
    seconds: float = 0.0
    updated: float = 0.0

    @property
    def rate(self) -> float:
        """Elements a second."""
        return self.state.elements / self.seconds if self.seconds else 0.0

    def document(self) -> dict[str, Any]:
        return {"part": self.part.number, "parts": self.part.count, **asdict(self.state),
                "tables": self.tables, "rows": self.rows, "dump_rows": self.dump_rows,
                "seconds": round(self.seconds, 3),
                "updated": self.updated}  # fmt: skip

    @classmethod
    def of(cls, source: dict[str, Any]) -> PartProgress:
        state = BuildState(**{k: source[k] for k in asdict(BuildState())})
        return cls(Part(int(source["part"]), int(source["parts"])), state,
                   int(source["tables"]), int(source["rows"]), int(source["dump_rows"]),
                   float(source["seconds"]), float(source["updated"]))  # fmt: skip


def ensure_progress_index(client: Elasticsearch, indices: BuildIndices) -> None:
    """Create the build's progress index unless it exists (parts starting together may race
    to create it: the one that loses carries on, once the index can take its document)."""
    name = progress_index(indices)
    if not client.indices.exists(index=name):
        create_index(client, name, PROGRESS_BODY, racing=True)
    client.cluster.health(index=name, wait_for_status="yellow", timeout="60s")


def read_progress(client: Elasticsearch, indices: BuildIndices) -> dict[int, PartProgress]:
    """Every part's progress by part number (none when the build is not written in parts)."""
    name = progress_index(indices)
    if not client.indices.exists(index=name):
        return {}
    client.indices.refresh(index=name)
    hits = client.search(index=name, size=MAX_PARTS, query={"match_all": {}})["hits"]["hits"]
    progress = [PartProgress.of(hit["_source"]) for hit in hits if "part" in hit["_source"]]
    return {p.part.number: p for p in progress}


def check_dump(client: Elasticsearch, indices: BuildIndices, fingerprint: str, part: Part) -> None:
    """Record the dump the build reads (its :class:`~feverous_es.index.dump.wiki.DumpSurvey`
    fingerprint), or refuse a part that reads another."""
    name, document = progress_index(indices), {"fingerprint": fingerprint}
    answer = client.options(ignore_status=409).index(
        index=name, id=DUMP_ID, document=document, op_type="create", refresh="wait_for"
    )
    if answer.meta.status != 409:
        return
    recorded = client.get(index=name, id=DUMP_ID)["_source"].get("fingerprint")
    if recorded != fingerprint:
        raise IncompatibleIndex(
            f"part {part} reads another dump than the build's other parts ({fingerprint[:24]}, "
            f"not {str(recorded)[:24]}: pages and a hash of their titles): run every part on "
            "the same wiki.db, or start a new build with `feverous-es es new-build`"
        )


def stamped(progress: PartProgress) -> dict[str, Any]:
    """The part's progress document, stamped with the time of writing."""
    progress.updated = time.time()
    return progress.document()


def check_parts(version: int, progress: dict[int, PartProgress], part: Part) -> None:
    """Refuse a part whose count differs from the build's other parts."""
    counts = {p.part.count for p in progress.values()}
    if counts and counts != {part.count}:
        raise IncompatibleIndex(
            f"v{version} is being built in {'/'.join(map(str, sorted(counts)))} parts, not "
            f"{part.count}: run every part with --part I/{min(counts)}, or start a new build "
            "with `feverous-es es new-build`"
        )


def missing_parts(progress: dict[int, PartProgress]) -> list[str]:
    """The parts (``I/N``) not complete, in order; none when every part of the build is."""
    if not progress:
        return []
    count = next(iter(progress.values())).part.count
    return [
        str(Part(number, count))
        for number in range(1, count + 1)
        if number not in progress or not progress[number].state.complete
    ]


def whole_build(progress: dict[int, PartProgress]) -> tuple[BuildState, int]:
    """The build's state and whole-table count, the parts' added up; an error when their rows
    do not add up to the dump's (parts run on other dumps, or with other --limit)."""
    parts = list(progress.values())
    dumps = {p.dump_rows for p in parts}
    covered = sum(p.state.pages + p.state.malformed for p in parts)
    if len(dumps) != 1 or covered != next(iter(dumps)):
        raise IncompatibleIndex(
            f"the parts read {covered:,} pages in all, of dumps of "
            f"{' / '.join(f'{n:,}' for n in sorted(dumps))} pages: were they run on the same "
            "dump with the same --limit? Start a new build with `feverous-es es new-build`"
        )
    state = BuildState(
        next_seq=sum(p.state.next_seq for p in parts),
        last_rowid=max((p.state.last_rowid for p in parts), default=0),
        elements=sum(p.state.elements for p in parts),
        pages=sum(p.state.pages for p in parts),
        malformed=sum(p.state.malformed for p in parts),
        complete=all(p.state.complete for p in parts),
    )
    return state, sum(p.tables for p in parts)
