"""Training data, for every trainer: claim files, seeded samples and held-out splits, jsonl
caches, and what the retrieval pipeline finds for claims (collected once, then read back)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO, TypeVar

from feverous_es.errors import TrainError

if TYPE_CHECKING:
    from feverous_es.eval.claims import ClaimRecord


def hash_unit(seed: int, source: str, claim_id: str, salt: str = "holdout") -> float:
    """A claim's deterministic position in [0, 1) for the seeded split (and, with another
    salt, the independent sampling)."""
    digest = hashlib.sha256(f"{salt}\0{seed}\0{source}\0{claim_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def is_holdout(seed: int, source: str, claim_id: str, fraction: float) -> bool:
    return hash_unit(seed, source, claim_id) < fraction


class Claimed(Protocol):
    """A training item of one claim (properties: frozen dataclasses satisfy it)."""

    @property
    def source(self) -> str: ...
    @property
    def id(self) -> str: ...


C = TypeVar("C", bound=Claimed)


@dataclass(frozen=True)
class TrainingClaim:
    """One claim as every trainer reads it. ``label``: ``""`` where the trainer does not read
    it; ``table``: the gold table's key ``Page_table_t`` (``""`` where the file names none);
    ``gold``: the evidence elements the trainer reads (which sets, and whether NFD, is the
    trainer's reader's choice: it says so)."""

    source: str  # the claim file's stem
    id: str
    claim: str
    label: str = ""
    table: str = ""
    gold: tuple[str, ...] = ()


R = TypeVar("R")


def claim_records(path: Path) -> Iterator[ClaimRecord]:
    """The well-formed claims of a FEVEROUS claim file (malformed lines are skipped); a missing
    file is a TrainError."""
    from feverous_es.eval.claims import MalformedLine, read_claims

    path = Path(path)
    if not path.is_file():
        raise TrainError(f"claim file {path} does not exist")
    for record in read_claims(path):
        if not isinstance(record, MalformedLine) and record.claim.strip():
            yield record


def sample(
    rows: list[R], limit: int | None, seed: int, key: Callable[[R], tuple[str, str]]
) -> list[R]:
    """A seeded sample of ``limit`` rows (all when ``limit`` is None or not smaller), the same on
    every run; ``key(row)`` is ``(source, claim id)``."""
    if limit is None or len(rows) <= limit:
        return rows
    return sorted(rows, key=lambda r: hash_unit(seed, *key(r), "sample"))[:limit]


def sampled_claims(
    paths: Sequence[Path],
    make: Callable[[str, ClaimRecord], TrainingClaim | None],
    *,
    limit: int | None,
    seed: int,
    wanted: str,
) -> list[TrainingClaim]:
    """``make(source, record)`` over every claim of the files (None: the claim is left out),
    a seeded sample of ``limit`` a file (:func:`sample`). No files, or a file with no claim
    ``make`` keeps, is a TrainError (``{path} has no {wanted}``)."""
    if not paths:
        raise TrainError("no claim files given (--claims FILE.jsonl)")
    chosen: list[TrainingClaim] = []
    for path in paths:
        source = Path(path).stem
        rows = [row for r in claim_records(Path(path)) if (row := make(source, r)) is not None]
        if not rows:
            raise TrainError(f"{path} has no {wanted}")
        chosen += sample(rows, limit, seed, key=lambda r: (r.source, r.id))
    return chosen


def split(items: Iterable[C], seed: int, holdout: float) -> tuple[list[C], list[C]]:
    """``(training, held out)``: a seeded share ``holdout`` of the claims, by claim id."""
    train_set: list[C] = []
    held: list[C] = []
    for item in items:
        (held if is_holdout(seed, item.source, item.id, holdout) else train_set).append(item)
    return train_set, held


class Labelled(Protocol):
    @property
    def source(self) -> str: ...
    @property
    def label(self) -> str: ...


def label_accuracy(
    predicted: Sequence[str], items: Sequence[Labelled], supports: str = "SUPPORTS"
) -> dict[str, dict[str, float]]:
    """Label accuracy per claim file (``item.source``), next to its majority class."""
    result: dict[str, dict[str, float]] = {}
    for source in sorted({item.source for item in items}):
        rows = [i for i, item in enumerate(items) if item.source == source]
        right = sum(predicted[i] == items[i].label for i in rows)
        share = sum(items[i].label == supports for i in rows) / len(rows)
        result[source] = {
            "claims": len(rows),
            "accuracy": round(right / len(rows), 4),
            "majority_baseline": round(max(share, 1 - share), 4),
        }
    return result


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a cache file; a torn line (a killed run) is skipped."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record


def append_to(path: Path) -> TextIO:
    """``path`` opened to append to (a cache file), its directory made first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("a", encoding="utf-8")


