"""Hand-overs between the verdict's two routes.

The router (:func:`~feverous_es.verdict.feature_model.evidence_table`) sends a claim to the
evidence's first table or to its sentences by the words they hold; its words may still be
about what the other says. Here the NEI model weighs the two: a table-routed claim it reads as
about its sentences is decided on them by the reader (``table_sentences_margin``), a
sentence-routed claim whose NOT ENOUGH INFO call is made, and that it reads as about the
evidence's table, by that table's feature model (``sentences_table_margin``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from feverous_es.plugins.interfaces import Candidate, Label, Query
from feverous_es.verdict.entailment import EntailmentModel
from feverous_es.verdict.feature_model import FeatureClassifier, first_table
from feverous_es.verdict.inputs import table_premise
from feverous_es.verdict.options import ClassifierOptions
from feverous_es.verdict.premises import ClaimPremises
from feverous_es.verdict.table_facts import Table

# A sentence-routed claim may be handed to its evidence's table only where its evidence holds
# less than this share of its words: the NOT ENOUGH INFO call's gate under which the route
# condition chose ``sentences_table_margin`` (docs/decisions.md, Verdict), kept when that gate
# moved.
TABLE_HANDOVER_BELOW = 0.9


class Handovers:
    """The hand-overs ``options`` turn on, read by the ``nei`` model (none: no hand-over) for
    the ``tables`` feature model (none: no claim goes to a table)."""

    def __init__(
        self,
        options: ClassifierOptions,
        nei: EntailmentModel | None,
        tables: FeatureClassifier | None,
    ) -> None:
        self.options, self.nei, self.tables = options, nei, tables

    @property
    def weighs_routes(self) -> bool:
        """Whether the NEI model weighs a table-routed claim's table against its sentences."""
        return self.nei is not None and self.options.table_sentences_margin <= 1.0

    @property
    def weighs_tables(self) -> bool:
        """Whether the NEI model weighs a sentence-routed claim's sentences against its
        evidence's table."""
        return (
            self.nei is not None
            and self.tables is not None
            and self.options.sentences_table_margin <= 1.0
        )

    def to_sentences(
        self, premises: Mapping[int, ClaimPremises], nei_read: Mapping[int, Sequence[float]]
    ) -> set[int]:
        """The table-routed claims their sentences decide: the NEI model's NOT ENOUGH INFO
        probability on the sentences below that on the table by more than
        ``table_sentences_margin`` (under -1: every one whose evidence holds sentences)."""
        if not self.weighs_routes:
            return set()
        margin = self.options.table_sentences_margin
        return {
            i for i, read in nei_read.items()
            if premises[i].on_table and premises[i].sentences and about_sentences(read, margin)
        }  # fmt: skip

    def to_tables(
        self,
        batch: Sequence[tuple[Query, Sequence[Candidate]]],
        nei_read: Mapping[int, Sequence[float]],
        gated: Sequence[int],
        tables: Sequence[Table | None],
    ) -> dict[int, Table]:
        """The sentence-routed claims of ``gated`` (under :data:`TABLE_HANDOVER_BELOW`) the NEI
        model reads as about their
        evidence's first table, with that table: its NOT ENOUGH INFO probability on the table
        below that on the sentences (``nei_read``'s first) by more than
        ``sentences_table_margin``. Only a claim whose sentences read above the margin can be,
        so only those have their table read."""
        if not self.weighs_tables:
            return {}
        margin = self.options.sentences_table_margin
        candidates = {
            i: table for i in gated
            if tables[i] is None and nei_read[i][0] > margin
            and (table := first_table(batch[i][1])) is not None
        }  # fmt: skip
        if not candidates:
            return {}
        assert self.nei is not None
        claims = [batch[i][0].text for i in candidates]
        on_table = self.nei.probabilities(
            claims,
            [table_premise(claim, t) for claim, t in zip(claims, candidates.values(), strict=True)],
        )[:, self.nei.labels.index(Label.NOT_ENOUGH_INFO)]
        return {
            i: table for (i, table), p in zip(candidates.items(), on_table.tolist(), strict=True)
            if about_table([p, nei_read[i][0]], margin)
        }  # fmt: skip


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
