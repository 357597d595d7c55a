"""The ``classifier`` verdict's options, each with what chose its default (a pipeline
configuration's ``[verdict]`` table)."""

from __future__ import annotations

from dataclasses import dataclass

from feverous_es.verdict.readers import AUTO_READER, CASCADE_BELOW


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
    nei_above: float = 0.9
    """The NOT ENOUGH INFO probability (``nei_model``'s) at or above which the verdict is NEI,
    where ``nei_covered_below`` lets the call be made (over 1: never). Chosen with
    ``nei_covered_below`` and the ``nei_sentences_`` pair by ``python -m bench run nei``
    (docs/decisions.md, Verdict): the most accurate rule on the claims that need NEI (gold
    pages or sentences hidden, table hidden, invented subjects) beside the held-out dev claims
    and decidable controls, among those costing the claims whose whole gold evidence was
    retrieved at most a point in FM2, FEVEROUS-S and its balanced subset, the controls a
    point and TabFact half a point."""
    nei_covered_below: float = 0.5
    """The NOT ENOUGH INFO call is made only for a claim whose evidence holds less than this
    share of its words (:func:`~feverous_es.verdict.nei_call.coverage`: its tokens but stop
    words, numbers included); over 1: for any claim. Where the evidence holds the claim's words
    it speaks of what the claim says, and the reader's SUPPORTS or REFUTES stands."""
    nei_sentences_above: float = 0.8
    """A claim the call gates is also NOT ENOUGH INFO where no one evidence sentence decides it:
    each read alone by the reader, the lowest NOT ENOUGH INFO probability reaches this (1 with
    no sentence), and its NEI probability is at ``nei_sentences_floor``. Chosen with
    ``nei_above`` (the same condition and record)."""
    nei_sentences_floor: float = 0.8
    """The NEI probability a claim needs for ``nei_sentences_above`` to call it NOT ENOUGH INFO
    (chosen with it)."""
    table_sentences_margin: float = 0.0
    """A claim routed to a table is decided by the reader on its sentences (when its evidence
    holds any) where the NEI model reads them as bearing on it more than the table: its NOT
    ENOUGH INFO probability on the sentences is below the table's by more than this margin.
    The router sends a claim to a table when the table holds more of its words; its words may
    still be about what a sentence says (FM2's gold evidence is always sentences). Over 1:
    the table route decides; needs the NEI model (``nei_model``). Chosen by ``python -m bench
    run route`` on every held-out claim of the three files (docs/decisions.md, Verdict)."""
    sentences_table_margin: float = 0.6
    """A claim routed to its sentences whose evidence holds less than
    :data:`~feverous_es.verdict.routes.TABLE_HANDOVER_BELOW` of its words is decided by the table
    feature model on the evidence's first table where the NEI model reads that table as bearing on
    it more than the sentences: its NOT ENOUGH INFO probability on the table below that on the
    sentences by more than this margin. The router sends a claim to its sentences when one holds as
    many of its words as the table; a TabFact claim's words are often in a sentence while what it
    says (a count, a comparison) is only in the table. Over 1: the sentences decide; needs the NEI
    model and a table feature model. Chosen by ``python -m bench run route`` with
    ``table_sentences_margin`` (docs/decisions.md, Verdict): the most accurate margin whose paired
    difference on all held-out claims clears zero and that costs FM2 and FEVEROUS-S nothing."""
    reader_scale: float = 0.4317
    """The reader's answer recalibrated where it decides (a claim routed to sentences): its
    SUPPORTS share of SUPPORTS + REFUTES, p, becomes sigmoid(``reader_scale`` · logit(p))
    (Platt scaling without a shift: it moves no decision, only the probability a user reads);
    1: as read. Fitted by the ``nei`` condition (bench/calibration.py) on the held-out SUPPORTS /
    REFUTES claims the reader decides, as fitted when it shipped. A shift, which would move
    decisions, did not pay (docs/decisions.md, Verdict)."""
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
