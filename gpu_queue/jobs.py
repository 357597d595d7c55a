"""The queue's jobs, in priority order, and the pairs each learns from.

* ``ranker``: the evidence ranker (FM2 complete-evidence recall 0.655 held out: a third of FM2
  verdicts are read without their evidence). A cross-encoder teacher learns (claim, sentence)
  relevance from the training claims' gold sentences against the candidates the pipeline
  retrieved for them (the hard negatives) and other claims' gold; it then scores every
  candidate of every training claim, and two students learn those scores: all six layers of
  MiniLM (recall) and three (speed).
* ``reader``: the verdict's reader, second version: the first job's pairs plus the
  person-attribute claims (a changed profession or nationality, a shifted year: the classes
  the first student got wrong), its teacher continuing from the shipped large reader when its
  weights are given (validation still rose at its 4th epoch), a MiniLM student.

Held out, as every trainer of the package holds out: a seeded 35 % of the claims by claim id
(seed 13), the split the shipped models and the benchmarks share; ``valid`` (8 % of the training
claims, by claim id) chooses the epochs on the GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from feverous_es.eval.claims import LABELS
from feverous_es.retrieve.selection import SENTENCE_BUDGET
from feverous_es.training import datasets
from feverous_es.training.rerank.data import build_groups, kind_of
from feverous_es.training.retrieved import Retrieved
from feverous_es.training.verdict import entailment_data as data
from feverous_es.training.verdict.pairs import is_valid
from gpu_queue.spec import Job, Model, Settings

RELEVANT = ("relevant",)  # a ranker's one output


# ----------------------------------------------------------------------------- readers


def reader_roles(
    pairs: Sequence[data.Pair], train: Sequence[data.Pair], seed: int
) -> list[dict[str, Any]]:
    """Each verdict pair with its role: ``valid`` (the training pool's validation claims),
    ``train`` (the rest of the pool), ``held`` (held out and read by the verdict: reported
    only), ``distill`` (any other pair not held out, nor of a validation claim)."""

    def valid(p: data.Pair) -> bool:
        return is_valid(seed, p.source, p.id)

    pooled = {p.key for p in train}
    roles = [("valid" if valid(p) else "train", p) for p in train]
    roles += [("held", p) for p in pairs if p.held_out and p.train]
    roles += [
        ("distill", p) for p in pairs
        if not p.held_out and p.key not in pooled and not valid(p)
    ]  # fmt: skip
    return [
        {"role": role, "key": p.key, "source": p.measured_as, "claim": p.claim,
         "premise": p.premise, "label": p.label}
        for role, p in roles
    ]  # fmt: skip


def reader_job(
    pairs: Sequence[data.Pair], train: Sequence[data.Pair], *, seed: int, max_length: int,
    from_teacher: bool, options: dict[str, Any],
) -> Job:  # fmt: skip
    """The reader v2 job: every pair of the verdict's training (``train``: its pool); the
    teacher continues from the shipped large reader (``from_teacher``: 2 epochs at a lower rate)
    or starts from all-mpnet-base-v2 (4 epochs)."""
    teacher = Settings(max_length=max_length, seed=seed)
    if from_teacher:
        teacher = replace(teacher, epochs=2, learning_rate=1e-5)
    # 3 epochs, not the first job's 4 (its student gained 0.7 validation points at the 4th): the
    # queue's three jobs fit one lend so.
    student = Settings(epochs=3, learning_rate=8e-5, max_length=max_length,
                       freeze_embeddings=True, seed=seed)  # fmt: skip
    return Job(
        "reader", tuple(LABELS), reader_roles(pairs, train, seed),
        Model("verdict-large" if from_teacher else "mpnet", teacher),
        (Model("minilm", student, "student"),),
        about="the verdict's reader, second version", options=options,
    )  # fmt: skip


# ----------------------------------------------------------------------------- the ranker


def ranker_pairs(pools: Sequence[Retrieved], *, seed: int, holdout: float) -> list[dict]:
    """The ranker's pairs: ``train``, the teacher's groups (each training claim's gold sentence,
    its 4 best-ranked non-gold candidates, 2 other claims' gold sentences); ``distill``, every
    other sentence candidate of the training claims; ``valid`` and ``held``, every sentence
    candidate of the validation and held-out claims, labelled 1 when gold (their recall is
    measured over them)."""
    train_pools, held_pools = datasets.split(pools, seed, holdout)
    valid_pools = [p for p in train_pools if is_valid(seed, p.source, p.id)]
    teacher_pools = [p for p in train_pools if not is_valid(seed, p.source, p.id)]
    pairs: list[dict[str, Any]] = []
    taken = set()
    for group in build_groups(teacher_pools, "sentences", seed=seed):
        for n, text in enumerate(group.texts):
            key = (group.source, group.claim_id, group.ids[n])
            taken.add(key)
            pairs.append(_pair("train", group.source, group.claim_id, group.claim, text, n == 0))
    for role, chosen in (("distill", teacher_pools), ("valid", valid_pools), ("held", held_pools)):
        for pool in chosen:
            gold = pool.gold_ids()
            for candidate in pool.ranked:
                key = (pool.source, pool.id, candidate["id"])
                if kind_of(candidate["type"]) != "sentences" or key in taken:
                    continue
                taken.add(key)
                pairs.append(_pair(role, pool.source, pool.id, pool.claim,
                                   candidate["linearized"], candidate["id"] in gold))  # fmt: skip
    return pairs


def _pair(role: str, source: str, claim_id: str, claim: str, text: str, gold: bool) -> dict:
    return {"role": role, "group": f"{source}/{claim_id}", "source": source, "claim": claim,
            "premise": text, "label": int(gold)}  # fmt: skip


def ranker_job(
    pools: Sequence[Retrieved], *, seed: int, holdout: float, options: dict[str, Any]
) -> Job:
    """The ranker job: an all-mpnet-base-v2 teacher, students of 6 and 3 MiniLM layers."""
    teacher = Settings(epochs=2, max_length=128, seed=seed, temperature=1.0)
    # 2 epochs: the students learn the teacher's scores of every candidate, 5x the teacher's pairs.
    student = Settings(epochs=2, learning_rate=8e-5, max_length=128, freeze_embeddings=True,
                       seed=seed, temperature=1.0)  # fmt: skip
    return Job(
        "ranker", RELEVANT, ranker_pairs(pools, seed=seed, holdout=holdout),
        Model("mpnet", teacher),
        (Model("minilm", student, "student"), Model("minilm", student, "student-3", layers=3)),
        recall_at=SENTENCE_BUDGET, about="the sentence evidence ranker", options=options,
    )  # fmt: skip


def claim_files(data_dir: Path) -> dict[str, Path]:
    """The data folder's claim and pair files the jobs read (the data README's layout)."""
    mini, nli = data_dir / "minifeverous", data_dir / "nli"
    return {
        "fm2": mini / "fm2_dev.jsonl",
        "feverous_s": mini / "feverous_s_dev.jsonl",
        "tabfact": mini / "tabfact_dev.jsonl",
        "tabfact_train": mini / "tabfact_train.jsonl",
        "text_pairs": nli / "text_pairs.jsonl.gz",
        "table_pairs": nli / "table_pairs.jsonl.gz",
    }
