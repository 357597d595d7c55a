"""The verdict stage: claim + evidence → SUPPORTS / REFUTES / NOT ENOUGH INFO.

The built-in ``classifier`` first routes a claim (:func:`~feverous_es.verdict.feature_model.
evidence_table`): to the evidence's first table, or to its sentences. Its entailment model, an
ONNX cross-encoder, reads the claim against that route's premise
(:func:`~feverous_es.verdict.inputs.table_premise` / :func:`~feverous_es.verdict.inputs.
sentence_premise`; labels from its ``config.json``'s ``id2label``). A route with a feature model
(the package's: computed table facts for the table route) has it decide SUPPORTS or REFUTES; a
route without one (the sentence route, by default) takes the entailment model's answer, read
on the whole evidence and on the page the claim names first alone (``page_premises``). NOT
ENOUGH INFO is the NEI model's call (``nei_model``, the package's ``verdict-nei``), on the same
premises, where the evidence holds too few of the claim's words: for a claim routed to a table,
on the table and on the sentences, both. The NEI model also weighs the routes: a table-routed
claim it reads as about its sentences is decided on them, a sentence-routed one it reads as
about the evidence's table (where the NEI call is made) by that table. The options, each with
what chose its default: :class:`ClassifierOptions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import ModelError, PluginError
from feverous_es.index.elements import title_keys
from feverous_es.plugins.interfaces import (
    Candidate,
    Label,
    PluginContext,
    Query,
    ReadTable,
    Verdict,
    evidence_tables,
)
from feverous_es.retrieve.pages import claim_spans
from feverous_es.runtime.files import PACKAGED_MODELS_DIR
from feverous_es.text import STOPWORDS, marked_words, subject_name, tokens
from feverous_es.verdict.entailment import EntailmentModel
from feverous_es.verdict.feature_model import (
    DEFAULT_MODEL,
    FeatureClassifier,
    evidence_table,
    first_table,
)
from feverous_es.verdict.inputs import (
    TEXT_TYPES,
    read_evidence,
    sentence_premise,
    table_premise,
)
from feverous_es.verdict.readers import AUTO_READER, CASCADE_BELOW, packaged_source_dir
from feverous_es.verdict.table_facts import Table
from feverous_es.verdict.table_facts import claim_features as table_claim_features

NEI_MODEL = "verdict-nei"  # the package's model of the NOT ENOUGH INFO call, when installed
NEI = Label.NOT_ENOUGH_INFO


@dataclass(frozen=True)
class ClassifierOptions:
    """The ``classifier`` verdict's options (a pipeline configuration's ``[verdict]`` table, or
    ``load("verdict", "classifier", context, options)``): which models read, and the rules that
    decide. Each rule's default names what chose it; a rule is kept only while a paired
    difference on held-out dev claims through the whole pipeline says it pays
    (``python -m bench run verdict``; docs/decisions.md, Verdict)."""

    model: str | None = AUTO_READER
    """The entailment model: a reader's name (``default``, ``large``, ``auto``:
    :mod:`~feverous_es.verdict.readers`) or a model directory (ONNX + tokenizer.json +
    config.json); None: the ``default`` reader (the three students). The cascade (``auto``)
    was chosen by ``python -m bench run verdict`` (docs/decisions.md, Verdict)."""
    math_hints: bool | None = None
    """Prefix the premise with number hints (Malon 2021, §5); None: as the model was trained
    (its ``training.json``), else none."""
    max_length: int | None = None
    """Tokens of (claim, premise) the reader reads; None: as the model was trained, else 256."""
    table_model: str | None = None
    """The feature classifier (:mod:`~feverous_es.verdict.feature_model`) that decides
    SUPPORTS / REFUTES for the claims routed to a table; None: the package's (computed table
    facts: on TabFact it reads tables the reader cannot), ``""``: the reader answers alone."""
    nei_model: str | None = None
    """The model whose NOT ENOUGH INFO probability the NEI call reads (on the same premises as
    the reader; the reader still decides SUPPORTS or REFUTES): None: the package's
    ``verdict-nei`` when installed (a student trained to say NEI where the retrieved evidence
    does not bear on the claim: its gold pages hidden, its subject invented), ``""`` or none
    installed: the reader's own. Its labels must hold NOT ENOUGH INFO."""
    nei_above: float = 0.98
    """The NOT ENOUGH INFO probability (``nei_model``'s) at or above which the verdict is NEI,
    where ``nei_covered_below`` lets the call be made (over 1: never). Chosen with
    ``nei_unknown_above`` and ``nei_covered_below`` by ``python -m bench run nei``
    (docs/decisions.md, Verdict): the most accurate rule on the claims that
    need NEI (gold pages or sentences hidden, table hidden, invented subjects) beside the
    held-out dev claims, among those costing FM2, FEVEROUS-S and its balanced subset at most a
    point and TabFact nothing."""
    nei_unnamed_above: float = 1.1
    """For a claim whose evidence comes from no page it names (its subject is not in the index,
    or retrieval did not find it): the NEI probability at or above which the verdict is NEI
    (over 1: never; ``nei_above`` holds for it too). The ``nei`` condition chose none."""
    nei_unknown_above: float = 0.9
    """For a claim whose subject's name (:func:`~feverous_es.text.subject_name`) no evidence
    text or page title holds (an entity the index may not hold): the NEI probability at or
    above which the verdict is NEI (over 1: never; the lowest threshold that holds for a claim
    is the one applied). Chosen with ``nei_above`` by the ``nei`` condition."""
    nei_covered_below: float = 0.9
    """The NOT ENOUGH INFO call is made only for a claim whose evidence holds less than this
    share of its words (:func:`coverage`: its tokens but stop words, numbers included); over
    1: for any claim. Where the evidence holds the claim's words it speaks of what the claim
    says, and the reader's SUPPORTS or REFUTES stands."""
    table_unsure_below: float = 0.0
    """A claim routed to a table whose feature model's likelier label has less than this share
    of SUPPORTS + REFUTES is decided by the reader on the claim's sentences instead (when its
    evidence holds any; FM2's gold evidence is always sentences, and the router sends some of
    its claims to a table); 0: the table route always decides. The ``route`` condition
    (bench/route.py) found no share that does not cost TabFact: 0."""
    table_sentences_margin: float = 0.0
    """A claim routed to a table is decided by the reader on its sentences (when its evidence
    holds any) where the NEI model reads them as bearing on it more than the table: its NOT
    ENOUGH INFO probability on the sentences is below the table's by more than this margin.
    The router sends a claim to a table when the table holds more of its words; its words may
    still be about what a sentence says (FM2's gold evidence is always sentences). Over 1:
    the table route decides; needs the NEI model (``nei_model``). Chosen by ``python -m bench
    run route`` on every held-out claim of the three files (docs/decisions.md, Verdict)."""
    sentences_table_margin: float = 0.6
    """A claim routed to its sentences whose NOT ENOUGH INFO call is made (its evidence holds
    less than ``nei_covered_below`` of its words) is decided by the table feature model on the
    evidence's first table where the NEI model reads that table as bearing on it more than the
    sentences: its NOT ENOUGH INFO probability on the table below that on the sentences by more
    than this margin. The router sends a claim to its sentences when one holds as many of its
    words as the table; a TabFact claim's words are often in a sentence while what it says
    (a count, a comparison) is only in the table. Over 1: the sentences decide; needs the NEI
    model and a table feature model. Chosen by ``python -m bench run route`` with
    ``table_sentences_margin`` (docs/decisions.md, Verdict): the most accurate margin whose
    paired difference on all held-out claims clears zero and that costs FM2 and FEVEROUS-S
    nothing."""
    reader_scale: float = 0.4317
    """The reader's answer recalibrated where it decides (a claim routed to sentences): its
    SUPPORTS share of SUPPORTS + REFUTES, p, becomes sigmoid(``reader_scale`` · logit(p) +
    ``reader_shift``) (Platt scaling), so SUPPORTS needs p above sigmoid(-shift / scale), not 0.5.
    1 and 0: as read. Fitted by the ``nei`` condition (bench/calibration.py) on the held-out
    SUPPORTS / REFUTES claims the reader decides: the scale alone ships, as fitted when it
    shipped (it moves no decision; the probability a user reads is calibrated: docs/decisions.md,
    Verdict)."""
    reader_shift: float = 0.0
    """See ``reader_scale``: the shift moves decisions (against the reader's lean to SUPPORTS);
    the ``nei`` condition ships it only where its out-of-fold paired difference clears zero,
    which it did not (bench/results/nei.json, ``lean``)."""
    cascade_below: float = CASCADE_BELOW
    """With the ``auto`` reader: the default reader's top probability under which the large
    one reads the pair again (:data:`~feverous_es.verdict.readers.CASCADE_BELOW` says what
    chose it)."""
    page_premises: int = 1
    """For a claim routed to sentences: the reader also reads the sentences of this many pages
    of the evidence alone (:func:`page_premises`) and the verdict takes the mean of those
    readings and the whole evidence's; 0: the whole evidence only. The guard chose it
    (``python -m bench run contrast-pipeline``: the failure classes without it), while on the
    held-out dev claims it moves no FM2 claim (docs/decisions.md, Verdict)."""


