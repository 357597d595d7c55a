"""`train grounding`: the reader's threshold chosen on labelled (source, claim) pairs, stored
with the reader, and applied by `entail`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.runtime.files import PACKAGED_MODELS_DIR, sha256_file
from feverous_es.training.grounding import best_threshold
from feverous_es.verdict.entailment import EntailmentModel

SOURCE = (
    "Henri Schoeman (born 3 December 1991) is a South African triathlete. He won the bronze "
    "medal in the triathlon at the 2016 Summer Olympics in Rio de Janeiro."
)


def test_the_threshold_with_the_best_balanced_accuracy() -> None:
    scores = np.array([0.9, 0.8, 0.4, 0.3, 0.2, 0.1])
    supported = np.array([True, True, True, False, False, False])
    threshold, accuracy = best_threshold(scores, supported)
    assert 0.3 < threshold < 0.4 and accuracy == 1.0  # midway: no pair sits on it
    unbalanced = np.array([True, False, False, False, False, False])
    threshold, accuracy = best_threshold(scores, unbalanced)
    assert accuracy == 1.0 and 0.8 < threshold < 0.9  # both labels' recall count alike


def test_train_grounding_writes_settings_that_install_stores_with_the_reader(
    tmp_path: Path,
) -> None:
    reader = tmp_path / "verdict"
    shutil.copytree(PACKAGED_MODELS_DIR / "verdict", reader)
    (reader / "grounding.json").unlink()
    claims = [
        ("Henri Schoeman is a South African triathlete.", 1),
        ("Henri Schoeman won a bronze medal at the 2016 Olympics.", 1),
        ("Henri Schoeman won a gold medal at the 2012 Olympics.", 0),
        ("Henri Schoeman is a Canadian swimmer who retired in 2010.", 0),
    ]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(
        json.dumps({"doc": SOURCE, "claim": c, "label": label}) + "\n" for c, label in claims
    ))  # fmt: skip
    out = tmp_path / "grounding"
    result = CliRunner().invoke(
        main, ["train", "grounding", str(data), "--reader-dir", str(reader),
               "--window-words", "80", "--window-words", "120", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert not (reader / "grounding.json").exists()  # training writes only its --out
    installed = CliRunner().invoke(main, ["train", "install", str(out), "--as", "grounding"])
    assert installed.exit_code == 0, installed.output
    stored = json.loads((reader / "grounding.json").read_text())
    assert stored == json.loads((out / "grounding.json").read_text())
    assert stored["chosen_on"]["data"] == {"pairs.jsonl": 4}
    assert stored["window_words"] in (80, 120) and stored["max_windows"] in (1, 2, 3, 4, None)
    manifest = json.loads((reader / "manifest.json").read_text())
    assert manifest["files"]["grounding.json"]["sha256"] == sha256_file(reader / "grounding.json")
    assert EntailmentModel(reader).threshold == stored["threshold"]  # every entry point's
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"claim": "no source"}\n')
    refused = CliRunner().invoke(
        main, ["train", "grounding", str(bad), "--reader-dir", str(reader), "--out", str(out)]
    )
    assert refused.exit_code == 1
    assert "bad.jsonl:1: not a {doc, claim, label} line" in refused.output


def test_long_sources_hold_a_claims_gold_sentences_among_other_pages_or_leave_them_out(
    mini_wiki: Path,
) -> None:
    from feverous_es.eval.claims import SUPPORTS, ClaimRecord, read_claims
    from feverous_es.index.dump.page import parse_page
    from feverous_es.index.dump.wiki import WikiDB
    from feverous_es.training.grounding import long_source_pairs
    from tests.conftest import MINI

    claims = read_claims(MINI / "feverous_s_dev.jsonl")
    records = [("feverous_s_dev", r) for r in claims if isinstance(r, ClaimRecord)][:40]
    with WikiDB(mini_wiki) as db:
        pairs = long_source_pairs(records, db, words=300)
        again = long_source_pairs(records, db, words=300)
        pages = {e.split("_sentence_")[0] for _, r in records for s in r.evidence for e in s}
        texts = {
            e.id: e.text
            for page in pages
            if (data := db.page_json(page)) is not None
            for e in parse_page(page, data).elements
        }
    assert len(pairs) >= 40 and pairs == again  # seeded: the same sources each time
    by_claim = {r.claim: r for _, r in records}
    for with_gold, without in zip(pairs[::2], pairs[1::2], strict=True):
        record = by_claim[with_gold.claim]
        assert with_gold.supported == (record.label == SUPPORTS) and not without.supported
        gold = " ".join(texts[e] for e in sorted(record.evidence[0], key=_sentence_order))
        assert gold in with_gold.source and gold not in without.source
        assert with_gold.source.replace(gold, "").split() == without.source.split()
        assert len(with_gold.source.split()) >= 300


def _sentence_order(element_id: str) -> tuple[str, int]:
    page, _, number = element_id.rpartition("_sentence_")
    return page, int(number)


def test_window_pairs_teach_the_reader_evidence_inside_a_window(mini_wiki: Path) -> None:
    from feverous_es.eval.claims import NOT_ENOUGH_INFO
    from feverous_es.training.verdict.entailment_data import NO_GOLD, Split, window_pairs
    from feverous_es.training.verdict.evidence import read_labelled_claims
    from feverous_es.verdict.windows import WINDOW_WORDS
    from tests.conftest import MINI

    claims = read_labelled_claims([MINI / "feverous_s_dev.jsonl"], limit=40, seed=13)
    split = Split(13, 0.35)
    pairs = window_pairs(claims, mini_wiki, split, WINDOW_WORDS)
    assert len(pairs) >= 40
    by_id = {c.id: c for c in claims}
    for with_gold, without in zip(pairs[::2], pairs[1::2], strict=True):
        claim = by_id[with_gold.id]
        assert with_gold.source == without.source == "feverous_s_dev-window"
        assert with_gold.label == claim.label and without.label == NOT_ENOUGH_INFO
        assert without.variant == NO_GOLD and len(without.premise) < len(with_gold.premise)
        assert with_gold.held_out == without.held_out == split.held_out(claim.source, claim.id)
        assert WINDOW_WORDS <= len(with_gold.premise.split()) < 2 * WINDOW_WORDS + 60


def test_a_setting_past_the_latency_budget_is_not_chosen() -> None:
    """Reading every window is the most accurate here, but five claims against a 1,000-word
    source would take past a second: the best setting within the budget wins."""
    from feverous_es.training.grounding_settings import (
        BUDGET_SECONDS,
        ScoredWindows,
        compare_settings,
    )

    supported = np.array([True, True, False, False] * 2)  # each two-fold half holds both
    # Each pair's fifth window (the one only `all` reads) holds its answer.
    scores = [np.array([0.5] * 4 + [0.9 if s else 0.1]) for s in supported]
    orders = [np.arange(5) for _ in supported]

    def read_in(seconds: float | None) -> dict:  # 8 pairs of 5 windows read in ``seconds``
        return {120: {"set": ScoredWindows(scores, orders, supported, seconds)}}

    fast = compare_settings(read_in(None))
    assert fast[0]["max_windows"] is None  # no costs given: the best mean
    rows = compare_settings(read_in(0.4))  # 0.01 s a window: 5 x 16 windows, 0.8 s
    assert rows[0]["max_windows"] is None and rows[0]["budget_seconds"] <= BUDGET_SECONDS
    slow = compare_settings(read_in(2.0))  # 0.05 s a window: 5 x 16 windows, 4 s
    assert slow[0]["max_windows"] is not None and slow[0]["budget_seconds"] <= BUDGET_SECONDS
    assert slow[-1]["budget_seconds"] > BUDGET_SECONDS


def test_a_source_one_window_holds_is_held_to_its_own_threshold(tmp_path: Path) -> None:
    """`threshold_single`: a source that fits one window is one reading, not the best of
    several; where the reader stores a threshold for it, `entail` applies that one to it and
    the other to longer sources."""
    from feverous_es.training.grounding_settings import ScoredWindows, compare_settings

    reader = tmp_path / "verdict"
    shutil.copytree(PACKAGED_MODELS_DIR / "verdict", reader)
    settings = {"threshold": 0.999, "threshold_single": 0.01, "window_words": 40,
                "max_windows": None}  # fmt: skip
    (reader / "grounding.json").write_text(json.dumps(settings))
    model = EntailmentModel(reader)
    claim = "Henri Schoeman is a South African triathlete."
    short, long = model.entail_many([(claim, [SOURCE]), (claim, [SOURCE + " " + SOURCE * 3])])
    assert short.windows == 1 and short.threshold == 0.01 and short.label.value == "SUPPORTS"
    assert long.windows > 1 and long.threshold == 0.999

    # Chosen on pairs whose one-window sources want a lower bar than the longer ones'.
    supported = np.array([True, True, False, False] * 4)
    single = np.array([True] * 8 + [False] * 8)
    scores = [np.array([0.3 if s else 0.1]) if o else np.array([0.1, 0.9 if s else 0.6])
              for s, o in zip(supported, single, strict=True)]  # fmt: skip
    orders = [np.arange(len(x)) for x in scores]
    rows = compare_settings({120: {"set": ScoredWindows(scores, orders, supported)}})
    best = rows[0]
    assert best["threshold_single"] is not None and best["mean"] == 1.0
    assert best["threshold_single"] < 0.3 <= 0.6 < best["threshold"] <= 0.9
    one = max(r["mean"] for r in rows if r["threshold_single"] is None)
    assert one < 1.0