def check_index(index: Path, store: str) -> None:
    """A missing embedded index is a one-line TrainError before any work starts."""
    if store == "embedded" and not Path(index).is_dir():
        raise TrainError(f"index {index} does not exist (build it with `feverous-es index`)")


@contextlib.contextmanager
def retrieval_pipeline(
    index: Path,
    *,
    store: str = "embedded",
    reranker: str = "retrieval",
    hops: int | None = None,
    device: str = "cpu",
) -> Iterator[Any]:
    """The claim pipeline over ``index`` with the default retrieval stages, for its
    ``retrieve_many`` (no verdict model is loaded); the store is closed on exit."""
    from feverous_es.plugins.config import load_config
    from feverous_es.verify.pipeline import Pipeline

    check_index(index, store)
    config = load_config(plugins={"reranker": reranker}, hops=hops, environ={})
    with Pipeline.open(index, store=store, config=config, device=device) as pipeline:
        yield pipeline


def gold_in_index(pipeline: Any, claims: Sequence[Any]) -> dict[str, Any]:
    """The gold elements (``claim.gold`` ids) of ``claims`` that the pipeline's index holds, by
    id: one fetch for a batch of claims."""
    wanted = [i for c in claims for i in c.gold]
    return {e.id: e for e in pipeline.context.store.get_elements(wanted)}


def read_records(path: Path, record_type: Callable[..., R]) -> dict[tuple[str, str], R]:
    """The records of a cache file by ``(source, id)``; a line that does not fit
    ``record_type`` (a torn last line, another version's) is skipped."""
    cached: dict[tuple[str, str], R] = {}
    for fields in read_jsonl(path):
        try:
            record = record_type(**fields)
        except TypeError:
            continue
        cached[record.source, record.id] = record  # type: ignore[attr-defined]
    return cached


def collect_cached(
    claims: Sequence[C],
    cache: Path,
    record_type: Callable[..., R],
    pipeline: Callable[[], contextlib.AbstractContextManager[Any]],
    make: Callable[[Any, Sequence[C]], Iterable[R]],
    *,
    batch_size: int = 16,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[R]:
    """One training record a claim, in the order of ``claims``: from ``cache`` when it holds
    the claim's, else made by ``make(pipeline, claims)`` a batch at a time and appended to
    ``cache`` as it goes, so a killed run loses at most one batch. ``record_type`` is a
    dataclass with ``source`` and ``id``; the pipeline is opened only when there is work."""
    cached = read_records(cache, record_type)
    todo = [c for c in claims if (c.source, c.id) not in cached]
    if on_progress:
        on_progress(len(claims) - len(todo), len(claims))
    if todo:
        with pipeline() as opened, append_to(cache) as out:
            done = len(claims) - len(todo)
            for start in range(0, len(todo), batch_size):
                chunk = todo[start : start + batch_size]
                for record in make(opened, chunk):
                    cached[record.source, record.id] = record  # type: ignore[attr-defined]
                    out.write(json.dumps(asdict(record), ensure_ascii=False) + "\n")  # type: ignore[call-overload]
                out.flush()
                done += len(chunk)
                if on_progress:
                    on_progress(done, len(claims))
    return [cached[c.source, c.id] for c in claims]