class ClassifierVerdict:
    """The ``classifier`` verdict: its options are :class:`ClassifierOptions`' fields.

    Evidence sentences that are all of one page are read as one passage under its title
    (:func:`~feverous_es.verdict.inputs.sentence_premise`).
    """

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
        self.nei_reader = _nei_reader(chosen.nei_model, context.device)
        if self.nei_reader is not None and Label.NOT_ENOUGH_INFO not in self.nei_reader.labels:
            raise ModelError(f"the NEI model {self.nei_reader.model_dir} has no NOT ENOUGH INFO")

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
        below = self.options.nei_covered_below
        gated = [i for i, f in enumerate(found) if f and f.covered < below]
        gated = gated if self.nei_reader is not None else []
        # the table-routed claims whose sentences may decide them instead (the NEI model weighs
        # the table against the sentences)
        weighed = [i for i, t in enumerate(tables) if t is not None and self._weighs_routes]
        # the premises of the claims a reader reads, each built once for all of them
        pages = self.options.page_premises
        premises = {
            i: ClaimPremises.of(batch[i][0].text, batch[i][1], tables[i], pages)
            for i in sorted({*reads, *gated, *weighed})
        }
        claims = [query.text for query, _ in batch]
        entailment, sentence_rows = self._read_premises(claims, premises, reads)
        nei_read = self._read_nei(claims, premises, sorted({*gated, *weighed}))
        said_nei = {i: _nei_call(premises[i], nei_read[i]) for i in gated}
        table_rows = {
            i: route.probabilities(table_claim_features(claims[i], table)[None, :])[0]
            for i, (table, route) in enumerate(zip(tables, routes, strict=True))
            if route is not None and table is not None
        }
        handing = self._unsure_tables(table_rows) | self._about_sentences(premises, nei_read)
        handed = self._handed_to_sentences(batch, tables, handing, premises, sentence_rows)
        # sentence-routed claims the NEI model reads as about their evidence's table
        shown: list[Table | None] = [
            None if i in handed else table for i, table in enumerate(tables)
        ]
        for i, table in self._about_tables(batch, nei_read, gated, tables).items():
            assert self.tables is not None  # _weighs_tables: a feature model reads them
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
                verdicts.append(self._decide(self.tables.labels, table_rows[i], unsure, found[i]))
                continue
            row = self._recalibrated(handed[i] if i in handed else entailment[i])
            verdicts.append(self._decide(self.labels, row, unsure, found[i]))
        return [
            replace(v, read=read, table=table)
            for v, (read, table) in zip(verdicts, map(self._read, batch, shown), strict=True)
        ]

    def _unsure_tables(self, table_rows: Mapping[int, np.ndarray]) -> set[int]:
        """The table-routed claims whose feature model's likelier label has less than
        ``table_unsure_below`` of SUPPORTS + REFUTES."""
        below = self.options.table_unsure_below
        return {i for i, row in table_rows.items() if likelier_share(row) < below}

    @property
    def _weighs_routes(self) -> bool:
        """Whether the NEI model weighs a table-routed claim's table against its sentences
        (``table_sentences_margin``)."""
        return self.nei_reader is not None and self.options.table_sentences_margin <= 1.0

    def _about_sentences(
        self, premises: Mapping[int, ClaimPremises], nei_read: Mapping[int, Sequence[float]]
    ) -> set[int]:
        """The table-routed claims the NEI model reads as about their sentences: its NOT ENOUGH
        INFO probability on them below that on the table by more than ``table_sentences_margin``."""
        if not self._weighs_routes:
            return set()
        margin = self.options.table_sentences_margin
        return {
            i for i, read in nei_read.items()
            if premises[i].on_table and premises[i].sentences and about_sentences(read, margin)
        }  # fmt: skip

    @property
    def _weighs_tables(self) -> bool:
        """Whether the NEI model weighs a sentence-routed claim's sentences against its
        evidence's table (``sentences_table_margin``)."""
        return (
            self.nei_reader is not None
            and self.tables is not None
            and self.options.sentences_table_margin <= 1.0
        )

    def _about_tables(
        self,
        batch: Sequence[tuple[Query, Sequence[Candidate]]],
        nei_read: Mapping[int, Sequence[float]],
        gated: Sequence[int],
        tables: Sequence[Table | None],
    ) -> dict[int, Table]:
        """The sentence-routed claims of ``gated`` the NEI model reads as about their
        evidence's first table, with that table: its NOT ENOUGH INFO probability on the table
        below that on the sentences (``nei_read``'s first) by more than
        ``sentences_table_margin``. Only a claim whose sentences read above the margin can be,
        so only those have their table read."""
        if not self._weighs_tables:
            return {}
        margin = self.options.sentences_table_margin
        candidates = {
            i: table for i in gated
            if tables[i] is None and nei_read[i][0] > margin
            and (table := first_table(batch[i][1])) is not None
        }  # fmt: skip
        if not candidates:
            return {}
        assert self.nei_reader is not None
        claims = [batch[i][0].text for i in candidates]
        on_table = self.nei_reader.probabilities(
            claims,
            [table_premise(claim, t) for claim, t in zip(claims, candidates.values(), strict=True)],
        )[:, self.nei_reader.labels.index(NEI)]
        return {
            i: table for (i, table), p in zip(candidates.items(), on_table.tolist(), strict=True)
            if about_table([p, nei_read[i][0]], margin)
        }  # fmt: skip

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
        premise, and, where the verdict may call NEI, of the table-routed ones against their
        sentences too: such a claim is NOT ENOUGH INFO only when neither holds the answer (the
        table premise alone turned more claims with their evidence found into NEI)."""
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
        options = self.options
        lowest = min(options.nei_above, options.nei_unnamed_above, options.nei_unknown_above)
        return Label.NOT_ENOUGH_INFO in self.labels and lowest <= 1.0

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
        if self.nei_reader is not None and (
            self._may_call_nei or self._weighs_routes or self._weighs_tables
        ):
            dirs[NEI_MODEL] = self.nei_reader.model_dir
        if self.tables is not None:
            dirs["table-verdict"] = self.tables.model_dir
        return dirs

    def entailment(self, claims: Sequence[str], premises: Sequence[str]) -> np.ndarray:
        """The entailment model's label probabilities (in :attr:`labels` order) per pair; the
        model loads on first use: a claim the table route decides, NEI never called, reads none."""
        return self.reader.probabilities(claims, premises)

    def _recalibrated(self, row: np.ndarray) -> np.ndarray:
        """The reader's probabilities ``row`` (in :attr:`labels` order) with SUPPORTS and REFUTES
        recalibrated (``reader_scale``, ``reader_shift``); their sum, and NEI, kept."""
        scale, shift = self.options.reader_scale, self.options.reader_shift
        if (scale, shift) == (1.0, 0.0):
            return row
        s, r = self.labels.index(Label.SUPPORTS), self.labels.index(Label.REFUTES)
        both = float(row[s] + row[r])
        if both <= 0.0:
            return row
        supports = float(platt(np.array([row[s] / both]), scale, shift)[0])
        out = row.astype(np.float64).copy()
        out[s], out[r] = supports * both, (1.0 - supports) * both
        return out.astype(row.dtype)

    def _decide(
        self,
        labels: Sequence[Label],
        row: np.ndarray,
        unsure: float | None,
        found: Found | None,
    ) -> Verdict:
        """A claim's verdict, decided here alone, from its route's probabilities ``row`` (over
        ``labels``: the reader's, or a feature model's), its NOT ENOUGH INFO probability
        ``unsure`` (:meth:`_read_nei`, else the reader's) and what retrieval ``found``:
        SUPPORTS or REFUTES, whichever is likelier; NOT ENOUGH INFO when the evidence holds
        less than ``nei_covered_below`` of the claim's words and ``unsure`` reaches
        ``nei_above`` (or, where no evidence comes from a page the claim names,
        ``nei_unnamed_above``; where the claim writes a name no evidence holds,
        ``nei_unknown_above``). The verdict's ``probability`` is its
        label's entry among the probabilities a user reads (the route's, with that NEI
        probability)."""
        decided = [i for i, label in enumerate(labels) if label is not Label.NOT_ENOUGH_INFO]
        best = max(decided, key=lambda i: row[i])
        p = float(row[best] / max(row[decided].sum(), 1e-9))
        label, why = labels[best], ""
        probabilities = dict(zip(labels, map(float, row), strict=True))
        if unsure is not None:
            probabilities[Label.NOT_ENOUGH_INFO] = unsure
            if found is not None:  # a NEI rule is on
                options = self.options
                threshold = options.nei_above
                if not found.named:
                    threshold = min(threshold, options.nei_unnamed_above)
                if found.unknown:
                    threshold = min(threshold, options.nei_unknown_above)
                if found.covered < options.nei_covered_below and unsure >= threshold:
                    label, why = Label.NOT_ENOUGH_INFO, found.reason(unsure)
        return Verdict(label, probabilities.get(label, p), probabilities, why=why)


def likelier_share(row: np.ndarray) -> float:
    """The share of a table feature model's likelier label in its SUPPORTS + REFUTES
    (``table_unsure_below`` hands a claim to its sentences under it)."""
    return float(np.max(row) / max(row.sum(), 1e-9))


def about_sentences(nei_read: Sequence[float], margin: float) -> bool:
    """Whether the NEI model reads a table-routed claim as about its sentences: its NOT ENOUGH
    INFO probability on them (``nei_read[1]``) below that on the table (``nei_read[0]``) by more
    than ``margin`` (``table_sentences_margin``)."""
    return nei_read[1] + margin < nei_read[0]


def about_table(nei_read: Sequence[float], margin: float) -> bool:
    """Whether the NEI model reads a sentence-routed claim as about its evidence's table: its
    NOT ENOUGH INFO probability on the table (``nei_read[0]``) below that on the sentences
    (``nei_read[1]``) by more than ``margin`` (``sentences_table_margin``)."""
    return nei_read[0] + margin < nei_read[1]


def _nei_call(premises: ClaimPremises, read: Sequence[float]) -> float:
    """A claim's NOT ENOUGH INFO probability from the NEI model's readings of its premises: the
    mean over a sentence claim's (the whole evidence, the named page alone), the lower of a table
    claim's table and sentences (such a claim is NEI only when neither holds the answer)."""
    return min(read) if premises.on_table else sum(read) / len(read)


