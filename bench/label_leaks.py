"""Label-free rules that predict FEVEROUS-S labels on mini-FEVEROUS, to read verdict figures by.

mini-FEVEROUS holds, of each FEVEROUS-S page, only the sentences that are some claim's evidence
(see ../shared/data/README.md). Annotators wrote most refuted claims from one sentence and most
supported ones from several, so the size of a claim's gold evidence set, and with it the number
of sentences its page holds in this dump, predicts the label without reading the claim. A model
trained or measured on gold evidence learns that count; retrieved evidence carries it too (how
many of the retrieved sentences come from the page). On the real dump, whose pages are whole,
neither rule works. Prints each rule's accuracy on all claims and on the verdict trainers'
held-out share (seed 13, 30 %), next to the majority class.

    run = "bench.label_leaks:label_leaks"   # on the mini dump (--wiki); option: claims (a file
    # name in the data's minifeverous/)
"""

from __future__ import annotations

from collections.abc import Callable

from bench.context import Context
from bench.data import MINI
from feverous_es.eval.claims import REFUTES, SUPPORTS
from feverous_es.index.dump.page import parse_page
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.index.element_ids import element_to_triple
from feverous_es.index.elements import ElementType
from feverous_es.training.datasets import claim_records, is_holdout


def page_sentences(db: WikiDB, title: str) -> int:
    data = db.page_json(title)
    if data is None:
        return 0
    elements = parse_page(title, data).elements
    return sum(e.type is ElementType.SENTENCE for e in elements)


def accuracy(rows: list[tuple[bool, str, int, int]], rule: Callable[[int, int], str]) -> float:
    return sum(rule(gold, page) == label for _, label, gold, page in rows) / max(1, len(rows))


def label_leaks(
    context: Context, *, claims: str = "feverous_s_dev.jsonl"
) -> dict[str, dict[str, float]]:
    """Each rule's accuracy on all of ``claims`` and on the verdict trainers' held-out share."""
    claim_file = MINI / claims
    rows = []  # (held out, label, gold evidence size, sentences on the first gold page)
    with WikiDB(context.place("wiki")) as db:
        for record in claim_records(claim_file):
            if record.label not in (SUPPORTS, REFUTES) or not record.evidence:
                continue
            gold = record.evidence[0]
            first_page = element_to_triple(gold[0])[0]
            held = is_holdout(13, claim_file.stem, str(record.id), 0.3)
            rows.append((held, record.label, len(gold), page_sentences(db, first_page)))

    rules: dict[str, Callable[[int, int], str]] = {
        "one gold evidence element -> REFUTES": (
            lambda gold, page: REFUTES if gold == 1 else SUPPORTS
        ),
        "first gold page holds one sentence -> REFUTES": (
            lambda gold, page: REFUTES if page == 1 else SUPPORTS
        ),
    }
    figures: dict[str, dict[str, float]] = {}
    for split, chosen in (("all", rows), ("held_out", [r for r in rows if r[0]])):
        supports = sum(r[1] == SUPPORTS for r in chosen) / max(1, len(chosen))
        figures[split] = {"claims": len(chosen), "majority": round(max(supports, 1 - supports), 4)}
        for name, rule in rules.items():
            figures[split][name] = round(accuracy(chosen, rule), 4)
    for split, values in figures.items():
        print(f"{split}: {values['claims']} claims, majority class {values['majority']:.1%}")
        for name in rules:
            print(f"  {name:48s} {values[name]:.1%}")
    return figures
