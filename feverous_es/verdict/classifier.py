"""The verdict stage: claim + evidence → SUPPORTS / REFUTES / NOT ENOUGH INFO.

The built-in ``classifier`` composes four stages, each in a module of its own:

1. **route** (:func:`~feverous_es.verdict.feature_model.evidence_table`): a claim goes to the
   evidence's first table or to its sentences;
2. **decide**: a table-routed claim by the table feature model (computed table facts); a
   sentence-routed one by the reader (:mod:`~feverous_es.verdict.readers`, the entailment
   model) on the whole evidence and on the pages the claim names read alone
   (:mod:`~feverous_es.verdict.premises`); the NEI model may hand a claim to the other route
   (:mod:`~feverous_es.verdict.routes`);
3. **NOT ENOUGH INFO** (:mod:`~feverous_es.verdict.nei_call`): the NEI model's call, on the same
   premises, and the reader's on each evidence sentence alone, where the evidence holds too few
   of the claim's words;
4. **calibration** (:mod:`~feverous_es.verdict.calibration`): the reader's SUPPORTS share
   recalibrated where it decides.

The options, each with what chose its default: :class:`~feverous_es.verdict.options.
ClassifierOptions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import ModelError, PluginError
from feverous_es.index.elements import ElementType
from feverous_es.plugins.interfaces import (
    Candidate,
    Label,
    PluginContext,
    Query,
    ReadTable,
    Verdict,
    evidence_tables,
)
from feverous_es.verdict.calibration import Calibration
from feverous_es.verdict.entailment import EntailmentModel
from feverous_es.verdict.feature_model import DEFAULT_MODEL, FeatureClassifier, evidence_table
from feverous_es.verdict.inputs import read_evidence, sentence_premise
from feverous_es.verdict.nei_call import NEI_MODEL, Found, NeiRule, nei_probability, nei_reader
from feverous_es.verdict.options import ClassifierOptions
from feverous_es.verdict.premises import ClaimPremises
from feverous_es.verdict.readers import packaged_source_dir
from feverous_es.verdict.routes import TABLE_HANDOVER_BELOW, Handovers
from feverous_es.verdict.table_facts import Table
from feverous_es.verdict.table_facts import claim_features as table_claim_features

NEI = Label.NOT_ENOUGH_INFO


class ClassifierVerdict:
    """The ``classifier`` verdict: its options are :class:`ClassifierOptions`' fields."""

    def __init__(self, context: PluginContext, **options: Any) -> None:
        try:
            self.options = chosen = ClassifierOptions(**options)
        except TypeError as error:  # an option it does not have: name the ones it has
            names = ", ".join(f.name for f in fields(ClassifierOptions))
            raise PluginError(f"verdict plugin 'classifier': {error} (options: {names})") from None
        self.reader = EntailmentModel(
            chosen.model, device=context.device, max_length=chosen.max_length,
            math_hints=chosen.math_hints, cascade_below=chosen.cascade_below,
        )  # fmt: skip
        self.labels = self.reader.labels
        self.tables = _feature_model(chosen.table_model)
        self.nei_reader = nei_reader(chosen.nei_model, context.device)
        if self.nei_reader is not None and NEI not in self.nei_reader.labels:
            raise ModelError(f"the NEI model {self.nei_reader.model_dir} has no NOT ENOUGH INFO")
        self.nei_rule = NeiRule(chosen.nei_above, chosen.nei_covered_below,
                                chosen.nei_sentences_above, chosen.nei_sentences_floor)  # fmt: skip
        self.handovers = Handovers(chosen, self.nei_reader, self.tables)
        self.calibration = Calibration(chosen.reader_scale)

    def predict(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> list[Verdict]:
        if not batch:
            return []
        tables = [evidence_table(query.text, ev) for query, ev in batch]
        # a table-routed claim is decided by the table feature model; a sentence one by the reader
        routes = [self.tables if table is not None else None for table in tables]
        # The entailment model runs only for the claims whose verdict reads it.
        reads = [i for i, route in enumerate(routes) if self._reads_entailment(route)]
        # what retrieval found, read only where a NEI rule is on (off: no work a claim)
        found = [Found.of(query.text, ev) if self._may_call_nei else None for query, ev in batch]
        # the NEI model reads only the claims the call may be made for (the gate first)
        gated = [i for i, f in enumerate(found) if f and self.nei_rule.gates(f)]
        gated = gated if self.nei_reader is not None else []
        # the sentence-routed claims the NEI model may hand to their evidence's table
        few = [i for i, f in enumerate(found) if f and f.covered < TABLE_HANDOVER_BELOW]
        to_table = few if self.nei_reader is not None else []
        # the table-routed claims whose sentences may decide them instead
        weighs = self.handovers.weighs_routes
        weighed = [i for i, t in enumerate(tables) if t is not None and weighs]
        # the premises of the claims a reader reads, each built once for all of them
        pages = self.options.page_premises
        premises = {
            i: ClaimPremises.of(batch[i][0].text, batch[i][1], tables[i], pages)
            for i in sorted({*reads, *gated, *weighed, *to_table})
        }
        claims = [query.text for query, _ in batch]
        entailment, sentence_rows = self._read_premises(claims, premises, reads)
        nei_read = self._read_nei(claims, premises, sorted({*gated, *weighed, *to_table}))
        said_nei = {i: nei_probability(premises[i], nei_read[i]) for i in gated}
        undecided = [i for i in gated if self.nei_rule.reads_sentences(said_nei[i])]
        alone = self.sentences_alone([(claims[i], batch[i][1]) for i in undecided])
        sentences_nei = dict(zip(undecided, alone, strict=True))
        table_rows = {
            i: route.probabilities(table_claim_features(claims[i], table)[None, :])[0]
            for i, (table, route) in enumerate(zip(tables, routes, strict=True))
            if route is not None and table is not None
        }
        handing = self.handovers.to_sentences(premises, nei_read)
        handed = self._handed_to_sentences(batch, tables, handing, premises, sentence_rows)
        # sentence-routed claims the NEI model reads as about their evidence's table
        shown: list[Table | None] = [
            None if i in handed else table for i, table in enumerate(tables)
        ]
        for i, table in self.handovers.to_tables(batch, nei_read, to_table, tables).items():
            assert self.tables is not None  # weighs_tables: a feature model reads them
            shown[i] = table
            features = table_claim_features(claims[i], table)[None, :]
            table_rows[i] = self.tables.probabilities(features)[0]
        verdicts: list[Verdict] = []
        for i in range(len(batch)):
            if i in said_nei:
                unsure: float | None = said_nei[i]
            else:
                rows = [row for row in (entailment.get(i), sentence_rows.get(i)) if row is not None]
                unsure = self._reader_nei(rows)
            if i in table_rows and i not in handed:  # a table decides
                assert self.tables is not None
                labels, row = self.tables.labels, table_rows[i]
            else:
                labels, row = self.labels, handed[i] if i in handed else entailment[i]
                row = self.calibration.apply(self.labels, row)
            verdicts.append(self._decide(labels, row, unsure, found[i], sentences_nei.get(i)))
        return [
            replace(v, read=read, table=table)
            for v, (read, table) in zip(verdicts, map(self._read, batch, shown), strict=True)
        ]

    def _handed_to_sentences(
        self,
        batch: Sequence[tuple[Query, Sequence[Candidate]]],
        tables: Sequence[Table | None],
        handing: set[int],
        premises: dict[int, ClaimPremises],
        sentence_rows: Mapping[int, np.ndarray],
    ) -> dict[int, np.ndarray]:
        """For each table-routed claim of ``handing`` whose evidence holds sentences: the
        reader's probabilities on those sentences, which decide it instead."""
        pages = self.options.page_premises
        for i in handing:
            if i not in premises:
                premises[i] = ClaimPremises.of(batch[i][0].text, batch[i][1], tables[i], pages)
        handed = {i: sentence_rows[i] for i in sorted(handing) if i in sentence_rows}
        to_read = [i for i in sorted(handing) if i not in handed and premises[i].sentences]
        if to_read:
            rows = self.entailment(
                [batch[i][0].text for i in to_read], [premises[i].sentences for i in to_read]
            )
            handed.update(zip(to_read, rows, strict=True))
        return handed

    def _read_premises(
        self, claims: Sequence[str], premises: Mapping[int, ClaimPremises], reads: Sequence[int]
    ) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        """The entailment probabilities of the claims ``reads`` names against their route's
        premise, and, where the reader makes the NEI call itself (no NEI model), of the
        table-routed ones against their sentences too: such a claim is NOT ENOUGH INFO only
        when neither holds the answer."""
        reader_nei = self._may_call_nei and self.nei_reader is None
        sentences = {
            i: premises[i].sentences for i in reads
            if reader_nei and premises[i].on_table and premises[i].sentences
        }  # fmt: skip
        pairs = [(claims[i], premises[i].route) for i in reads]
        pairs += [(claims[i], text) for i, text in sentences.items()]
        pages = [(n, page) for n, i in enumerate(reads) for page in premises[i].pages]
        pairs += [(pairs[n][0], page) for n, page in pages]
        if not pairs:
            return {}, {}
        rows = self.entailment([claim for claim, _ in pairs], [premise for _, premise in pairs])
        routed = rows[: len(reads)]
        if pages:  # each claim's reading: the mean of its whole evidence's and its pages'
            end = len(reads) + len(sentences)
            sums, counts = routed.copy(), np.ones(len(reads))
            for (n, _), row in zip(pages, rows[end:], strict=True):
                sums[n] += row
                counts[n] += 1
            routed = sums / counts[:, None]
        return (
            dict(zip(reads, routed, strict=True)),
            dict(zip(sentences, rows[len(reads) : len(reads) + len(sentences)], strict=True)),
        )

    def _read_nei(
        self, claims: Sequence[str], premises: Mapping[int, ClaimPremises], chosen: Sequence[int]
    ) -> dict[int, list[float]]:
        """For the claims ``chosen``, the NEI model's NOT ENOUGH INFO probability on each of
        the premises the reader reads (:meth:`ClaimPremises.all`'s order). None read without a
        NEI model."""
        if self.nei_reader is None or not chosen:
            return {}
        read = [(i, text) for i in chosen for text in premises[i].all()]
        said = self.nei_reader.probabilities(
            [claims[i] for i, _ in read], [text for _, text in read]
        )[:, self.nei_reader.labels.index(NEI)]
        by_claim: dict[int, list[float]] = {}
        for (i, _), p in zip(read, said.tolist(), strict=True):
            by_claim.setdefault(i, []).append(p)
        return by_claim

    def sentences_alone(self, batch: Sequence[tuple[str, Sequence[Candidate]]]) -> list[float]:
        """For each (claim, evidence), the lowest NOT ENOUGH INFO probability over the evidence
        sentences, each read alone by the reader (high: no one sentence decides the claim; 1
        with no sentence): what ``nei_sentences_above`` reads, in one reader pass."""
        pairs = [(n, claim, sentence_premise([c]))
                 for n, (claim, evidence) in enumerate(batch) for c in evidence
                 if c.element.type is ElementType.SENTENCE]  # fmt: skip
        lowest = [1.0] * len(batch)
        if pairs:
            rows = self.entailment([claim for _, claim, _ in pairs], [p for *_, p in pairs])
            for (n, *_), said in zip(pairs, rows[:, self.labels.index(NEI)].tolist(), strict=True):
                lowest[n] = min(lowest[n], said)
        return lowest

    def _reader_nei(self, nei_rows: Sequence[np.ndarray]) -> float | None:
        """The reader's NOT ENOUGH INFO probability over the premises it read: the lowest."""
        if not nei_rows or NEI not in self.labels:
            return None
        return min(float(r[self.labels.index(NEI)]) for r in nei_rows)

    @staticmethod
    def _read(
        item: tuple[Query, Sequence[Candidate]], table: Table | None
    ) -> tuple[tuple[str, ...], ReadTable | None]:
        query, evidence = item
        number = evidence_tables(evidence)[0][1] if table is not None else None
        return read_evidence(query.text, evidence, table, number)

    @property
    def _may_call_nei(self) -> bool:
        return NEI in self.labels and self.nei_rule.on

    def _reads_entailment(self, route: FeatureClassifier | None) -> bool:
        """Whether a claim on ``route`` needs the entailment model: it answers alone, or its NOT
        ENOUGH INFO call reads it (no NEI model)."""
        return route is None or (self._may_call_nei and self.nei_reader is None)

    def score_evidence(self, claim: str, evidence: Sequence[Candidate]) -> list[dict[Label, float]]:
        """The entailment model's label probabilities for each piece of ``evidence`` read on
        its own against ``claim`` (what a person checking the verdict wants beside each
        sentence)."""
        if not evidence:
            return []
        rows = self.entailment([claim] * len(evidence), [sentence_premise([c]) for c in evidence])
        return [dict(zip(self.labels, map(float, row), strict=True)) for row in rows]

    def model_dirs(self) -> dict[str, Path]:
        """The directories of the models this verdict runs, by role."""
        dirs = {"verdict": self.reader.model_dir}
        # a reader that averages several models (the large reader): the others too
        for i, directory in enumerate(self.reader.model_dirs[1:]):
            dirs["verdict-averaged" + (f"-{i + 1}" if i else "")] = directory
        if self.reader.cascade is not None:  # the reader of the unsure pairs, as packaged:
            # asking which models run does not open it (runtime/parts.py: graph_digests)
            dirs["verdict-cascade"] = packaged_source_dir(self.reader.cascade)
        handovers = self.handovers
        if self.nei_reader is not None and (
            self._may_call_nei or handovers.weighs_routes or handovers.weighs_tables
        ):
            dirs[NEI_MODEL] = self.nei_reader.model_dir
        if self.tables is not None:
            dirs["table-verdict"] = self.tables.model_dir
        return dirs

    def entailment(self, claims: Sequence[str], premises: Sequence[str]) -> np.ndarray:
        """The entailment model's label probabilities (in :attr:`labels` order) per pair; the
        model loads on first use: a claim the table route decides, NEI never called, reads none."""
        return self.reader.probabilities(claims, premises)

    def _decide(
        self,
        labels: Sequence[Label],
        row: np.ndarray,
        unsure: float | None,
        found: Found | None,
        alone: float | None = None,
    ) -> Verdict:
        """A claim's verdict from its route's probabilities ``row`` (over ``labels``: the
        reader's, or a feature model's), its NOT ENOUGH INFO probability ``unsure``
        (:meth:`_read_nei`, else the reader's), what retrieval ``found`` and ``alone``
        (:meth:`sentences_alone`, where the rule read it): SUPPORTS or
        REFUTES, whichever is likelier, unless the NEI rule says NOT ENOUGH INFO. The verdict's
        ``probability`` is its label's entry among the probabilities a user reads (the
        route's, with that NEI probability)."""
        decided = [i for i, label in enumerate(labels) if label is not NEI]
        best = max(decided, key=lambda i: row[i])
        p = float(row[best] / max(row[decided].sum(), 1e-9))
        label, why = labels[best], ""
        probabilities = dict(zip(labels, map(float, row), strict=True))
        if unsure is not None:
            probabilities[NEI] = unsure
            if found is not None and self.nei_rule.says_nei(found, unsure, alone):  # a rule is on
                label, why = NEI, found.reason(unsure, alone)
        return Verdict(label, probabilities.get(label, p), probabilities, why=why)


def _feature_model(option: str | None) -> FeatureClassifier | None:
    """The table feature classifier an option names; by default the package's; none for
    ``""``."""
    if option:
        return FeatureClassifier(Path(option))
    if option is None and DEFAULT_MODEL.is_dir():
        return FeatureClassifier(DEFAULT_MODEL)
    return None