def platt(supports: np.ndarray, scale: float, shift: float) -> np.ndarray:
    """SUPPORTS shares of SUPPORTS + REFUTES recalibrated: sigmoid(``scale`` · logit(p) +
    ``shift``) (Platt scaling; p kept inside [1e-6, 1 - 1e-6]), as ``reader_scale`` and
    ``reader_shift`` apply it and bench/calibration.py fits it."""
    p = np.clip(np.asarray(supports, dtype=np.float64), 1e-6, 1 - 1e-6)
    return 1.0 / (1.0 + np.exp(-(scale * np.log(p / (1 - p)) + shift)))


@dataclass(frozen=True)
class Found:
    """What retrieval found of a claim, as the NOT ENOUGH INFO call reads it: whether a piece
    of evidence comes from a page the claim names, the share of the claim's words the
    evidence holds, and the names the claim writes that no evidence holds."""

    named: bool
    covered: float
    unknown: tuple[str, ...] = ()

    @classmethod
    def of(cls, claim: str, evidence: Sequence[Candidate]) -> Found:
        held = evidence_words(evidence)
        return cls(names_a_page(claim, evidence), coverage(claim, held), unknown_names(claim, held))

    def reason(self, unsure: float) -> str:
        """Why a claim is NOT ENOUGH INFO, for the person who reads the verdict: what
        retrieval missed, and (``unsure``: the NEI probability) what the model read in it."""
        said = [f"the evidence holds {self.covered:.0%} of the claim's words",
                f"nothing in it bears on the claim (NOT ENOUGH INFO {unsure:.2f})"]  # fmt: skip
        if not self.named:
            said.insert(0, "no evidence comes from a page the claim names")
        if self.unknown:
            said.insert(0, "no evidence names " + ", ".join(self.unknown))
        return "; ".join(said)


