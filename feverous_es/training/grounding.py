"""A reader's grounding threshold, chosen on labelled (source, claim) pairs and stored with it.

The pairs are WiCE's layout (``../shared/data/grounding/wice_dev.jsonl``): ``{"doc", "claim",
"label"}``, label 1 when the source supports the whole claim, 0 when it supports it partly or
not at all. Each claim is read against its whole source in windows
(:meth:`EntailmentModel.entail_many`) with no threshold, so its best window's P(SUPPORTS) is its
score; the threshold is the one that maximizes balanced accuracy (the mean of both labels'
recall: how grounding checkers are compared, LLM-AggreFact). ``train grounding`` writes it to
its ``--out`` as ``grounding.json`` (with the window size, the data and the figure, and in
``training.json`` the reader it was chosen for); ``train install OUT --as grounding`` stores it
beside that reader and refreshes the reader's manifest, so every entry point (CLI, API, HTTP)
applies it.

Pairs of one's own with long sources come from a FEVEROUS dump (:func:`long_source_pairs`): a
held-out claim's gold sentences placed among other pages' sentences, and that source again
without them.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import FormatError, MalformedPage
from feverous_es.eval.claims import REFUTES, SUPPORTS, ClaimRecord
from feverous_es.index.dump.page import parse_page
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.index.element_ids import element_to_triple
from feverous_es.index.elements import ElementType
from feverous_es.plugins.interfaces import Label
from feverous_es.runtime.files import MANIFEST_FILE, read_json_object, write_manifest
from feverous_es.verdict.entailment import EntailmentModel
from feverous_es.verdict.model_files import GROUNDING_FILE

CHUNK = 16  # claims read per call: a progress step
REPORT_FILE = "training.json"  # beside the settings: the reader they were chosen for
DISTRACTOR_PAGES = 2000  # pages whose sentences surround a claim's evidence in a long source


@dataclass(frozen=True)
class GroundingPair:
    source: str
    claim: str
    supported: bool


def read_grounding_pairs(path: Path) -> list[GroundingPair]:
    """The pairs of a WiCE-layout JSON-lines file (gzipped when it ends ``.gz``); a bad line is
    one error naming it."""
    pairs = []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                pairs.append(GroundingPair(row["doc"], row["claim"], int(row["label"]) == 1))
            except (ValueError, KeyError, TypeError) as error:
                raise FormatError(
                    f"{path}:{number}: not a {{doc, claim, label}} line ({error})"
                ) from None
    if not pairs:
        raise FormatError(f"{path} holds no pairs")
    return pairs


def support_scores(
    model: EntailmentModel,
    pairs: Sequence[GroundingPair],
    on_chunk: Callable[[int], None] = lambda done: None,
) -> np.ndarray:
    """Each pair's best window's P(SUPPORTS) (read with no threshold)."""
    # Every claim decided by its best window.
    threshold, model.threshold = model.threshold, 0.0
    single, model.threshold_single = model.threshold_single, None
    try:
        scores = []
        for start in range(0, len(pairs), CHUNK):
            chunk = pairs[start : start + CHUNK]
            answers = model.entail_many([(p.claim, [p.source]) for p in chunk])
            scores += [a.probabilities[Label.SUPPORTS] for a in answers]
            on_chunk(len(chunk))
    finally:
        model.threshold, model.threshold_single = threshold, single
    return np.array(scores)


def balanced_accuracy(supported: np.ndarray, predicted: np.ndarray) -> float:
    """The mean of the recall of supported and of unsupported pairs."""
    recalls = [np.mean(predicted[supported == side] == side) for side in (True, False)]
    return float(np.mean(recalls))


def best_threshold(scores: np.ndarray, supported: np.ndarray) -> tuple[float, float]:
    """The threshold on ``scores`` with the highest balanced accuracy (midway between two
    scores, so it does not sit on a pair), and that accuracy."""
    ordered = np.unique(scores)
    candidates = np.concatenate([[0.0], (ordered[1:] + ordered[:-1]) / 2, [1.0]])
    accuracies = [balanced_accuracy(supported, scores >= t) for t in candidates]
    best = int(np.argmax(accuracies))
    return float(candidates[best]), accuracies[best]


def write_settings(out: Path, settings: dict[str, Any], reader: str, command: str) -> Path:
    """``settings`` as ``out/grounding.json``, and the reader they were chosen for (a package
    reader's name or a reader directory) in ``out/training.json``; returns the settings file."""
    from feverous_es.training.common import check_out

    check_out(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / GROUNDING_FILE).write_text(json.dumps(settings, indent=2) + "\n", "utf-8")
    report = {"command": command, "reader": reader}
    (out / REPORT_FILE).write_text(json.dumps(report, indent=1) + "\n", "utf-8")
    return out / GROUNDING_FILE


def install_settings(out: Path) -> Path:
    """Store a ``train grounding`` output's settings beside the reader they were chosen for (a
    package reader: its first model's directory); returns that directory."""
    from feverous_es.errors import ModelError
    from feverous_es.verdict.readers import READERS, packaged_source_dir

    try:
        settings = read_json_object(out / GROUNDING_FILE)
        reader = str(read_json_object(out / REPORT_FILE)["reader"])
    except (OSError, KeyError, ValueError) as error:
        raise ModelError(f"{out} is not a `train grounding` output ({error})") from None
    target = packaged_source_dir(reader) if reader in READERS else Path(reader)
    if not target.is_dir():
        raise ModelError(f"the reader {reader} these settings were chosen for is not there")
    store_threshold(target, settings)
    return target


def store_threshold(model_dir: Path, settings: dict[str, Any]) -> None:
    """Write ``settings`` as the reader's ``grounding.json`` and list it in its manifest."""
    (model_dir / GROUNDING_FILE).write_text(json.dumps(settings, indent=2) + "\n", "utf-8")
    manifest_path = model_dir / MANIFEST_FILE
    if manifest_path.is_file():
        manifest = read_json_object(manifest_path)
        files = {**manifest.pop("files", {}), GROUNDING_FILE: None}
        write_manifest(model_dir, sorted(files), **manifest)


def _page_sentences(title: str, data: str) -> list[str]:
    try:
        elements = parse_page(title, data).elements
    except MalformedPage:
        return []
    return [e.text for e in elements if e.type is ElementType.SENTENCE and e.text.strip()]


def _gold_sentences(db: WikiDB, evidence: Sequence[str]) -> tuple[set[str], list[str]] | None:
    """The pages and, in page order, the texts of an evidence set, when it is sentences only and
    the dump holds them all."""
    if not evidence or not all("_sentence_" in e for e in evidence):
        return None
    triples = [element_to_triple(e) for e in evidence]
    texts = []
    for page, _, number in sorted(triples, key=lambda t: (t[0], int(t[2]))):
        data = db.page_json(page)
        if data is None:
            return None
        wanted = f"{page}_sentence_{number}"
        found = [e.text for e in parse_page(page, data).elements if e.id == wanted]
        if not found:
            return None
        texts.append(found[0])
    return {t[0] for t in triples}, texts


class LongSources:
    """Sources of about ``words`` words made of a claim's gold sentences and other pages'
    sentences (those of ``DISTRACTOR_PAGES`` pages spread over the dump), seeded by the claim."""

    def __init__(self, db: WikiDB, words: int, seed: int = 13) -> None:
        self.db, self.words, self.seed = db, words, seed
        self._pool = [
            (title, text)
            for _, title, data in db.spread_rows(DISTRACTOR_PAGES)
            for text in _page_sentences(title, data)
        ]

    def around(self, key: str, evidence: Sequence[str]) -> tuple[str, str] | None:
        """The source with the evidence set's sentences together at a seeded place among other
        pages' sentences, and the same source without them; None when the set is not sentences
        the dump holds."""
        gold = _gold_sentences(self.db, evidence)
        if gold is None:
            return None
        pages, texts = gold
        rng = random.Random(f"{self.seed}/{key}")
        others: list[str] = []
        count = sum(len(t.split()) for t in texts)
        while count < self.words:
            title, text = self._pool[rng.randrange(len(self._pool))]
            if title not in pages:
                others.append(text)
                count += len(text.split())
        place = rng.randrange(len(others) + 1)
        return " ".join([*others[:place], *texts, *others[place:]]), " ".join(others)


def long_source_pairs(
    records: Iterable[tuple[str, ClaimRecord]],
    db: WikiDB,
    *,
    words: int = 600,
    seed: int = 13,
) -> list[GroundingPair]:
    """Two pairs of each SUPPORTS / REFUTES ``(source, record)`` whose first gold evidence set
    is sentences the dump holds: the claim against a long source in which they sit among other
    pages' sentences (:class:`LongSources`; supported when the claim is SUPPORTS), and against
    the same source without them (not supported: the evidence is not there)."""
    sources = LongSources(db, words, seed)
    pairs = []
    for source, record in records:
        if record.label not in (SUPPORTS, REFUTES) or not record.evidence:
            continue
        made = sources.around(f"{source}/{record.id}", record.evidence[0])
        if made is not None:
            with_gold, without = made
            pairs.append(GroundingPair(with_gold, record.claim, record.label == SUPPORTS))
            pairs.append(GroundingPair(without, record.claim, False))
    return pairs
