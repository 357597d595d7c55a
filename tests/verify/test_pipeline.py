"""The claim pipeline: configuration, plugins, evidence budget, hops, and a run on real pages."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.errors import EmptyClaimError, PluginError, WorkAbandoned
from feverous_es.index.elements import Element, ElementType
from feverous_es.plugins.config import DEFAULT_PLUGINS, load_config
from feverous_es.plugins.interfaces import (
    Candidate,
    Evidence,
    Label,
    PluginContext,
    Query,
    Verdict,
    evidence_tables,
)
from feverous_es.plugins.registry import available, load, register
from feverous_es.retrieve.pages import Casing, match_titles
from feverous_es.retrieve.selection import BudgetSelector
from feverous_es.text import claim_spans
from feverous_es.verify.pipeline import Pipeline
from tests.conftest import REPO, unregister


def element(local: str, kind: ElementType, page: str = "P") -> Element:
    text = f"{page} {local}"
    return Element(f"{page}_{local}", page, kind, text, f"[{page}] {text}", local, text)


def candidate(local: str, kind: ElementType, score: float, hop: int = 1) -> Candidate:
    return Candidate(element(local, kind), score, hop)


# Evidence selection.


def test_select_fills_5_sentences_and_25_cell_type_elements_in_rank_order() -> None:
    ranked = [candidate(f"sentence_{i}", ElementType.SENTENCE, -i) for i in range(8)]
    ranked += [candidate(f"cell_0_{i}_0", ElementType.CELL, -i) for i in range(20)]
    ranked += [candidate(f"item_0_{i}", ElementType.ITEM, -20 - i) for i in range(10)]
    ranked.insert(3, ranked[0])  # a duplicate is kept once
    evidence = BudgetSelector().select(ranked)
    ids = [c.element.local_id for c in evidence]
    assert ids[:5] == [f"sentence_{i}" for i in range(5)]
    assert ids[5:25] == [f"cell_0_{i}_0" for i in range(20)]
    assert ids[25:] == [f"item_0_{i}" for i in range(5)]


def test_push_puts_hop_evidence_on_top_and_drops_the_lowest() -> None:
    selector = BudgetSelector()
    evidence = selector.select([candidate(f"sentence_{i}", ElementType.SENTENCE, 10 - i)
                                for i in range(5)])  # fmt: skip
    strong = candidate("sentence_9", ElementType.SENTENCE, 7.5, hop=2)
    weak = candidate("sentence_8", ElementType.SENTENCE, 1.0, hop=2)
    pushed = selector.push(evidence, [weak, strong])
    ids = [c.element.local_id for c in pushed]
    assert ids == ["sentence_9", "sentence_0", "sentence_1", "sentence_2", "sentence_3"]
    # An element already held is not added twice.
    assert selector.push(pushed, [strong]) == pushed


# Configuration and registry.


def test_config_layers_file_then_environment_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text(
        'hops = 3\n[plugins]\nreranker = "retrieval"\nhop = "from-file"\n'
        '[options.verdict]\nmodel = "/models/v"\n'
    )
    env = {"FEVEROUS_ES_HOP": "from-env", "FEVEROUS_ES_VERDICT": "from-env"}
    config = load_config(path, plugins={"verdict": "from-flag"}, environ=env)
    assert config.hops == 3
    assert config.plugins["reranker"] == "retrieval"
    assert config.plugins["hop"] == "from-env"
    assert config.plugins["verdict"] == "from-flag"
    assert config.plugins["pages"] == DEFAULT_PLUGINS["pages"]
    assert config.stage_options("verdict") == {"model": "/models/v"}
    assert load_config(environ={"FEVEROUS_ES_HOPS": "0"}).hops == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[plugins]\nranker = 'x'\n", "unknown pipeline stage"),
        ("hops = [", "not valid TOML"),
        ("colour = 'red'\n", "unknown key"),
    ],
)
def test_bad_config_file_says_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(PluginError, match=message):
        load_config(path, environ={})


def test_unknown_plugin_lists_the_available_ones() -> None:
    context = PluginContext(store=None, embed=None)  # type: ignore[arg-type]
    with pytest.raises(PluginError, match=r"no reranker plugin named 'nope'.*retrieval"):
        load("reranker", "nope", context, {})


def test_bad_options_are_told_apart_from_a_plugins_own_type_error() -> None:
    context = PluginContext(store=None, embed=None)  # type: ignore[arg-type]

    def broken(context: PluginContext, size: int = 1) -> None:
        raise TypeError("a bug inside the plugin")

    register("reranker", "broken", broken)
    try:
        with pytest.raises(PluginError, match=r"bad options \{'colour': 1\}"):
            load("reranker", "broken", context, {"colour": 1})
        with pytest.raises(TypeError, match="a bug inside the plugin"):
            load("reranker", "broken", context, {"size": 2})
    finally:
        unregister("reranker", "broken")


def test_builtins_are_entry_points() -> None:
    found = available()
    for stage, name in DEFAULT_PLUGINS.items():
        assert found[stage][name].startswith("feverous_es."), (stage, name)


# Page retrieval spans.


def test_claim_spans_keep_inner_punctuation_and_skip_stopword_spans() -> None:
    spans = claim_spans("Pittsview is in Russell County, Alabama's east.")
    assert "russell county, alabama" in spans
    assert "alabama" in spans  # possessive dropped
    assert "is in" not in spans
    assert spans["pittsview"] == (0, 1)


class TitleStore:
    """Just enough of a store for title matching: titles by their folded key."""

    def __init__(self, *titles: str) -> None:
        self.titles = {title.casefold(): [title] for title in titles}

    def match_titles(self, keys: Sequence[str]) -> dict[str, list[str]]:
        return {key: self.titles[key] for key in keys if key in self.titles}


def test_title_matches_say_how_the_claim_writes_the_span() -> None:
    store = TitleStore("Gwernymynydd", "Village", "Mold", "Battle of Sandomierz")
    casing = {
        m.title: m.casing for m in match_titles(store, "Gwernymynydd is a village near Mold.")
    }
    assert casing == {"Gwernymynydd": Casing.NAME, "Village": Casing.LOWER, "Mold": Casing.NAME}
    # stopwords inside a name may be lower case; a claim with no capitals tells nothing
    named = match_titles(store, "The Battle of Sandomierz was won.")
    assert [(m.title, m.casing) for m in named] == [("Battle of Sandomierz", Casing.NAME)]
    uncased = match_titles(store, "mold have a village")
    assert {m.casing for m in uncased} == {Casing.UNCASED}


# The whole pipeline on the real sample pages.


class EvidenceCountVerdict:
    """A toy verdict plugin: SUPPORTS when any evidence was found. It only has to be a
    plugin, registered the way a user would register one, not a good model."""

    def __init__(self, context: PluginContext, threshold: int = 1) -> None:
        self.threshold = threshold

    def predict(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> list[Verdict]:
        return [
            Verdict(Label.SUPPORTS if len(ev) >= self.threshold else Label.NOT_ENOUGH_INFO, 1.0)
            for _, ev in batch
        ]


@pytest.fixture
def toy_verdict():
    register("verdict", "toy", EvidenceCountVerdict)
    yield "toy"
    unregister("verdict", "toy")


def sample_claims() -> list[dict]:
    lines = (REPO / "sample" / "claims.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_pipeline_with_a_registered_plugin_finds_gold_evidence(
    sample_index: Path, toy_verdict: str
) -> None:
    claims = [c for c in sample_claims() if c["evidence"] and c["evidence"][0]["content"]][:10]
    config = load_config(plugins={"reranker": "retrieval", "verdict": toy_verdict}, environ={})
    with Pipeline.open(sample_index, config=config, device="cpu") as pipeline:
        results = pipeline.verify_many([c["claim"] for c in claims])
    found_pages = 0
    for claim, result in zip(claims, results, strict=True):
        assert result.verdict.label is Label.SUPPORTS
        kinds = [c.element.type.in_cell_budget for c in result.evidence]
        assert kinds.count(False) <= 5 and kinds.count(True) <= 25
        assert len({c.element.id for c in result.evidence}) == len(result.evidence)
        gold_pages = {i.rsplit("_sentence_", 1)[0] for i in claim["evidence"][0]["content"]}
        found_pages += bool(gold_pages & {hit.page.title for hit in result.pages})
        for record in result.hops:
            assert set(record.added) <= set(record.proposed)
    assert found_pages >= 9, "the gold page of nearly every sample claim is retrieved"
    assert set(pipeline.seconds) >= {"embed", "pages", "candidates", "rerank", "verdict"}


def test_claims_retrieved_in_threads_get_what_they_get_one_at_a_time(
    sample_index: Path,
) -> None:
    from feverous_es.index.embedded import EmbeddedStore
    from feverous_es.verify.pipeline import LazyEmbedder

    claims = [c["claim"] for c in sample_claims()[:36]]  # two of them hop
    config = load_config(plugins={"reranker": "retrieval"}, environ={})

    def retrieved(workers: int) -> list[tuple[list[str], list[str], list[tuple[str, ...]]]]:
        store = EmbeddedStore(sample_index)
        store.concurrent_claims = workers  # as a store that searches outside the GIL says
        with Pipeline(config, PluginContext(store, LazyEmbedder("cpu"), "cpu")) as pipeline:
            found = pipeline.retrieve_many(claims)
        return [
            ([c.element.id for c in r.evidence], [p.page.title for p in r.pages],
             [h.proposed for h in r.hops])
            for r in found
        ]  # fmt: skip

    one_at_a_time = retrieved(1)
    assert any(any(hops) for _, _, hops in one_at_a_time), "the claims exercise the hop stage"
    assert retrieved(4) == one_at_a_time


def test_batches_verified_with_the_next_gathering_meanwhile_match_one_batch_at_a_time(
    sample_index: Path,
) -> None:
    """predict's overlapped stream: the default models, the same verdicts and evidence."""
    claims = [c["claim"] for c in sample_claims()[:12]]
    batches = [claims[:5], claims[5:9], claims[9:]]

    def seen(results: list) -> list[tuple]:
        return [
            (r.verdict.label, r.verdict.probabilities,
             [(c.element.id, c.score) for c in r.evidence], [h.added for h in r.hops])
            for r in results
        ]  # fmt: skip

    with Pipeline.open(sample_index, device="cpu") as pipeline:
        one_at_a_time = [seen(pipeline.verify_many(batch)) for batch in batches]
        streamed = [seen(results) for results in pipeline.verify_batches(batches)]
    assert streamed == one_at_a_time


