"""The entailment verdict's training pairs: (claim, premise, label) from every source, mixed.

Sources, each a ``Pair.source``:

* **nli pairs** (``--pairs``: the data's ``nli/text_pairs.jsonl.gz`` and ``table_pairs``): a
  text pair's evidence becomes a sentence premise (``[Title] text …``, as
  :func:`~feverous_es.verdict.inputs.sentence_premise` writes retrieved sentences), a table
  pair's table a table premise (:func:`~feverous_es.verdict.inputs.table_premise`). Three labels.
* **claims with retrieved evidence** (files without ``gold_tables``: FM2, FEVEROUS-S; and a
  seeded sample of the table files): the evidence the pipeline retrieved (Malon (2021) §5: a model
  trained on gold evidence fails on extracted evidence), read the way the verdict will read it —
  the table premise of the evidence's table when the verdict routes the claim to its table
  (:func:`~feverous_es.verdict.feature_model.evidence_table`), else its sentence premise. The
  same evidence with every gold element removed is a NOT ENOUGH INFO pair (``variant``
  ``"no-gold"``): the NEI that means "the evidence is not here".
* **claims with a gold table** (TabFact): the gold table's premise, no retrieval needed.

Every pair of a claim file carries the claim's split: held out (a seeded share by claim id, as
every trainer splits) or not.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from feverous_es.errors import TrainError
from feverous_es.eval.claims import LABELS, NOT_ENOUGH_INFO
from feverous_es.index.element_ids import element_to_triple, table_key
from feverous_es.retrieve.evidence_tables import with_tables
from feverous_es.training.datasets import is_holdout, read_jsonl, sample
from feverous_es.training.rerank.data import index_id
from feverous_es.verdict.feature_model import evidence_table, sentence_texts
from feverous_es.verdict.inputs import sentence_premise, table_premise
from feverous_es.verdict.table_facts import Table

SENTENCE, TABLE = "sentence", "table"  # routes: which premise the verdict reads
NO_GOLD = "no-gold"  # the variant whose evidence lost its gold elements (label NEI)


@dataclass(frozen=True)
class Pair:
    """One training or scoring pair. ``held_out``: a claim kept out of every model; ``train``:
    whether the model trains on it (False: only scored, the sentence premise of a claim the
    verdict routes to its table)."""

    source: str
    id: str
    claim: str
    premise: str
    label: str
    route: str
    variant: str = ""
    held_out: bool = False
    train: bool = True

    @property
    def measured_as(self) -> str:
        """The name its held-out accuracy is reported under: the source, and
        ``source/no-gold`` for the gold-removed NEI pairs."""
        return f"{self.source}/{self.variant}" if self.variant == NO_GOLD else self.source

    @property
    def key(self) -> str:
        """``route/source/id[/variant]``: what the scores file is keyed by."""
        return "/".join(p for p in (self.route, self.source, self.id, self.variant) if p)


# ----------------------------------------------------------------------------- nli pairs


def _nli_table(record: dict[str, Any]) -> Table:
    table = record["table"]
    return Table(
        str(table.get("title") or ""),
        str(table.get("caption") or ""),
        tuple(map(str, table.get("header") or ())),
        tuple(tuple(map(str, row)) for row in table.get("rows") or ()),
    )


def nli_pairs(path: Path) -> Iterator[Pair]:
    """The pairs of an nli file (``text_pairs`` or ``table_pairs`` layout, gzip or plain)."""
    path = Path(path)
    if not path.is_file():
        raise TrainError(f"pair file {path} does not exist")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:  # type: ignore[operator]
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                label = str(record["label"]).upper()
                if label not in LABELS:
                    raise TrainError(
                        f"{path}:{number}: not a claim/evidence pair (label {label!r})"
                    )
                if "table" in record:
                    premise = table_premise(record["claim"], _nli_table(record))
                    route = TABLE
                else:
                    premise = " ".join(
                        f"[{e['title']}] {e['text']}" if e.get("title") else str(e["text"])
                        for e in record["evidence"]
                    )
                    route = SENTENCE
                yield Pair(
                    str(record["source"]), str(record["id"]), str(record["claim"]), premise,
                    label, route,
                )  # fmt: skip
            except (ValueError, KeyError, TypeError) as error:
                raise TrainError(f"{path}:{number}: not a claim/evidence pair ({error})") from None


# ----------------------------------------------------------------------------- claim pairs


@dataclass(frozen=True)
class Split:
    """How a claim file's claims are split: the held-out share, by a seeded hash of the id."""

    seed: int
    holdout: float

    def held_out(self, source: str, claim_id: str) -> bool:
        return is_holdout(self.seed, source, claim_id, self.holdout)


def _claim_pair(claim: Any, split: Split, premise: str, route: str, **fields: Any) -> Pair:
    return Pair(
        claim.source, claim.id, claim.claim, premise, fields.pop("label", claim.label), route,
        held_out=split.held_out(claim.source, claim.id),
        **fields,
    )  # fmt: skip


