"""Single signals that rank every table, alone and added to the table score: Hits@1/5/10/50/100.

    run = "bench.table_signals:table_signals"   # on the mini dump (--wiki) and its index
    # (--index); options: train_dense, dense_out, test, seed

Issue 33 asks whether a signal beyond the candidate stage's BM25 parts finds the gold table of a
TabFact claim. This ranks all tables of the dump (a table's text: its page title, caption and
rows, cells joined by " ; ", rows by " | ") for ``test`` ``tabfact_dev`` claims (drawn with
``seed``; 303 is the draw docs/log/table-retrieval-2026-11.md reports) by:

* word TF-IDF over the claim (scikit-learn; unigrams, uni+bigrams, bi+trigrams): the
  query-level retrieval of Schlichtkrull et al. 2021, Table 1, without its gold entity spans;
* with ``train_dense = N``, a dense bi-encoder fine-tuned from all-MiniLM-L6-v2 on ``N``
  ``tabfact_train`` claims (DPR-style: in-batch negatives plus one hard negative a claim drawn
  from the three best other tables by the index's whole-table BM25; no two claims of one table in
  a batch; one epoch, batch 32, 128 tokens of table text, lr 3e-5, mean pooling; saved to
  ``dense_out`` when given), read alone and fused into the candidate stage's table score as
  ``score + w * (cosine - the pool's best cosine)``.

Needs scikit-learn, and torch with transformers for the dense part (``pip install
'feverous-es[export]'``).
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.context import Context
from bench.data import MINI
from feverous_es.eval.samples import gold_table, table_claims
from feverous_es.index.backends import open_store
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.index.store import Store, TableKey
from feverous_es.plugins.interfaces import PluginContext, Query
from feverous_es.retrieve.candidates import PapeloCandidates
from feverous_es.training.bases import minilm_dir

DEPTHS = (1, 5, 10, 50, 100)
FUSION_WEIGHTS = (0.25, 0.5, 1.0, 2.5)
BATCH, TABLE_TOKENS, CLAIM_TOKENS, LEARNING_RATE = 32, 128, 48, 3e-5


def table_texts(wiki_db: Path) -> dict[TableKey, str]:
    """Every table of the dump as one text: title, caption (if any), rows."""
    texts: dict[TableKey, str] = {}
    with WikiDB(wiki_db) as db:
        for _, title, data in db.rows():
            page = json.loads(data)
            for name in page.get("order", []):
                if not name.startswith("table_"):
                    continue
                table = page[name]
                rows = [" ; ".join(cell["value"] for cell in row) for row in table["table"]]
                head = [title, table["caption"]] if table.get("caption") else [title]
                texts[(title, int(name.removeprefix("table_")))] = " | ".join(head + rows)
    return texts


def hits_of(scores: np.ndarray, gold_columns: list[int]) -> dict[str, float]:
    """Hits@k of the gold column of each row of ``scores`` (claims x tables)."""
    gold = scores[np.arange(len(gold_columns)), gold_columns]
    ranks = (scores > gold[:, None]).sum(axis=1)
    return {str(k): round(100 * float((ranks < k).mean()), 1) for k in DEPTHS}


def tfidf_hits(texts: list[str], claims: list[str], gold: list[int]) -> dict[str, Any]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    out = {}
    for low, high in ((1, 1), (1, 2), (2, 3)):
        vectorizer = TfidfVectorizer(ngram_range=(low, high), sublinear_tf=True, dtype=np.float32)
        tables = vectorizer.fit_transform(texts)
        scores = (vectorizer.transform(claims) @ tables.T).toarray()
        out[f"word TF-IDF ({low},{high})-grams"] = hits_of(scores, gold)
    return out


class BiEncoder:
    """Mean-pooled, normalized MiniLM embeddings, trainable (torch, transformers)."""

    def __init__(self, path: Path) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path)

    def forward(self, texts: list[str], max_length: int) -> Any:
        batch = self.tokenizer(
            texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        )
        hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1)
        return self.torch.nn.functional.normalize(pooled, dim=-1)

    def encode(self, texts: list[str], max_length: int) -> np.ndarray:
        self.model.eval()
        with self.torch.inference_mode():
            batches = (texts[i : i + 128] for i in range(0, len(texts), 128))
            return np.concatenate([self.forward(b, max_length).numpy() for b in batches])

    def train(self, triples: list[tuple[str, str, str]]) -> None:
        """One epoch of in-batch softmax (scale 20) over (claim, gold, hard negative) batches."""
        torch = self.torch
        batches = [triples[i : i + BATCH] for i in range(0, len(triples), BATCH)]
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=LEARNING_RATE)
        warm = max(1, len(batches) // 10)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lambda s: min((s + 1) / warm, max(0.0, (len(batches) - s) / (len(batches) - warm))),
        )
        self.model.train()
        started = time.perf_counter()
        for step, batch in enumerate(batches, 1):
            claims = self.forward([c for c, _, _ in batch], CLAIM_TOKENS)
            tables = self.forward([g for _, g, _ in batch] + [n for _, _, n in batch], TABLE_TOKENS)
            loss = torch.nn.functional.cross_entropy(
                20 * claims @ tables.T, torch.arange(len(batch))
            )
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            if step % 25 == 0:
                spent = time.perf_counter() - started
                print(f"dense: step {step}/{len(batches)}, loss {loss.item():.3f}, {spent:.0f} s",
                      file=sys.stderr)  # fmt: skip


def training_triples(
    store: Store, texts: dict[TableKey, str], records: list[dict[str, Any]]
) -> list[tuple[str, str, str]]:
    """(claim, gold table, hard negative) in batches where no table is gold twice."""
    rng = random.Random(0)
    rows = []
    for record in records:
        gold = gold_table(record)
        others = [k for k, _ in store.search_tables(record["claim"], 6) if k != gold and k in texts]
        if gold in texts and others:
            rows.append((record["claim"], gold, rng.choice(others[:3])))
    rng.shuffle(rows)
    ordered: list[tuple[str, str, str]] = []
    while rows:  # each batch takes claims of distinct tables; the others wait for a later one
        batch, rest, seen = [], [], set()
        for row in rows:
            if row[1] in seen or len(batch) == BATCH:
                rest.append(row)
            else:
                batch.append(row)
                seen.add(row[1])
        ordered += [(claim, texts[gold], texts[other]) for claim, gold, other in batch]
        rows = rest
    return ordered


def fused_hits(
    stage: PapeloCandidates, claims: list[str], golds: list[TableKey], cosine: Any
) -> dict[str, Any]:
    """The stage's table order, and the same pools ordered by score + w * cosine gap."""
    pools = []
    for claim in claims:
        scores, _ = stage.table_scores(Query(claim, np.zeros(stage.store.dim, np.float32)))
        pools.append(scores)
    out = {}
    for weight in (0.0, *FUSION_WEIGHTS):
        found = dict.fromkeys((1, 5, 10), 0)
        for i, (scores, gold) in enumerate(zip(pools, golds, strict=True)):
            cos = {key: cosine(i, key) for key in scores}
            top = max(cos.values(), default=0.0)
            fused = {key: s + weight * (cos[key] - top) for key, s in scores.items()}
            order = sorted(fused, key=lambda key: fused[key], reverse=True)
            for at in found:
                found[at] += gold in order[:at]
        name = "stage score" if weight == 0 else f"stage score + {weight} x cosine"
        out[name] = {str(at): round(100 * n / len(golds), 1) for at, n in found.items()}
    return out