def names_a_page(claim: str, evidence: Sequence[Candidate]) -> bool:
    """Whether a piece of ``evidence`` comes from a page the claim names (a span of it is the
    page's title, as page retrieval matches titles)."""
    spans = claim_spans(claim)
    pages = {candidate.element.page for candidate in evidence}
    return any(key in spans for page in pages for key in title_keys(page))


def evidence_words(evidence: Sequence[Candidate]) -> set[str]:
    """The tokens of the evidence's texts and page titles."""
    return {w for c in evidence for w in tokens(f"{c.element.page} {c.element.text}")}


def coverage(claim: str, held: set[str]) -> float:
    """The share of the claim's words (its tokens but stop words, numbers included) among
    ``held`` (:func:`evidence_words`); 1 for a claim of stop words only."""
    words = marked_words(claim)
    if not words:
        return 1.0
    return len(words & held) / len(words)


def unknown_names(claim: str, held: set[str]) -> tuple[str, ...]:
    """The words of the claim's subject (:func:`~feverous_es.text.subject_name`, stop words
    aside) that ``held`` (:func:`evidence_words`) lacks, as written: what no evidence names. A
    word held in its plural or singular counts as held (a claim's "Olympic", the evidence's
    "Olympics"). Only the subject: a claim's other names are often a demonym or a word the
    evidence spells otherwise, where the subject is what retrieval looks for first."""

    def is_held(word: str) -> bool:
        return word in held or word + "s" in held or (word.endswith("s") and word[:-1] in held)

    unknown: list[str] = []
    for word in subject_name(claim).split():
        words = {w for w in tokens(word) if len(w) > 1} - STOPWORDS  # "Austria's": not "s"
        if not all(map(is_held, words)) and word not in unknown:
            unknown.append(word)
    return tuple(unknown)