def test_retrieval_hands_the_verdict_the_first_table_it_points_at_whole(
    sample_index: Path,
) -> None:
    """The verdict reads no store: each claim's evidence carries the whole of the first table
    it holds cells of (every element the store holds of it), and nothing where it holds none."""
    claims = [c["claim"] for c in sample_claims()[:12]]
    with Pipeline.open(sample_index, device="cpu") as pipeline:
        retrieved = pipeline.retrieve_many(claims)
        store = pipeline.context.store
        for r in retrieved:
            tables = evidence_tables(r.evidence)
            assert isinstance(r.evidence, Evidence)
            assert len(r.evidence.tables) == min(1, len(tables))
            for (page, number), elements in r.evidence.tables.items():
                assert (page, number) == tables[0]
                assert [e.id for e in elements] == [e.id for e in store.page_elements(page, number)]
    assert any(r.evidence.tables for r in retrieved)


def test_a_bad_later_batch_fails_after_the_earlier_ones_are_answered(
    sample_index: Path, toy_verdict: str
) -> None:
    config = load_config(plugins={"reranker": "retrieval", "verdict": toy_verdict}, environ={})
    with Pipeline.open(sample_index, config=config) as pipeline:
        stream = pipeline.verify_batches([["Hamlet is a play."], [" "], ["never reached"]])
        assert len(next(stream)) == 1
        with pytest.raises(EmptyClaimError):
            next(stream)


