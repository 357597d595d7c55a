"""``feverous-es train …``: the training commands (torch is imported only when one runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from feverous_es.console import console, print_json, user_errors
from feverous_es.export.cli import int8_option
from feverous_es.params import EXISTING_FILE, EXISTING_FOLDER
from feverous_es.training import UNSHIPPED
from feverous_es.training.features import options as features_options
from feverous_es.training.hop import options as hop_options
from feverous_es.training.install import GROUNDING_ROLE, ROLES
from feverous_es.training.options import (
    command_line,
    export_options,
    training_options,
    training_run,
    work_dir,
)
from feverous_es.training.rerank import options as rerank_options
from feverous_es.training.verdict import nei as nei_training
from feverous_es.training.verdict import options as verdict_options
from feverous_es.verdict.readers import DEFAULT_READER, READERS


@click.group(
    "train",
    epilog="Trainers of models the package does not ship: "
    + "; ".join(f"{name} ({what})" for name, what in UNSHIPPED.items())
    + ".",
)
def train_group() -> None:
    """Train the pipeline's models (needs the `export` extra: torch, transformers, optimum)."""


@train_group.command("verdict")
@training_options(verdict_options.RunOptions)
def verdict_command(options: verdict_options.RunOptions) -> None:
    """Train the entailment verdict (SUPPORTS / REFUTES / NOT ENOUGH INFO), export it to int8.

    Collects retrieved evidence for the claims (cached in WORK/evidence.jsonl), builds the
    training pairs (WORK/pairs.jsonl.gz), trains the model (checkpoints in WORK, so a rerun
    resumes; --device cuda trains on a GPU), exports it, checks ONNX against torch, and prints
    the held-out accuracy per source.

    On a GPU: `python -m gpu_queue bundle` prepares the reader job among the queue's, and
    --from-gpu takes the student it returns (docs/gpu-training.md).
    """
    from feverous_es.training.verdict.command import run as train_verdict

    with training_run(options.work) as progress:
        report = train_verdict(options, progress)
    assert report is not None
    _echo_summary(options.out, report)


@train_group.command("verdict-nei")
@training_options(nei_training.RunOptions)
def verdict_nei_command(options: nei_training.RunOptions) -> None:
    """Train the model the verdict's NOT ENOUGH INFO call reads, export it to int8.

    Retrieves each training claim's evidence as it is, with its gold pages hidden and with an
    invented subject (cached in WORK/nei-premises.jsonl), fine-tunes the start (--from-gpu's
    student, or --base) on the premises the verdict reads labelled with the claim's label
    (as is) or NOT ENOUGH INFO, beside --replay NLI pairs (checkpoints in WORK: a rerun
    resumes), exports the int8 model. Then `train install OUT --as verdict-nei`.
    """
    with training_run(options.work) as progress:
        report = nei_training.run(options, progress)
    assert report is not None
    print_json({"out": str(options.out), "kinds": report["kinds"],
                "parity": report["export"]["parity"], "model_bytes": report["export"]["bytes"],
                "training_seconds": report["training"]["seconds"]})  # fmt: skip


def _echo_summary(out: Path, report: dict[str, Any]) -> None:
    """A verdict training's result on stdout: where, held-out accuracy, parity, size, time."""
    summary = {
        "out": str(out),
        "holdout_accuracy": report["holdout_accuracy"],
        "parity": report["export"]["parity"],
        "model_bytes": report["export"]["bytes"],
        "training_seconds": report["training"]["seconds"],
    }
    print_json(summary)


def _train_feature_verdict(options: features_options.RunOptions) -> None:
    from feverous_es.training.features.command import run as train_feature_verdict

    with training_run(options.work) as progress:
        report = train_feature_verdict(options, progress)
    _echo_summary(options.out, report)


@train_group.command("table-verdict")
@training_options(features_options.TableRunOptions)
def table_verdict_command(options: features_options.RunOptions) -> None:
    """Train the table-claim verdict on claim-against-table features, export it to ONNX.

    Reads each claim against its gold table from the index, fits a gradient-boosted classifier
    (seconds), exports it for ONNX Runtime, checks it against scikit-learn and prints the
    held-out label accuracy per claim file (on the gold table).
    """
    _train_feature_verdict(options)


