"""``feverous-es train verdict-nei``: the model the verdict's NOT ENOUGH INFO call reads.

A reader trained on dev claims against the evidence retrieval found for them learns SUPPORTS or
REFUTES even where that evidence lacks the gold a third of the time, and says NOT ENOUGH INFO
about as often on a true claim as on one nothing in the index decides. This model is trained on
what tells the two apart, through the pipeline's own retrieval: each training claim (FM2,
FEVEROUS-S: its claims not held out) read against the evidence retrieved for it (its own label),
against the evidence retrieved with its gold pages hidden from the index
(:class:`~feverous_es.training.hidden_pages.HiddenPages`: NEI), with ``--facts-hidden`` for half
of them with only its gold sentences hidden (its subject's page found without the fact: NEI), and
for a third of them with its subject replaced by a name no page holds
(:mod:`~feverous_es.training.invented`: NEI), each
premise as the verdict reads it (the whole evidence's sentences, and the named page's alone);
beside NLI pairs replayed so its reading of other premises holds. It is fine-tuned from a
student (a GPU job's, ``--from-gpu``, or ``--base``) and exported to int8 for ``train install
OUT --as verdict-nei``. The retrieved premises are cached in WORK (a rerun resumes them).
"""

from __future__ import annotations

import json
import random
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feverous_es.eval.samples import gold_pages, gold_sentences
from feverous_es.params import EXISTING_FOLDER, PATH, option, option_like
from feverous_es.training import common, datasets, engine
from feverous_es.training.bases import resolve_base
from feverous_es.training.datasets import TrainingClaim
from feverous_es.training.hidden_pages import NOTHING, Hidden
from feverous_es.training.progress import QUIET, Progress
from feverous_es.training.verdict.entailment_data import nli_pairs
from feverous_es.training.verdict.evidence import read_labelled_claims

LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
PREMISES_FILE = "nei-premises.jsonl"  # each claim kind's premises, as retrieved (resumable)
AS_IS, HIDDEN, FACTS, INVENTED = "as is", "pages hidden", "facts hidden", "invented"


@dataclass
class TrainSettings(common.TrainSettings):
    max_length: int = option_like(common.TrainSettings, "max_length", 192)
    learning_rate: float = option_like(common.TrainSettings, "learning_rate", 2e-5)


@dataclass(kw_only=True)
class RunOptions(common.RunOptions):
    claims: list[Path] = option_like(
        common.RunOptions, "claims",
        help="FEVEROUS-format claim file with gold evidence (FM2, FEVEROUS-S dev): its claims "
        "not held out train; repeat for several.",
    )  # fmt: skip
    out: Path = option_like(
        common.RunOptions, "out", help="Model directory to write (never the installed package's)."
    )
    holdout: float = option_like(common.RunOptions, "holdout", 0.35)
    settings: TrainSettings = field(default_factory=TrainSettings)
    per_file: int = option(600, help="Training claims a claim file (a seeded sample).")
    from_gpu: Path | None = option(
        None, type=EXISTING_FOLDER,
        help="A GPU reader job's results (docs/gpu-training.md): its student is the start.",
    )  # fmt: skip
    pairs: Path | None = option(
        None, type=PATH, help="NLI pair file replayed beside the claims (nli/text_pairs.jsonl.gz)."
    )
    replay: int = option(2000, help="NLI pairs replayed (a seeded sample).")
    facts_hidden: bool = option(
        False,
        help="Half the claims also with only their gold sentences hidden (NEI). Off: the model "
        "it made read the nei condition's claims worse than the shipped one (docs/decisions.md).",
    )  # fmt: skip

    def check(self) -> None:
        """Refuse a start that is not one (``--from-gpu`` or ``--base``), resolve ``--base``."""
        super().check()
        if self.from_gpu is None:
            self.settings.base = resolve_base(self.settings.base)


@dataclass(frozen=True)
class NeiClaim:
    """A training claim as one kind reads it: its ``text`` (the subject changed, for an
    invented one), the label the kind gives it, and what is hidden from its retrieval."""

    kind: str
    of: TrainingClaim
    text: str
    label: str
    hidden: Hidden = NOTHING


def training_claims(options: RunOptions, store: Any) -> list[NeiClaim]:
    """Each file's sampled training claims as they are and with their gold pages hidden, half
    of them with their gold sentences hidden (``facts_hidden``), and a third of them with an
    invented subject."""
    from feverous_es.training.invented import invented_names, with_subject

    seed = options.settings.seed
    names = invented_names(store, seed)
    claims: list[NeiClaim] = []
    for path in options.claims:
        lines = [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines() if x]
        records = {str(r["id"]): r for r in lines if r.get("claim")}
        rows = [
            c for c in read_labelled_claims([Path(path)], limit=options.limit, seed=seed)
            if c.label in LABELS[:2]
            and not datasets.is_holdout(seed, c.source, c.id, options.holdout)
        ]  # fmt: skip
        rows = datasets.sample(rows, options.per_file, seed, key=lambda c: (c.source, c.id))
        for n, row in enumerate(rows):
            pages = sorted(gold_pages(records[row.id]))
            hidden = frozenset(unicodedata.normalize("NFD", p) for p in pages)
            claims.append(NeiClaim(AS_IS, row, row.claim, row.label))
            claims.append(NeiClaim(HIDDEN, row, row.claim, LABELS[2], Hidden(pages=hidden)))
            sentences = gold_sentences(records[row.id])
            if options.facts_hidden and sentences and n % 2 == 0:
                claims.append(
                    NeiClaim(FACTS, row, row.claim, LABELS[2], Hidden(elements=sentences))
                )
            changed = with_subject(row.claim, pages[0], next(names)) if pages else None
            if changed and n < len(rows) // 3:
                claims.append(NeiClaim(INVENTED, row, changed, LABELS[2]))
    return claims