def retrieved_pairs(
    claim: Any, evidence: Sequence[Any], gold: Sequence[str], store: Any, split: Split
) -> Iterator[Pair]:
    """The pairs of one claim with its retrieved evidence (``Candidate`` s): the premise of the
    route the verdict takes (trained on), the sentence premise when that route is the table
    (scored only), and with gold evidence (elements,
    or a gold table: ``claim.table``), the evidence without it as NOT ENOUGH INFO: for a table
    claim that is another table, the NEI the table route lacked."""
    table = evidence_table(claim.claim, with_tables(evidence, store))
    if table is not None:
        yield _claim_pair(claim, split, table_premise(claim.claim, table), TABLE)
    yield _claim_pair(claim, split, sentence_premise(evidence), SENTENCE, train=table is None)
    gold_ids = {index_id(g) for g in gold}
    gold_table = table_key(claim.table) if getattr(claim, "table", "") else None
    kept = [
        c for c in evidence
        if c.element.id not in gold_ids and not in_table(c.element.id, gold_table)
    ]  # fmt: skip
    if (gold_ids or gold_table) and len(kept) < len(evidence):
        stripped = evidence_table(claim.claim, with_tables(kept, store))
        if stripped is not None:
            route, text = TABLE, table_premise(claim.claim, stripped)
        else:
            route, text = SENTENCE, sentence_premise(kept)
        if text or sentence_texts(kept):
            yield _claim_pair(claim, split, text, route, label=NOT_ENOUGH_INFO, variant=NO_GOLD)


def window_pairs(claims: Sequence[Any], wiki: Path, split: Split, words: int) -> list[Pair]:
    """Each claim whose gold evidence is sentences the dump holds, against a window of about
    ``words`` words holding them among other pages' sentences (its own label), and against the
    window without them (NOT ENOUGH INFO): evidence inside a longer source, as ``entail`` reads
    one (:class:`~feverous_es.training.grounding.LongSources`). Reported as ``SOURCE-window``;
    held out with the claim."""
    from feverous_es.index.dump.wiki import WikiDB
    from feverous_es.training.grounding import LongSources

    pairs = []
    with WikiDB(wiki) as db:
        sources = LongSources(db, words, split.seed)
        for claim in claims:
            made = None if claim.table else sources.around(f"{claim.source}/{claim.id}", claim.gold)
            if made is None or claim.label == NOT_ENOUGH_INFO:
                continue
            held = split.held_out(claim.source, claim.id)
            source = f"{claim.source}-window"  # verdict.pairs.WINDOW
            with_gold, without = made
            pairs.append(Pair(source, claim.id, claim.claim, with_gold, claim.label, SENTENCE,
                              held_out=held))  # fmt: skip
            pairs.append(Pair(source, claim.id, claim.claim, without, NOT_ENOUGH_INFO, SENTENCE,
                              variant=NO_GOLD, held_out=held))  # fmt: skip
    return pairs


TABLE_TYPES = ("cell", "header_cell", "table_caption")


def in_table(element_id: str, table: tuple[str, int] | None) -> bool:
    """Whether ``element_id`` is a cell, header cell or caption of ``table`` (page, number)."""
    if table is None:
        return False
    page, kind, position = element_to_triple(element_id)
    return kind in TABLE_TYPES and page == table[0] and int(position.split("_")[0]) == table[1]


def gold_table_pair(
    claim: Any, store: Any, split: Split, cache: dict[str, Table | None]
) -> Pair | None:
    """The pair of a claim read against its gold table (None when the index lacks the table)."""
    key = claim.table
    if key not in cache:
        page, _, number = element_to_triple(index_id(key))
        cache[key] = Table.from_elements(store.page_elements(page, int(number)), int(number))
    table = cache[key]
    if table is None or not table.rows:
        return None
    return _claim_pair(claim, split, table_premise(claim.claim, table), TABLE, variant="gold")


# ----------------------------------------------------------------------------- mixing


def capped(pairs: Sequence[Pair], per_source: int | None, seed: int) -> list[Pair]:
    """The training pairs with at most ``per_source`` of each source (a seeded sample, the
    same on every run), so that no source swamps the others."""
    by_source: dict[str, list[Pair]] = {}
    for pair in pairs:
        by_source.setdefault(pair.source, []).append(pair)
    chosen: list[Pair] = []
    for rows in by_source.values():
        chosen += sample(rows, per_source, seed, key=lambda p: (p.source, p.key))
    return chosen


def write_pairs(path: Path, pairs: Sequence[Pair]) -> None:
    tmp = path.with_suffix(".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(tmp, "wt", encoding="utf-8") as out:
        for pair in pairs:
            out.write(json.dumps(asdict(pair), ensure_ascii=False) + "\n")
    tmp.replace(path)


def read_pairs(path: Path) -> list[Pair]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines]
    # an older pair file names each pair's cross-fitting fold, since gone
    return [Pair(**{k: v for k, v in r.items() if k != "fold"}) for r in records]


def read_scores(path: Path) -> dict[str, list[float]]:
    """Entailment probabilities by pair key (:attr:`Pair.key`), from a scores file."""
    return {r["key"]: r["probabilities"] for r in read_jsonl(Path(path))}


ProgressCallback = Callable[[int, int], None]