def page_premises(claim: str, evidence: Sequence[Candidate], pages: int) -> list[str]:
    """The sentence premises of ``pages`` pages of ``evidence`` read alone: the pages the claim
    names first, in the order it names them (its subject before the place or person it relates
    it to: "Vancouver is in Cameroon." reads Vancouver's sentences, which retrieval may rank
    below Cameroon's), then the others in evidence order; none when the evidence's sentences are
    of one page (its premise is the whole evidence's)."""
    by_page: dict[str, list[Candidate]] = {}
    for candidate in evidence:
        if candidate.element.type in TEXT_TYPES:
            by_page.setdefault(candidate.element.page, []).append(candidate)
    if len(by_page) < 2:
        return []
    named = claim_spans(claim)
    unnamed = len(claim.split())

    def named_at(page: str) -> int:
        return min((named[key][0] for key in title_keys(page) if key in named), default=unnamed)

    ordered = sorted(by_page, key=named_at)  # stable: evidence order among equals
    # A page read alone keeps its title before each sentence: one title there answered held-out
    # changed professions and places worse (docs/decisions.md, Verdict).
    return [sentence_premise(by_page[page], one_title=False) for page in ordered[:pages]]


@dataclass(frozen=True)
class ClaimPremises:
    """What the verdict's readers read of one claim's evidence, built once for all of them."""

    route: str  # the routed table, else the evidence's sentences
    on_table: bool
    sentences: str = ""  # a table-routed claim's sentences (its NEI call reads both)
    pages: tuple[str, ...] = ()  # a sentence claim's pages read alone (:func:`page_premises`)

    @classmethod
    def of(
        cls, claim: str, evidence: Sequence[Candidate], table: Table | None, pages: int
    ) -> ClaimPremises:
        if table is not None:
            return cls(table_premise(claim, table), True, sentence_premise(evidence))
        read_alone = tuple(page_premises(claim, evidence, pages))
        return cls(sentence_premise(evidence), False, pages=read_alone)

    def all(self) -> list[str]:
        """Every premise of the claim, its route's first."""
        return [self.route, *([self.sentences] if self.sentences else []), *self.pages]


def _feature_model(option: str | None) -> FeatureClassifier | None:
    """The table feature classifier an option names; by default the package's; none for
    ``""``."""
    if option:
        return FeatureClassifier(Path(option))
    if option is None and DEFAULT_MODEL.is_dir():
        return FeatureClassifier(DEFAULT_MODEL)
    return None


def _nei_reader(option: str | None, device: str) -> EntailmentModel | None:
    """The NEI call's model an option names; by default the package's ``verdict-nei`` when one
    is installed; none (the reader's own probability) for ``""``."""
    if option:
        return EntailmentModel(option, device=device)
    if option is None and (PACKAGED_MODELS_DIR / NEI_MODEL).is_dir():
        return EntailmentModel(PACKAGED_MODELS_DIR / NEI_MODEL, device=device)
    return None