def premises(options: RunOptions, progress: Progress) -> list[dict[str, Any]]:
    """Each training claim's sentence premises as the verdict reads them, retrieved through the
    pipeline (its gold pages or sentences hidden where the kind says); cached in WORK, resumed."""
    from feverous_es.index.backends import open_store
    from feverous_es.plugins.config import load_config
    from feverous_es.plugins.interfaces import PluginContext
    from feverous_es.training.hidden_pages import HiddenPages
    from feverous_es.verdict.feature_model import evidence_table
    from feverous_es.verdict.inputs import sentence_premise
    from feverous_es.verdict.premises import page_premises
    from feverous_es.verify.pipeline import LazyEmbedder, Pipeline

    cache = options.work / PREMISES_FILE
    done = {(r["kind"], r["source"], r["id"]): r for r in datasets.read_jsonl(cache)}
    view = HiddenPages(open_store(options.store, options.index))
    pipeline = Pipeline(load_config(None), PluginContext(view, LazyEmbedder(options.device)))
    counter = progress.counter("evidence")
    try:
        claims = training_claims(options, view)
        options.work.mkdir(parents=True, exist_ok=True)
        with cache.open("a", encoding="utf-8") as out:
            for n, claim in enumerate(claims):
                key = (claim.kind, claim.of.source, claim.of.id)
                if key not in done:
                    view.hidden = claim.hidden
                    evidence = pipeline.retrieve(claim.text).evidence
                    sentences = evidence_table(claim.text, evidence) is None
                    row = {"kind": claim.kind, "source": claim.of.source, "id": claim.of.id,
                           "claim": claim.text, "label": claim.label,
                           "premises": [sentence_premise(evidence),
                                        *page_premises(claim.text, evidence, 1)]
                           if sentences else []}  # fmt: skip
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    done[key] = row
                if counter:
                    counter(n + 1, len(claims))
    finally:
        pipeline.close()
    return list(done.values())


def run(options: RunOptions, progress: Progress = QUIET) -> dict[str, Any] | None:
    """Premises, pairs, the fine-tuning, the int8 export and the training report; None when
    ``progress.stop_after`` interrupted the training."""
    from feverous_es.export.exporter import export_int8_as_model
    from feverous_es.runtime.files import write_manifest
    from feverous_es.training.gpu_results import install_student

    options.check()
    settings = options.settings
    found = premises(options, progress)
    pairs = [(r["claim"], p, LABELS.index(r["label"])) for r in found for p in r["premises"] if p]
    if options.pairs is not None:
        replayed = [p for p in nli_pairs(options.pairs) if p.label in LABELS]
        chosen = random.Random(settings.seed).sample(replayed, min(options.replay, len(replayed)))
        pairs += [(p.claim, p.premise, LABELS.index(p.label)) for p in chosen]
    if options.from_gpu is not None:
        base = options.work / "base"
        if not (base / "model.safetensors").is_file():
            install_student(options.from_gpu, Path(__file__).parents[2] / "models" / "verdict",
                            base)  # fmt: skip
        settings.base = base
    torch = common.import_torch()
    tokenizer, model = common.load_model(torch, settings, LABELS)
    encoded = engine.encode_pairs(tokenizer, [(c, p) for c, p, _ in pairs], settings.max_length)
    labels = [label for *_, label in pairs]

    def batch_loss(items: list[int]) -> tuple[Any, int]:
        batch = engine.pad_batch(torch, [encoded[i] for i in items], tokenizer.pad_token_id)
        target = torch.tensor([labels[i] for i in items])
        loss = torch.nn.functional.cross_entropy(model(**batch).logits, target)
        return loss, int(batch["attention_mask"].sum())

    def train(steps: common.Steps) -> Path | None:
        if not common.fit(torch, model, settings, options.work, len(pairs), batch_loss, steps):
            return None
        return common.save_trained(model, tokenizer, options.work)

    trained, timing = common.timed_training(train, progress.steps())
    if trained is None:
        return None
    probe = [(c, p) for c, p, _ in pairs[:64]]
    exported = export_int8_as_model(trained, options.out, options.work, probe, settings.max_length)
    kinds = Counter(f"{row['kind']} / {row['source']}" for row in found)
    report = {
        **options.report(),
        "train_claims": [],
        "pairs": [Path(options.pairs).name] if options.pairs else [],
        "from_gpu": str(options.from_gpu or ""),
        "kinds": dict(kinds),
        "training": {"seed": settings.seed, "examples": len(pairs), "replayed": len(pairs)
                     - sum(len(r["premises"]) for r in found), "epochs_trained": settings.epochs,
                     "max_length": settings.max_length, "batch_size": settings.batch_size,
                     "learning_rate": settings.learning_rate, "math_hints": False,
                     "steps": settings.total_steps(len(pairs)), **timing},
        "export": exported,
    }  # fmt: skip
    (options.out / "training.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (options.out / "README.md").write_text(CARD, encoding="utf-8")
    write_manifest(options.out, [p.name for p in sorted(options.out.iterdir())
                                 if p.name != "manifest.json"])  # fmt: skip
    return report


CARD = """# verdict-nei

The model the verdict's NOT ENOUGH INFO call reads (`nei_model`): an all-MiniLM-L6-v2 student
(int8) trained to say NEI where the evidence retrieval hands the verdict does not bear on the
claim (its gold pages or sentences hidden from retrieval, or its subject replaced by a name no
page holds), and the claim's own label where retrieval read the index as it is. `training.json`
holds the command and its figures; docs/verdict.md says how the verdict reads it.
"""
