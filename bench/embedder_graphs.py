"""Which graph of the shipped embedder the CPU runs: speed side by side, fidelity, batch
independence and dense retrieval, on real mini-FEVEROUS texts.

    run = "bench.embedder_graphs:embedder_graphs"   # the driver's --wiki (default: the
    # mini-FEVEROUS dump); options: texts, claims, rounds

Every graph holds the same weights, the packaged int8 ones: the int8 graph as shipped (its
activations quantized with one scale per batch), the fp32 graph over its dequantized weights
(`runtime.graphs.dequantize`, what `Embedder` runs on the CPU), and the weight-only int8 graph
(`export.int8.quantize_weights` on that fp32 graph: int8 weights behind DequantizeLinear, fp32
arithmetic). Each runs as a user's build would, on ``texts`` elements of the dump (sentences,
list items, table rows: length-sorted batches), either in batches on a session of the
machine's threads or in batches read side by side, one core each. Figures per way: tokens a
second (best of ``rounds``, the ways interleaved so load falls on all alike), cosine to the
fp32 graph's vectors, the largest change of a text's vector between being read alone and read
in a batch with long and short neighbours, and dense retrieval: for ``claims`` FEVEROUS-S dev
claims, the share whose gold sentences all sit in the top 5 of every sentence of those claims'
gold pages.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.context import Context
from bench.data import MINI
from feverous_es.export.int8 import quantize_weights
from feverous_es.index.dump.page import parse_page
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.index.elements import ElementType
from feverous_es.runtime.embedder import (
    INT8_FILE,
    TOKENIZER_FILE,
    _mean_pooled,
    default_model_dir,
    load_tokenizer,
)
from feverous_es.runtime.graphs import dequantize
from feverous_es.runtime.model import Execution, OnnxModel

# (name, graph, batch size, side by side)
WAYS = [
    ("int8, batches of 32 (before)", "int8", 32, False),
    ("int8, one text a run, side by side", "int8", 1, True),
    ("fp32, batches of 32", "fp32", 32, False),
    ("fp32, batches of 4, side by side", "fp32", 4, True),
    ("fp32, batches of 8, side by side (runs)", "fp32", 8, True),
    ("fp32, batches of 16, side by side", "fp32", 16, True),
    ("weight-only int8, batches of 32", "weight-only", 32, False),
]


def dump_texts(wiki: Path, n: int) -> list[str]:
    """``n`` distinct texts the build embeds, sampled with a fixed seed from the first pages."""
    texts: dict[str, str] = {}
    with WikiDB(wiki) as db:
        for _, page_id, data in db.rows(limit=3000):
            for element in parse_page(page_id, data).elements:
                texts.setdefault(element.vector_key, element.embed_text)
    return random.Random(0).sample(list(texts.values()), min(n, len(texts)))


def retrieval_set(wiki: Path, n: int) -> tuple[list[str], list[str], list[set[int]]]:
    """The first ``n`` FEVEROUS-S dev claims with gold sentences, every sentence of their gold
    pages (as the index embeds them), and each claim's gold sentences as indices into those."""
    records = [json.loads(line) for line in (MINI / "feverous_s_dev.jsonl").open()]
    records = [r for r in records if r.get("claim") and r.get("evidence")][:n]
    pages = sorted({e.split("_sentence_")[0] for r in records for g in r["evidence"]
                    for e in g["content"] if "_sentence_" in e})  # fmt: skip
    texts, where = [], {}
    with WikiDB(wiki) as db:
        for page in pages:
            data = db.page_json(page)
            for element in parse_page(page, data).elements if data else []:
                if element.type == ElementType.SENTENCE:
                    where[element.id] = len(texts)
                    texts.append(element.embed_text)
    gold = [{where.get(e, -1) for g in r["evidence"] for e in g["content"]} for r in records]
    return [r["claim"] for r in records], texts, gold