@train_group.command("verdict-large")
@click.option(
    "--from-gpu", "weights", required=True,
    type=EXISTING_FOLDER,
    help="The teacher fetched from the GPU machine (int8-rows parts and SHA256SUMS).",
)  # fmt: skip
@click.option(
    "--job", required=True, type=EXISTING_FOLDER,
    help="The same GPU job's results (report.json: the device, seconds, held-out accuracy).",
)  # fmt: skip
@click.option(
    "--student", required=True, type=EXISTING_FOLDER,
    help="The student that job distilled, as `train verdict --from-gpu` wrote it (its claims "
    "split is the teacher's).",
)  # fmt: skip
@export_options
@int8_option("weight-only")
def verdict_large_command(
    weights: Path, job: Path, student: Path, out: Path, work: Path | None, int8_recipe: str
) -> None:
    """Take the GPU job's teacher as the large reader: read its weights back, export them
    (parity against torch), write the card; then `train install OUT --as verdict-large`."""
    from feverous_es.training.verdict.teacher import take_teacher

    with user_errors(), console.status(f"reading back and exporting {weights}"):
        report = take_teacher(
            weights, job, student, out, work_dir(out, work), int8_recipe=int8_recipe,
            command=command_line(click.get_current_context()),
        )  # fmt: skip
    print_json({"out": str(out), "export": report["export"], "read_back": report["read_back"]})


@train_group.command("grounding")
@click.argument("data", type=EXISTING_FILE, nargs=-1, required=True)
@click.option(
    "--reader-dir", type=EXISTING_FOLDER, default=None,
    help="A reader's model directory (a `train verdict` output) to choose for. Default: the "
    "package's --reader.",
)  # fmt: skip
@click.option(
    "--reader", type=click.Choice(list(READERS)), default=DEFAULT_READER, show_default=True,
    help="The package's reader whose settings are chosen.",
)  # fmt: skip
@click.option(
    "--window-words", type=click.IntRange(min=10), multiple=True,
    help="Window sizes tried (repeat; default 80, 120, 200 words).",
)  # fmt: skip
@click.option(
    "--out", type=click.Path(path_type=Path), required=True,
    help="Directory to write grounding.json to (never the installed package's: `feverous-es "
    "train install OUT --as grounding` stores it with the reader).",
)  # fmt: skip
def grounding_command(
    data: tuple[Path, ...], reader_dir: Path | None, reader: str, window_words: tuple[int, ...],
    out: Path,
) -> None:  # fmt: skip
    """Choose a reader's grounding settings on DATA files (WiCE's layout: doc, claim, label 1 =
    supported; .jsonl or .jsonl.gz) for `entail` and every other entry point (stored with the
    reader by `train install OUT --as grounding`): the window size, how many windows a claim
    reads (the closest by shared words, or all) and the P(SUPPORTS) of the best window at which
    a claim is supported. The setting with the highest mean balanced accuracy over the files
    (two-fold: the threshold chosen on the other half of every file) wins among those that keep
    five claims against a 1,000-word source within 1 s on this machine; its threshold is then
    chosen on all pairs."""
    from functools import partial

    from feverous_es.console import progress_bars
    from feverous_es.training.grounding import read_grounding_pairs, write_settings
    from feverous_es.training.grounding_settings import (
        WINDOW_SIZES,
        compare_settings,
        score_windows,
        stored_settings,
    )
    from feverous_es.verdict.entailment import EntailmentModel

    with user_errors():
        sets = {path.name: read_grounding_pairs(path) for path in data}
        model = EntailmentModel(reader_dir or reader)
        sizes = window_words or WINDOW_SIZES
        scored: dict[int, dict] = {size: {} for size in sizes}
        with progress_bars() as update:
            for size in sizes:
                for name, pairs in sets.items():
                    bar = partial(update, f"{name}, {size}-word windows")
                    scored[size][name] = score_windows(model, pairs, size, bar)
        chosen = compare_settings(scored)[0]
        settings = stored_settings(chosen, {name: len(pairs) for name, pairs in sets.items()})
        written = write_settings(
            out, settings, str(reader_dir or reader), command_line(click.get_current_context())
        )
    print_json({"reader": str(reader_dir or reader), "out": str(written), **settings})


