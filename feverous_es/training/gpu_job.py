"""The GPU job of the entailment verdict: a large teacher, its scores, a small student.

Run on a machine with a GPU, from a bundle that ``feverous-es train verdict --bundle DIR`` wrote
(docs/gpu-training.md has the procedure)::

    python3 job.py BUNDLE_DIR OUT_DIR

1. joins the base models' weight parts and checks every file's sha256 against ``job.json``;
2. fine-tunes the teacher (all-mpnet-base-v2) in bf16 on the training pairs (3-way: SUPPORTS /
   REFUTES / NOT ENOUGH INFO), measuring the validation pairs (a share of the training claims
   kept out) after each epoch and keeping the best epoch's weights; the held-out pairs are
   measured too, for the report only (no choice is made on them);
3. scores the distillation pool (the training pairs and every other non-held-out pair) with
   the teacher;
4. fine-tunes the student (all-MiniLM-L6-v2) on the pool with the teacher's soft labels
   (temperature ``T``, weight ``alpha``) plus the gold labels, again keeping the best epoch;
5. writes the student's weights (fp16, in files under the return limit), its config,
   ``report.json`` (seconds per phase, held-out accuracy of both models per source and epoch,
   the device and library versions) and, outside OUT, the teacher's weights in parts.

The same file runs on a CPU (fp32) for the dry run that tests it. It is self-contained on
purpose: it imports only the standard library, numpy, torch, safetensors and transformers,
so that the bundle, not the package, is all the GPU machine needs.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
CONFIG_FILE = "job.json"
REPORT_FILE = "report.json"
LOG_FILE = "log.txt"
STUDENT_CONFIG = "student-config.json"
STUDENT_PARTS = "student.safetensors"  # + ".00", ".01", …
TEACHER_SHARE = 0.55  # of budget_seconds, for the teacher's epochs
WRITE_SECONDS = 30  # kept at the end of the budget for writing the results


class Log:
    """Lines with the seconds since the start, to stdout (unbuffered) and to OUT/log.txt."""

    def __init__(self, path: Path) -> None:
        self.started = time.perf_counter()
        self.path = path

    def __call__(self, message: str) -> None:
        line = f"[{time.perf_counter() - self.started:7.1f}s] {message}"
        print(line, flush=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")


# ----------------------------------------------------------------------------- the bundle


def sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def check_files(bundle: Path, files: dict[str, str]) -> None:
    """Every file ``job.json`` lists is in the bundle with its sha256 (a missing transfer or a
    torn copy stops the job before any GPU work)."""
    for name, expected in files.items():
        path = bundle / name
        if not path.is_file():
            sys.exit(f"error: {path} is missing: was every transfer of the bundle sent?")
        if sha256(path) != expected:
            sys.exit(f"error: {path} does not match its sha256 in {CONFIG_FILE}: send it again")


def join_parts(bundle: Path, model: dict[str, Any], into: Path) -> Path:
    """A base model directory: its small files copied, its weight parts joined into
    ``model.safetensors`` (checked against the whole file's sha256)."""
    into.mkdir(parents=True, exist_ok=True)
    for name, target in model["files"].items():
        (into / target).write_bytes((bundle / name).read_bytes())
    weights = into / "model.safetensors"
    with weights.open("wb") as out:
        for part in model["parts"]:
            out.write((bundle / part).read_bytes())
    if sha256(weights) != model["weights_sha256"]:
        sys.exit(f"error: the joined weights of {model['name']} do not match their sha256")
    return into


def read_pairs(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The bundle's pairs by role: ``train`` (the teacher's), ``valid`` (chooses the epoch),
    ``held`` (only reported), ``distill`` (scored by the teacher for the student, besides
    ``train``)."""
    roles: dict[str, list[dict[str, Any]]] = {r: [] for r in ("train", "valid", "held", "distill")}
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            pair = json.loads(line)
            roles[pair["role"]].append(pair)
    return roles


# ----------------------------------------------------------------------------- training


class Trainer:
    """Fine-tuning and scoring of one sequence-classification model on one device."""

    def __init__(self, torch: Any, model_dir: Path, settings: dict[str, Any], device: str) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.torch = torch
        self.settings = settings
        self.device = device
        torch.manual_seed(settings["seed"])
        id2label = dict(enumerate(LABELS))
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForSequenceClassification.from_pretrained(
            model_dir, num_labels=len(LABELS), id2label=id2label,
            label2id={v: k for k, v in id2label.items()}, ignore_mismatched_sizes=True,
            torch_dtype=torch.float32,
        ).to(device)  # fmt: skip
        if settings.get("freeze_embeddings"):
            self.model.get_input_embeddings().weight.requires_grad_(False)

    def encode(self, pairs: Sequence[dict[str, Any]]) -> list[dict[str, list[int]]]:
        """Token ids of (claim, premise), the premise truncated as the ONNX runtime does (and,
        as there, both sides when the claim alone fills ``max_length``)."""
        try:
            return self._encode(pairs, "only_second")
        except Exception:  # tokenizers raises a plain Exception when a claim fills max_length
            return [row for pair in pairs for row in self._encode_one(pair)]

    def _encode_one(self, pair: dict[str, Any]) -> list[dict[str, list[int]]]:
        try:
            return self._encode([pair], "only_second")
        except Exception:
            return self._encode([pair], "longest_first")

    def _encode(
        self, pairs: Sequence[dict[str, Any]], truncation: str
    ) -> list[dict[str, list[int]]]:
        ids = self.tokenizer(
            [p["claim"] for p in pairs], [p["premise"] for p in pairs],
            truncation=truncation, max_length=self.settings["max_length"],
        )  # fmt: skip
        return [dict(zip(ids.keys(), row, strict=True)) for row in zip(*ids.values(), strict=True)]

    def batch(self, rows: Sequence[dict[str, list[int]]]) -> dict[str, Any]:
        width = max(len(r["input_ids"]) for r in rows)
        pad = self.tokenizer.pad_token_id or 0
        out = {}
        for key in rows[0]:
            fill = pad if key == "input_ids" else 0
            out[key] = self.torch.tensor([r[key] + [fill] * (width - len(r[key])) for r in rows])
        return {k: v.to(self.device, non_blocking=True) for k, v in out.items()}

    def autocast(self) -> Any:
        on_gpu = self.device.startswith("cuda")
        return self.torch.autocast(
            device_type="cuda" if on_gpu else "cpu", dtype=self.torch.bfloat16, enabled=on_gpu
        )

    def probabilities(
        self, encoded: Sequence[dict[str, list[int]]], *, temperature: float = 1.0
    ) -> Any:
        """Label probabilities (numpy, LABELS order), length-sorted batches for speed."""
        import numpy as np

        torch = self.torch
        self.model.eval()
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]["input_ids"]))
        rows = np.zeros((len(encoded), len(LABELS)), dtype=np.float32)
        size = self.settings["score_batch_size"]
        with torch.inference_mode(), self.autocast():
            for start in range(0, len(order), size):
                ids = order[start : start + size]
                logits = self.model(**self.batch([encoded[i] for i in ids])).logits.float()
                rows[ids] = torch.softmax(logits / temperature, dim=-1).cpu().numpy()
        return rows

    def fit(
        self,
        encoded: Sequence[dict[str, list[int]]],
        labels: Sequence[int],
        on_epoch: Callable[[int], float],
        *,
        soft: Any = None,
        log: Callable[[str], None],
        deadline: float = math.inf,
    ) -> dict[str, Any]:
        """AdamW with linear warm-up and decay over ``epochs``; after each epoch
        ``on_epoch(epoch)`` returns the validation score, and the best epoch's weights are kept
        (restored at the end). With ``soft`` (teacher probabilities at temperature T), the loss
        is ``alpha·T²·KL(soft ‖ student/T) + (1 - alpha)·CE(gold)``. No epoch starts that
        would end after ``deadline`` (``time.perf_counter()``, at the last epoch's pace): a
        GPU call that outlives its limit returns nothing."""
        torch, settings = self.torch, self.settings
        size, epochs = settings["batch_size"], settings["epochs"]
        steps_per_epoch = math.ceil(len(encoded) / size)
        total = steps_per_epoch * epochs
        warmup = int(settings["warmup"] * total)
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=settings["learning_rate"], weight_decay=0.01)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lambda step: step / max(1, warmup) if step < warmup
            else max(0.0, (total - step) / max(1, total - warmup)),
        )  # fmt: skip
        target = torch.tensor(list(labels))
        soft_t = None if soft is None else torch.tensor(soft)
        temperature, alpha = settings.get("temperature", 1.0), settings.get("alpha", 0.0)
        best: dict[str, Any] = {"epoch": 0, "score": -1.0, "state": None}
        curve = []
        for epoch in range(1, epochs + 1):
            self.model.train()
            started, tokens = time.perf_counter(), 0
            for ids in length_grouped_batches(encoded, size, settings["seed"] * 1000 + epoch):
                batch = self.batch([encoded[i] for i in ids])
                gold = target[ids].to(self.device)
                with self.autocast():
                    logits = self.model(**batch).logits.float()
                loss = torch.nn.functional.cross_entropy(logits, gold)
                if soft_t is not None:
                    teacher = soft_t[ids].to(self.device)
                    log_student = torch.log_softmax(logits / temperature, dim=-1)
                    kl = torch.nn.functional.kl_div(log_student, teacher, reduction="batchmean")
                    loss = alpha * temperature**2 * kl + (1 - alpha) * loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(trainable, 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                tokens += int(batch["attention_mask"].sum())
            seconds = time.perf_counter() - started
            score = on_epoch(epoch)
            curve.append({"epoch": epoch, "score": score, "seconds": round(seconds, 1),
                          "tokens_per_second": round(tokens / max(seconds, 1e-9))})  # fmt: skip
            log(f"epoch {epoch}/{epochs}: validation {score:.4f}, {seconds:.0f} s, "
                f"{tokens / max(seconds, 1e-9):,.0f} tok/s")  # fmt: skip
            if score > best["score"]:
                state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
                best = {"epoch": epoch, "score": score, "state": state}
            if epoch < epochs and time.perf_counter() + seconds > deadline:
                log(f"stopping after epoch {epoch}: the next would pass the time budget")
                break
        if best["state"] is not None:
            self.model.load_state_dict(best["state"])
        return {"best_epoch": best["epoch"], "curve": curve, "steps": total}


def length_grouped_batches(
    encoded: Sequence[dict[str, list[int]]], size: int, seed: int
) -> list[list[int]]:
    """Shuffled batches of pairs of similar length (less padding): the shuffled order is cut
    into chunks of 50 batches, each sorted by length, then the batches are shuffled."""
    order = list(range(len(encoded)))
    rng = random.Random(seed)
    rng.shuffle(order)
    batches = []
    for start in range(0, len(order), size * 50):
        chunk = sorted(order[start : start + size * 50], key=lambda i: len(encoded[i]["input_ids"]))
        batches += [chunk[i : i + size] for i in range(0, len(chunk), size)]
    rng.shuffle(batches)
    return batches


def accuracy_by_source(
    probabilities: Any, pairs: Sequence[dict[str, Any]]
) -> dict[str, dict[str, float]]:
    """Held-out label accuracy per source, and over all pairs (``all``)."""
    rows: dict[str, list[bool]] = {}
    for row, pair in zip(probabilities, pairs, strict=True):
        right = LABELS[int(row.argmax())] == pair["label"]
        rows.setdefault(pair["source"], []).append(right)
        rows.setdefault("all", []).append(right)
    return {
        name: {"pairs": len(r), "accuracy": round(sum(r) / len(r), 4)}
        for name, r in sorted(rows.items())
    }


def mean_source_accuracy(result: dict[str, dict[str, float]]) -> float:
    """What chooses the epoch: the mean over sources (so the largest does not decide alone)."""
    scores = [r["accuracy"] for name, r in result.items() if name != "all"]
    return sum(scores) / len(scores) if scores else 0.0


def fit_measured(
    trainer: Trainer,
    train: Sequence[dict[str, Any]],
    measured: Mapping[str, Sequence[dict[str, Any]]],
    log: Callable[[str], None],
    *,
    soft: Any = None,
    deadline: float = math.inf,
) -> dict[str, Any]:
    """``trainer.fit`` on ``train`` (until ``deadline``), measuring each of ``measured``'s
    pair sets per source after each epoch; ``valid`` chooses the epoch. The fit's record, with
    the kept epoch's accuracy on every set."""
    encoded = {name: trainer.encode(pairs) for name, pairs in measured.items()}
    curve: dict[int, dict[str, Any]] = {}

    def measure(epoch: int) -> float:
        curve[epoch] = {
            name: accuracy_by_source(trainer.probabilities(encoded[name]), pairs)
            for name, pairs in measured.items()
        }
        return mean_source_accuracy(curve[epoch]["valid"])

    labels = [LABELS.index(p["label"]) for p in train]
    fitted = trainer.fit(
        trainer.encode(train), labels, measure, soft=soft, log=log, deadline=deadline
    )
    return {**fitted, **curve[fitted["best_epoch"]], "curve_by_source": curve}


# ----------------------------------------------------------------------------- outputs


def write_parts(path: Path, data: bytes, part_bytes: int) -> list[str]:
    """``data`` as ``path.00``, ``path.01``, … of at most ``part_bytes`` each."""
    names = []
    for number, start in enumerate(range(0, len(data), part_bytes)):
        part = path.with_name(f"{path.name}.{number:02d}")
        part.write_bytes(data[start : start + part_bytes])
        names.append(part.name)
    return names


def fp16_weights(torch: Any, model: Any) -> bytes:
    from safetensors.torch import save

    state = {
        k: v.detach().to("cpu", torch.float16).contiguous() for k, v in model.state_dict().items()
    }
    return save(state)


def run(bundle: Path, out: Path, device: str | None = None) -> dict[str, Any]:
    """The whole job; returns the report it also writes to ``out/report.json``."""
    import torch
    import transformers

    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / LOG_FILE)
    config = json.loads((bundle / CONFIG_FILE).read_text(encoding="utf-8"))
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    seconds: dict[str, float] = {}
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "seconds": seconds,
        "bases": {m: config[m]["name"] for m in ("teacher", "student")},
    }
    log(f"device {report['device']}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}")  # fmt: skip

    def phase(name: str, started: float) -> None:
        seconds[name] = round(time.perf_counter() - started, 1)
        log(f"{name}: {seconds[name]} s")

    started = time.perf_counter()
    check_files(bundle, config["files"])
    work = Path(config.get("work_dir") or "/tmp/feverous-es-gpu-job")
    teacher_dir = join_parts(bundle, config["teacher"], work / "teacher")
    student_dir = join_parts(bundle, config["student"], work / "student")
    pairs = read_pairs(bundle / config["pairs"])
    pool = pairs["train"] + pairs["distill"]
    measured = {"valid": pairs["valid"], "held": pairs["held"]}
    log(f"pairs: {', '.join(f'{r} {len(p):,}' for r, p in pairs.items())}")
    phase("bundle", started)

    started = time.perf_counter()
    teacher = Trainer(torch, teacher_dir, config["teacher"]["settings"], device)
    # The teacher may take TEACHER_SHARE of the budget; the student what is left of it.
    budget = float(config["budget_seconds"])
    deadline = log.started + TEACHER_SHARE * budget
    report["teacher"] = fit_measured(teacher, pairs["train"], measured, log, deadline=deadline)
    phase("teacher", started)

    started = time.perf_counter()
    student_settings = config["student"]["settings"]
    soft = teacher.probabilities(teacher.encode(pool), temperature=student_settings["temperature"])
    teacher_weights = fp16_weights(torch, teacher.model)
    teacher.model.to("cpu")  # the student gets the GPU's memory
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    phase("teacher_scores", started)

    started = time.perf_counter()
    student = Trainer(torch, student_dir, student_settings, device)
    deadline = log.started + budget - WRITE_SECONDS
    report["student"] = fit_measured(student, pool, measured, log, soft=soft, deadline=deadline)
    phase("student", started)

    started = time.perf_counter()
    part_bytes = int(config["return_part_bytes"])
    student_weights = fp16_weights(torch, student.model)
    report["student_sha256"] = hashlib.sha256(student_weights).hexdigest()
    report["student_parts"] = write_parts(out / STUDENT_PARTS, student_weights, part_bytes)
    student.model.config.to_json_file(out / STUDENT_CONFIG)
    teacher_out = Path(config.get("teacher_out") or work / "teacher-out")
    teacher_out.mkdir(parents=True, exist_ok=True)
    teacher_parts = write_parts(teacher_out / "teacher.safetensors", teacher_weights, part_bytes)
    report["teacher_parts"] = {"dir": str(teacher_out), "parts": teacher_parts}
    phase("write", started)
    report["seconds_total"] = round(sum(seconds.values()), 1)
    (out / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    held_out = {m: report[m]["held"]["all"]["accuracy"] for m in ("student", "teacher")}
    log(f"done in {report['seconds_total']} s; held-out accuracy {held_out}")
    return report


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path, help="the bundle folder (job.json, pairs, parts)")
    parser.add_argument("out", type=Path, help="the results folder (what comes back)")
    parser.add_argument("--device", default=None, help="cuda or cpu [default: cuda when present]")
    args = parser.parse_args(argv)
    run(args.bundle, args.out, args.device)


if __name__ == "__main__":
    main()