class _StandardizingReranker:
    """Scores each claim's candidates by their standardized retrieval score, as the
    cross-encoder's ``retrieval_weight`` fusion does."""

    def rerank(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> list[list[Candidate]]:
        ranked = []
        for _, candidates in batch:
            scores = np.array([c.score for c in candidates])
            z = (scores - scores.mean()) / scores.std()
            rescored = [replace(c, score=float(s)) for c, s in zip(candidates, z, strict=True)]
            ranked.append(sorted(rescored, key=lambda c: c.score, reverse=True))
        return ranked


def test_hop_proposals_share_the_first_round_standardization(sample_index: Path) -> None:
    pool = [candidate(f"sentence_{i}", ElementType.SENTENCE, 10.0 - i) for i in range(5)]
    proposed = [candidate(f"sentence_{i}", ElementType.SENTENCE, score, hop=2)
                for i, score in ((7, 5.0), (8, 5.5), (9, 9.5))]  # fmt: skip

    class OneHop:
        def propose(self, query: Query, evidence: Sequence[Candidate], hop: int) -> list:
            return proposed if hop == 2 else []

    config = load_config(plugins={"reranker": "retrieval"}, environ={})
    with Pipeline.open(sample_index, config=config, device="cpu") as pipeline:
        pipeline.pages.retrieve = lambda query: []  # type: ignore[method-assign]
        pipeline.candidates.candidates = lambda query, pages: pool  # type: ignore[method-assign]
        pipeline.hop = OneHop()
        pipeline.reranker = _StandardizingReranker()
        (found,) = pipeline.retrieve_many(["A claim."])
    # Standardized alone, the weaker two proposals (5.0, 5.5: below every first-round
    # sentence) would score -0.8 and -0.6 and push out the weakest evidence (-1.4).
    assert [c.element.local_id for c in found.evidence] == [
        "sentence_9", "sentence_0", "sentence_1", "sentence_2", "sentence_3"]  # fmt: skip
    assert found.hops[0].added == ("P_sentence_9",)
    assert found.hops[0].removed == ("P_sentence_4",)


def test_links_hop_follows_evidence_links_to_new_pages(sample_index: Path) -> None:
    from feverous_es.index.embedded import EmbeddedStore
    from feverous_es.retrieve.hops import LinksHop
    from feverous_es.runtime.embedder import Embedder

    store = EmbeddedStore(sample_index)
    try:
        # Its wiki links include [[2016 Summer Olympics]], a page of the sample.
        [linked] = store.get_elements(["Henri Schoeman_sentence_1"])
        embedder = Embedder()
        hop = LinksHop(PluginContext(store, embedder.embed))
        query = Query("Henri Schoeman won bronze at Rio.", embedder.embed(["x"])[0])
        proposals = hop.propose(query, [Candidate(linked, 1.0)], hop=2)
    finally:
        store.close()
    assert proposals, "an element with links to indexed pages gets proposals"
    assert {p.element.page for p in proposals} == {"2016 Summer Olympics"}
    assert all(p.hop == 2 and "Henri Schoeman_sentence_1" in p.source for p in proposals)
    kinds = [p.element.type.in_cell_budget for p in proposals]
    assert kinds.count(False) <= 1 and kinds.count(True) <= 2


def test_verify_command_json_and_empty_claim(sample_index: Path, toy_verdict: str) -> None:
    runner = CliRunner()
    args = ["--index", str(sample_index), "--plugin", "reranker=retrieval",
            "--plugin", f"verdict={toy_verdict}", "--hops", "1", "--device", "cpu"]  # fmt: skip
    result = runner.invoke(main, ["verify", "Gold medalist Henri Schoeman won bronze.", *args,
                                  "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["label"] == "SUPPORTS"
    assert any(e["page"] == "Henri Schoeman" for e in data["evidence"])
    assert {"id", "type", "page", "text", "hop"} <= set(data["evidence"][0])

    result = runner.invoke(main, ["verify", "   ", *args])
    assert result.exit_code == 2
    assert "the claim is empty" in result.output

    result = runner.invoke(main, ["verify", "x", *args, "--plugin", "ranker=retrieval"])
    assert result.exit_code == 1
    assert "unknown pipeline stage" in result.output


def test_empty_claim_is_refused_by_the_pipeline(sample_index: Path, toy_verdict: str) -> None:
    config = load_config(plugins={"reranker": "retrieval", "verdict": toy_verdict}, environ={})
    with Pipeline.open(sample_index, config=config) as pipeline:
        with pytest.raises(EmptyClaimError):
            pipeline.verify_many(["fine", ""])
        with pytest.raises(EmptyClaimError):
            pipeline.retrieve_many(["fine", " "])


def test_predict_writes_official_lines_skips_bad_ones_and_resumes(
    sample_index: Path, toy_verdict: str, tmp_path: Path
) -> None:
    claims = sample_claims()[:6]
    dummy = {"id": "", "claim": "", "label": "", "evidence": []}
    lines = [json.dumps(dummy)] + [json.dumps(c) for c in claims[:3]] + ["{not json"]
    lines += [json.dumps(c) for c in claims[3:]]
    source = tmp_path / "claims.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["predict", str(source), "-o", str(out), "--index", str(sample_index),
            "--plugin", "reranker=retrieval", "--plugin", f"verdict={toy_verdict}",
            "--hops", "1", "--batch-size", "4", "--json"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["predicted"] == 6
    assert [m["line_no"] for m in report["malformed"]] == [5]
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [w["id"] for w in written] == [c["id"] for c in claims]
    for line in written:
        assert set(line) >= {"id", "predicted_label", "predicted_evidence"}
        assert all(len(triple) == 3 for triple in line["predicted_evidence"])

    # A kill mid-write leaves a partial line: the rerun drops it and predicts the rest.
    kept = out.read_text().splitlines()[:4]
    out.write_text("\n".join(kept) + "\n" + '{"id": 99, "predicted_lab')
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["predicted"], report["already_done"]) == (2, 4)
    again = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(w["id"] for w in again) == sorted(c["id"] for c in claims)

    # A file that is not predictions is refused whole, its last line kept.
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\nthe last line, unfinished")
    result = CliRunner().invoke(main, [*args[:3], str(notes), *args[4:]])
    assert result.exit_code != 0 and "is not a predictions file" in result.output
    assert notes.read_text() == "my notes\nthe last line, unfinished"


def test_a_pipeline_told_nobody_waits_stops_at_the_next_stage(
    sample_index: Path, toy_verdict: str
) -> None:
    config = load_config(plugins={"reranker": "retrieval", "verdict": toy_verdict}, environ={})
    asked: list[int] = []

    def nobody_after_two_stages() -> bool:
        asked.append(1)
        return len(asked) > 2

    with Pipeline.open(sample_index, config=config) as pipeline:
        pipeline.stop_when = nobody_after_two_stages
        with pytest.raises(WorkAbandoned, match="stopped before the candidates stage"):
            pipeline.verify("Hamlet is a play.")  # embed and pages ran, then it stopped
        pipeline.stop_when = None
        assert pipeline.verify("Hamlet is a play.").claim == "Hamlet is a play."
