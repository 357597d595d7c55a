"""Claims routed to sentences while their evidence holds a table: would the table route read them
better? Each claim of a `train verdict` run's evidence cache (beside --pairs) with a table in its
evidence is read through both routes by the shipped verdict; rules that send more claims to the
table are scored per file, on the held-out claims and on the others.

    run = "bench.table_route:table_route"   # needs --pairs and --index; options: margins, deltas

* ``margin M`` (``m`` in hundredths: a record's keys hold no dot): the table route when the
  table holds more than the best sentence's share of the claim's content words minus ``m``
  (0: today's router);
* ``delta D`` (``d`` in hundredths): today's router, then a claim it sends to sentences goes to
  the table when the table route's verdict is more probable than the sentence route's by
  more than ``d``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.context import Context
from feverous_es.training.datasets import is_holdout
from feverous_es.training.retrieved import read_retrieved

FILES = ("tabfact_dev", "fm2_dev", "feverous_s_dev")


def table_route(
    context: Context,
    *,
    margins: Sequence[float] = (0.0, 0.1, 0.2),
    deltas: Sequence[float] = (0.3, 0.1, 0.0),
) -> dict[str, Any]:
    """Each rule's label accuracy per file, held-out and training claims apart."""
    from feverous_es.index.backends import open_store
    from feverous_es.plugins.interfaces import PluginContext, Query
    from feverous_es.retrieve.evidence_tables import with_tables
    from feverous_es.text import tokens
    from feverous_es.verdict import classifier
    from feverous_es.verdict.feature_model import _share as share  # the router's own measure
    from feverous_es.verdict.feature_model import content_words, first_table, sentence_texts

    store = open_store("embedded", context.place("index"))
    # Every claim whose evidence holds a table reads it (no margin to beat); the same evidence
    # as a plain list hands on no table: the sentence route.
    verdict = classifier.ClassifierVerdict(PluginContext(store, None, "cpu"), table_margin=-2.0)
    claims = []
    try:
        for e in read_retrieved(context.place("pairs").parent / "evidence.jsonl").values():
            evidence = with_tables(e.evidence_candidates(), store)
            table = first_table(evidence) if e.source in FILES else None
            if table is None:
                continue
            words = content_words(e.claim)
            texts = sentence_texts(evidence)
            best = max((share(words, set(tokens(t))) for t in texts), default=0.0)
            read = {}
            for route, given in (("table", evidence), ("sentence", list(evidence))):
                answer = verdict.predict([(Query(e.claim, np.zeros(0)), given)])[0]
                read[route] = (answer.label.value, answer.probability)
            claims.append({
                "source": e.source, "label": e.label, "table_share": share(words, table.all_tokens),
                "sentence_share": best, "read": read,
                "held_out": is_holdout(13, e.source, str(e.id), 0.35),
            })  # fmt: skip
    finally:
        store.close()
    rules: dict[str, Any] = {}
    for m in margins:
        rules[f"margin {round(m * 100)}"] = lambda c, m=m: (
            c["table_share"] > c["sentence_share"] - m
        )
    for d in deltas:
        rules[f"delta {round(d * 100)}"] = lambda c, d=d: (
            c["table_share"] > c["sentence_share"]
            or c["read"]["table"][1] > c["read"]["sentence"][1] + d
        )
    figures: dict[str, Any] = {}
    for name, to_table in rules.items():
        row: dict[str, Any] = {}
        for source in FILES:
            for part, held in (("held", True), ("training", False)):
                chosen = [c for c in claims if c["source"] == source and c["held_out"] == held]
                right = [c["read"]["table" if to_table(c) else "sentence"][0] == c["label"]
                         for c in chosen]  # fmt: skip
                row[f"{source} {part}"] = round(float(np.mean(right)), 4) if right else None
        figures[name] = row
        print(f"{name:<10} " + "  ".join(f"{k} {v:.3f}" for k, v in row.items() if v is not None))
    figures["claims"] = {s: sum(c["source"] == s for c in claims) for s in FILES}
    return figures