def embedder(
    graphs: Path, graph: str, batch: int, side_by_side: bool
) -> Callable[[list[str]], np.ndarray]:
    """Vectors of texts as the runtime makes them (its own batching, on one session of the
    machine's threads or side by side, one core each), on the graph ``graph`` of ``graphs``."""
    model = OnnxModel(
        graphs, Execution("cpu"), graph=graph, tokenizer=TOKENIZER_FILE, side_by_side=side_by_side
    )
    tokenizer = model.tokenizer(128)
    return lambda texts: model.run_encodings(tokenizer.encode_batch(texts), batch, _mean_pooled)


def embedder_graphs(
    context: Context, *, texts: int = 1000, claims: int = 200, rounds: int = 2
) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        wiki = context.dump(Path(tmp))
        graphs = Path(tmp) / "graphs"  # every graph beside the tokenizer, as a model directory
        graphs.mkdir()
        for name in (INT8_FILE, TOKENIZER_FILE):
            shutil.copyfile(default_model_dir() / name, graphs / name)
        names = {"int8": INT8_FILE, "fp32": "fp32.onnx", "weight-only": "weight-only.onnx"}
        dequantize(graphs / INT8_FILE, graphs / names["fp32"])
        quantize_weights(graphs / names["fp32"], graphs / names["weight-only"])
        sample = dump_texts(wiki, texts)
        tokens = sum(len(e.ids) for e in load_tokenizer(max_length=128).encode_batch(sample))
        queries, sentences, gold = retrieval_set(wiki, claims)
        ways = {name: embedder(graphs, names[g], batch, sbs) for name, g, batch, sbs in WAYS}
        seconds = {name: float("inf") for name in ways}
        vectors: dict[str, np.ndarray] = {}
        for round_ in range(rounds):
            for name in list(ways)[round_ % len(ways) :] + list(ways)[: round_ % len(ways)]:
                started = time.perf_counter()
                vectors[name] = ways[name](sample)
                seconds[name] = min(seconds[name], time.perf_counter() - started)
        reference = vectors["fp32, batches of 32"]
        # A text alone, then among long and short neighbours, in one batch of 32.
        by_length = sorted(sample, key=len)
        probes, neighbours = sample[:8], by_length[-12:] + by_length[:12]
        figures: dict = {"texts": len(sample), "tokens": tokens, "claims": len(queries),
                         "sentences": len(sentences), "ways": {}}  # fmt: skip
        for name, embed in ways.items():
            alone = np.concatenate([embed([t]) for t in probes])
            batch = embed([*neighbours[:12], *probes, *neighbours[12:]])[12:20]
            cosine = np.sum(vectors[name] * reference, axis=1)
            q, s = embed(queries), embed(sentences)
            top5 = np.argsort(-(q @ s.T), axis=1)[:, :5]
            found = np.mean([g <= set(row) for g, row in zip(gold, top5.tolist(), strict=True)])
            figures["ways"][name] = {
                "tokens_per_s": round(tokens / seconds[name]),
                "cosine_mean": round(float(cosine.mean()), 5),
                "cosine_min": round(float(cosine.min()), 5),
                "alone_vs_batch_max_abs": float(np.abs(alone - batch).max()),
                "gold_top5": round(float(found), 4),
            }
    print(f"{figures['texts']} dump texts ({tokens:,} tokens); retrieval: {figures['claims']} "
          f"FEVEROUS-S claims over {figures['sentences']:,} sentences")  # fmt: skip
    print(f"{'way':42} {'tokens/s':>9} {'cos mean':>9} {'cos min':>8} {'alone-batch':>12} "
          f"{'gold top 5':>10}")  # fmt: skip
    for name, w in figures["ways"].items():
        print(f"{name:42} {w['tokens_per_s']:9,d} {w['cosine_mean']:9.5f} {w['cosine_min']:8.4f} "
              f"{w['alone_vs_batch_max_abs']:12.2e} {w['gold_top5']:10.1%}")  # fmt: skip
    return figures