@train_group.command("install")
@click.argument("model_dir", type=EXISTING_FOLDER)
@click.option(
    "--as",
    "role",
    required=True,
    type=click.Choice([*ROLES, GROUNDING_ROLE]),
    help="Which of the package's models MODEL_DIR replaces (grounding: a `train grounding` "
    "output's settings, stored with the reader they were chosen for).",
)  # fmt: skip
def install_command(model_dir: Path, role: str) -> None:
    """Make MODEL_DIR (a `train` output) the installed package's ROLE model.

    Checks that it loads as that model, then replaces the package's one with one rename: a
    reader never sees half a model, and a failed copy leaves the old one whole. Training itself
    never writes into the package.
    """
    from feverous_es.training.grounding import install_settings
    from feverous_es.training.install import install_packaged

    with user_errors():
        if role == GROUNDING_ROLE:
            out = install_settings(model_dir)
        else:
            out = install_packaged(model_dir, role)
    print_json({"installed": str(out), "from": str(model_dir)})


@train_group.command("rerank")
@training_options(rerank_options.RunOptions)
def rerank_command(options: rerank_options.RunOptions) -> None:
    """Fine-tune the evidence rankers (Malon 2021, §3), export them to int8 ONNX.

    For each gold element of a training claim, a group of 7 (claim, element) pairs: the gold
    element, the 4 best non-gold candidates of its kind from the pipeline's candidate stage
    (cached in WORK/candidates.jsonl) and 2 gold elements of other claims, trained with cross
    entropy over the group. Writes OUT/cells and OUT/sentences (the cross-encoder reranker's
    cell_model and model options) with a model card, and prints the held-out MRR.

    --teacher DIR --layers 3 makes a smaller ranker of an exported one (e.g. the packaged
    sentence ranker): the student keeps 3 of its layers and learns its scores; ship it where
    held-out recall holds (python -m bench run sentence-ranker --option 'against=["STUDENT"]').
    """
    from feverous_es.training import bases
    from feverous_es.training.rerank import fit as tr

    with training_run(options.work) as progress:
        options.check()
        if options.settings.teacher is None:  # a student starts from its teacher's weights
            options.settings.base = bases.resolve_base(options.settings.base)
        reports = tr.run(options, progress)
    assert reports is not None
    summary = {
        name: {
            "out": report["out"],
            "holdout_groups": report["holdout_groups"],
            "holdout_pool_recall": report["holdout_pool_recall"],
            "parity_int8_max_abs_diff": report["export"]["parity"]["int8"]["max_abs_diff"],
            "training_seconds": report["training"]["seconds"],
        }
        for name, report in reports.items()
    }
    print_json(summary)


@train_group.command("hop")
@training_options(hop_options.RunOptions)
def hop_command(options: hop_options.RunOptions) -> None:
    """Train the next-hop generator (Malon 2021, §4) from a T5-style checkpoint, export to ONNX.

    Retrieves each claim's pages (cached in WORK/retrieved.jsonl), builds pairs of the hop
    plugin's input over a partial gold chain and the evidence still missing ("supports [Title]
    text", or "supports none"), fine-tunes (checkpoint in WORK, so a rerun resumes), exports
    for the seq2seq hop plugin, and prints held-out exact match and title recall.
    """
    from feverous_es.training.hop import fit as th

    with training_run(options.work) as progress:
        report = th.run(options, progress)
    assert report is not None
    summary = {
        "out": str(options.out),
        "pairs": report["pair_counts"],
        "holdout_metrics": report["holdout_metrics"].get("all", {}),
        "parity": report["export"]["parity"],
        "torch_agreement": report["torch_agreement"],
        "training_seconds": report["training"]["seconds"],
    }
    print_json(summary)