def table_signals(
    context: Context,
    *,
    train_dense: int = 0,
    dense_out: str | None = None,
    test: int = 1000,
    seed: int = 303,
) -> dict[str, Any]:
    """Each signal's gold-table Hits over every table of the driver's --wiki, and fused into the
    stage's pool over its --index, on ``test`` tabfact_dev claims drawn with ``seed``; with
    ``train_dense`` claims, the fine-tuned bi-encoder too (saved at ``dense_out`` when given)."""

    texts = table_texts(context.place("wiki"))
    keys = list(texts)
    column = {key: i for i, key in enumerate(keys)}
    records = table_claims(MINI / "tabfact_dev.jsonl", test, seed)
    claims = [r["claim"] for r in records]
    golds = [gold_table(r) for r in records]
    gold_columns = [column[g] for g in golds]
    report: dict[str, Any] = {"tables": len(keys), "claims": len(claims), "seed": seed}
    report["alone"] = tfidf_hits([texts[k] for k in keys], claims, gold_columns)
    if train_dense:
        store = open_store("embedded", str(context.place("index")))
        train = table_claims(MINI / "tabfact_train.jsonl", train_dense, 7)
        encoder = BiEncoder(minilm_dir())
        started = time.perf_counter()
        encoder.train(training_triples(store, texts, train))
        report["dense_training_s"] = round(time.perf_counter() - started)
        if dense_out:
            encoder.model.save_pretrained(dense_out)
            encoder.tokenizer.save_pretrained(dense_out)
        table_vectors = encoder.encode([texts[k] for k in keys], TABLE_TOKENS)
        claim_vectors = encoder.encode(claims, CLAIM_TOKENS)
        dense = claim_vectors @ table_vectors.T
        report["alone"]["fine-tuned bi-encoder"] = hits_of(dense, gold_columns)
        stage = PapeloCandidates(PluginContext(store, None, "cpu"))
        report["fused"] = fused_hits(stage, claims, golds, lambda i, key: dense[i, column[key]])
    for what, hits in (("alone, over every table", report["alone"]),
                       ("in the stage's pool", report.get("fused", {}))):  # fmt: skip
        if hits:
            print(f"gold-table Hits@{' / '.join(next(iter(hits.values())))}, {what}:")
            for name, at in hits.items():
                print(f"  {name:<40} {' / '.join(f'{v:.1f}' for v in at.values())}")
    return report
