"""The GPU queue: every prepared job of a bundle, in order, within the call's time.

Run on a machine with a GPU, from a bundle that ``python -m gpu_queue bundle`` wrote (the
procedure is docs/gpu-training.md)::

    python3 job.py BUNDLE_DIR OUT_DIR [--call-seconds 560]

For each job of ``queue.json``, in order, unless an earlier call finished it (its results are on
the machine) or it cannot end within what is left of this call (a later call runs it):

1. the bases it fine-tunes are joined from their parts once per machine (every file of the
   bundle is checked against its sha256 first: a torn transfer stops the call before any GPU
   work, naming the file);
2. a **teacher** is fine-tuned in bf16 on the job's ``train`` pairs, measured on ``valid`` (which
   chooses the epoch) and ``held`` (reported only) after each epoch;
3. the teacher scores the distillation pool (``train`` + ``distill``);
4. each **student** learns the teacher's scores (temperature ``T``, weight ``alpha``) and the gold
   labels on the pool, its best epoch kept; a student may keep only some of its base's layers;
5. the students' weights (fp16, in parts under the return limit), configs and the job's
   ``report.json`` go to the machine's results folder; the teacher's weights too.

A job is a classifier (``labels`` names its classes: the readers) or a ranker (one label: a
relevance logit, trained with binary cross-entropy, measured as the recall of the gold among each
claim's first ``recall_at`` candidates).

Then OUT receives ``queue-report.json`` (each job's state and figures, the device), ``log.txt``,
and as many finished jobs' results as fit the return limits (whole files, job by job, in
``OUT/<job>/``); ``queue-report.json`` lists the calls that fetch the rest.

The same file runs on a CPU (fp32) for the dry run that tests it. It is self-contained on
purpose: it imports only the standard library, numpy, torch, safetensors, transformers,
``engine.py`` (what every trainer shares) and ``spec.py`` (the jobs' dataclasses: each model's
``Settings`` are read back from ``queue.json`` as the bundle wrote them), both carried beside it,
so that the bundle, not the package, is all the GPU machine needs.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import random
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

try:  # as the GPU machine runs it: the bundle carries engine.py and spec.py beside this file
    import engine
    from spec import Settings
except ImportError:  # imported from the package
    from feverous_es.training import engine
    from gpu_queue.spec import Settings

CONFIG_FILE = "queue.json"
QUEUE_REPORT = "queue-report.json"
LOG_FILE = "log.txt"
INT8_ROWS = "int8-rows"  # a base sent as int8 matrices with one fp16 scale per row
WORK_DIR = "/tmp/feverous-es-gpu-job"  # on the machine: joined bases, results, teachers
CALL_SECONDS = 560  # of a 600 s call: the rest copies the results and leaves
WRITE_SECONDS = 20  # kept at the end of a job's budget for writing its results
RETURN_FILES = 8  # a call brings back at most 8 files …
RETURN_BYTES = 60 << 20  # … of at most 64 MiB together (a margin kept)


class Log:
    """Lines with the seconds since the start, to stdout (unbuffered) and to a file."""

    def __init__(self, path: Path) -> None:
        self.started = time.perf_counter()
        self.path = path

    def __call__(self, message: str) -> None:
        line = f"[{time.perf_counter() - self.started:7.1f}s] {message}"
        print(line, flush=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")


# ----------------------------------------------------------------------------- the bundle


def check_files(bundle: Path, files: dict[str, str]) -> None:
    """Every file ``queue.json`` lists is in the bundle with its sha256 (a missing transfer or a
    torn copy stops the call before any GPU work)."""
    for name, expected in files.items():
        path = bundle / name
        if not path.is_file():
            sys.exit(f"error: {path} is missing: was every transfer of the bundle sent?")
        if engine.sha256(path) != expected:
            sys.exit(f"error: {path} does not match its sha256 in {CONFIG_FILE}: send it again")


def join_base(bundle: Path, base: dict[str, Any], into: Path) -> Path:
    """A base model directory: its small files copied, its weight parts joined into
    ``model.safetensors`` (checked against the whole file's sha256; int8 rows restored to
    fp32). Joined once per machine: a later call finds it done."""
    weights = into / "model.safetensors"
    done = into / ".joined"
    if done.is_file() and done.read_text() == base["weights_sha256"]:
        return into
    into.mkdir(parents=True, exist_ok=True)
    for name, target in base["files"].items():
        shutil.copyfile(bundle / name, into / target)
    with weights.open("wb") as out:
        for part in base["parts"]:
            out.write((bundle / part).read_bytes())
    if engine.sha256(weights) != base["weights_sha256"]:
        sys.exit(f"error: the joined weights of {base['name']} do not match their sha256")
    if base.get("format") == INT8_ROWS:
        engine.restore_int8_rows(weights)
    done.write_text(base["weights_sha256"])
    return into


def read_pairs(path: Path) -> dict[str, list[dict[str, Any]]]:
    """A job's pairs by role: ``train`` (the teacher's), ``valid`` (chooses the epoch),
    ``held`` (only reported), ``distill`` (scored by the teacher for the students, besides
    ``train``)."""
    roles: dict[str, list[dict[str, Any]]] = {r: [] for r in ("train", "valid", "held", "distill")}
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            pair = json.loads(line)
            roles[pair["role"]].append(pair)
    return roles


# ----------------------------------------------------------------------------- training


class Trainer:
    """Fine-tuning and scoring of one sequence-classification model on one device: ``labels``
    its classes (softmax, cross-entropy), or one label: a relevance logit (sigmoid, binary
    cross-entropy)."""

    def __init__(
        self,
        torch: Any,
        model_dir: Path,
        settings: Settings,
        device: str,
        labels: Sequence[str],
        layers: int | None = None,
    ) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.torch = torch
        self.settings = settings
        self.device = device
        self.labels = tuple(labels)
        torch.manual_seed(settings.seed)
        id2label = dict(enumerate(self.labels))
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForSequenceClassification.from_pretrained(
            model_dir, num_labels=len(self.labels), id2label=id2label,
            label2id={v: k for k, v in id2label.items()}, ignore_mismatched_sizes=True,
            torch_dtype=torch.float32,
        )  # fmt: skip
        if layers:
            engine.prune_layers(self.model, layers)
        self.model.to(device)
        if settings.freeze_embeddings:
            self.model.get_input_embeddings().weight.requires_grad_(False)

    @property
    def relevance(self) -> bool:
        return len(self.labels) == 1

    def encode(self, pairs: Sequence[dict[str, Any]]) -> list[engine.Encoded]:
        """Token ids of (claim, premise) (:func:`engine.encode_pairs`)."""
        claims = [(p["claim"], p["premise"]) for p in pairs]
        return engine.encode_pairs(self.tokenizer, claims, self.settings.max_length)

    def targets(self, pairs: Sequence[dict[str, Any]]) -> Any:
        """The gold labels: class indices, or 0/1 relevance."""
        if self.relevance:
            return self.torch.tensor([float(p["label"]) for p in pairs])
        return self.torch.tensor([self.labels.index(p["label"]) for p in pairs])

    def batch(self, rows: Sequence[engine.Encoded]) -> dict[str, Any]:
        batch = engine.pad_batch(self.torch, rows, self.tokenizer.pad_token_id or 0)
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}

    def autocast(self) -> Any:
        on_gpu = self.device.startswith("cuda")
        return self.torch.autocast(
            device_type="cuda" if on_gpu else "cpu", dtype=self.torch.bfloat16, enabled=on_gpu
        )

    def probabilities(
        self, encoded: Sequence[dict[str, list[int]]], *, temperature: float = 1.0
    ) -> Any:
        """Label probabilities (numpy, ``labels`` order; a ranker's: its relevance, one
        column), length-sorted batches for speed."""
        import numpy as np

        torch = self.torch
        self.model.eval()
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]["input_ids"]))
        rows = np.zeros((len(encoded), len(self.labels)), dtype=np.float32)
        size = self.settings.score_batch_size
        with torch.inference_mode(), self.autocast():
            for start in range(0, len(order), size):
                ids = order[start : start + size]
                logits = self.model(**self.batch([encoded[i] for i in ids])).logits.float()
                scaled = logits / temperature
                rows[ids] = (
                    (torch.sigmoid(scaled) if self.relevance else torch.softmax(scaled, dim=-1))
                    .cpu()
                    .numpy()
                )
        return rows

    def fit(
        self,
        encoded: Sequence[dict[str, list[int]]],
        gold: Any,
        on_epoch: Callable[[int], float],
        *,
        soft: Any = None,
        log: Callable[[str], None],
        deadline: float = math.inf,
    ) -> dict[str, Any]:
        """The shared loop (:func:`engine.fit`) over ``epochs`` of length-grouped batches,
        the distillation loss against ``soft`` (the teacher's probabilities) when given; after
        each epoch ``on_epoch(epoch)`` returns the validation score, and the best epoch's
        weights are kept (restored at the end). No epoch starts that would end after
        ``deadline`` (``time.perf_counter()``, at the last epoch's pace): a GPU call that
        outlives its limit returns nothing."""
        torch, settings = self.torch, self.settings
        soft_t = None if soft is None else torch.tensor(soft)

        def batch_loss(ids: list[int]) -> tuple[Any, int]:
            batch = self.batch([encoded[i] for i in ids])
            with self.autocast():
                logits = self.model(**batch).logits.float()
            teacher = None if soft_t is None else soft_t[ids].to(self.device)
            loss = engine.distillation_loss(
                torch, logits, gold[ids].to(self.device), teacher,
                alpha=settings.alpha, temperature=settings.temperature,
            )  # fmt: skip
            return loss, int(batch["attention_mask"].sum())

        def epoch_done(epoch: int, seconds: float, tokens_per_second: float) -> float:
            score = on_epoch(epoch)
            log(f"epoch {epoch}/{settings.epochs}: validation {score:.4f}, {seconds:.0f} s, "
                f"{tokens_per_second:,.0f} tok/s")  # fmt: skip
            return score

        loop = engine.Loop(
            lambda epoch: length_grouped_batches(
                encoded, settings.batch_size, settings.seed * 1000 + epoch + 1
            ),
            settings.epochs, settings.learning_rate, settings.warmup,
        )  # fmt: skip
        hooks = engine.Hooks(on_epoch=epoch_done, keep_best=True, deadline=deadline)
        fitted = engine.fit(torch, self.model, batch_loss, loop, hooks)
        if not fitted.finished:
            log(f"stopping after epoch {len(fitted.curve)}: the next would pass the time budget")
        return {"best_epoch": fitted.best_epoch, "curve": fitted.curve, "steps": fitted.total}


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


# ----------------------------------------------------------------------------- measures


def fit_measured(
    trainer: Trainer,
    train: Sequence[dict[str, Any]],
    measured: Mapping[str, Sequence[dict[str, Any]]],
    log: Callable[[str], None],
    *,
    recall_at: int,
    soft: Any = None,
    deadline: float = math.inf,
) -> dict[str, Any]:
    """``trainer.fit`` on ``train`` (until ``deadline``), measuring each of ``measured``'s
    pair sets per source after each epoch (accuracy, or a ranker's recall at ``recall_at``);
    ``valid`` chooses the epoch. The fit's record, with the kept epoch's figures on every set."""
    encoded = {name: trainer.encode(pairs) for name, pairs in measured.items()}
    curve: dict[int, dict[str, Any]] = {}

    def figures(rows: Any, pairs: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
        if trainer.relevance:
            return engine.recall_by_source(rows[:, 0], pairs, recall_at)
        answers = [trainer.labels[int(row.argmax())] for row in rows]
        gold, sources = [p["label"] for p in pairs], [p["source"] for p in pairs]
        return engine.accuracy_by_source(answers, gold, sources)

    def measure(epoch: int) -> float:
        curve[epoch] = {
            name: figures(trainer.probabilities(encoded[name]), pairs)
            for name, pairs in measured.items()
        }
        return engine.mean_source_score(curve[epoch]["valid"])

    fitted = trainer.fit(
        trainer.encode(train), trainer.targets(train), measure, soft=soft, log=log,
        deadline=deadline,
    )  # fmt: skip
    return {**fitted, **curve[fitted["best_epoch"]], "curve_by_source": curve}


# ----------------------------------------------------------------------------- one job


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


def run_job(
    torch: Any,
    job: dict[str, Any],
    bases: dict[str, Path],
    pairs: dict[str, list[dict[str, Any]]],
    results: Path,
    teachers: Path,
    *,
    device: str,
    deadline: float,
    part_bytes: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """One job's teacher, scores and students; the students' files written to ``results``,
    the teacher's weights to ``teachers`` (a later call may fetch them); returns the job's
    report (the caller writes it). Each phase
    ends by its share of the time to ``deadline`` (the job's ``shares``, cumulative)."""
    started = time.perf_counter()
    seconds: dict[str, float] = {}

    def phase(name: str, since: float) -> None:
        seconds[name] = round(time.perf_counter() - since, 1)
        log(f"{job['name']} {name}: {seconds[name]} s")

    def by(share: float) -> float:
        return started + share * (deadline - WRITE_SECONDS - started)

    labels, shares, recall_at = job["labels"], job["shares"], job.get("recall_at", 1)
    measured = {"valid": pairs["valid"], "held": pairs["held"]}
    teacher_job = job["teacher"]
    since = time.perf_counter()
    # each model's settings read back as the bundle wrote them
    teacher_settings = Settings(**teacher_job["settings"])
    student_settings = [Settings(**s["settings"]) for s in job["students"]]
    teacher = Trainer(torch, bases[teacher_job["base"]], teacher_settings, device, labels)
    report: dict[str, Any] = {
        "job": job["name"], "labels": labels, "seconds": seconds, "options": job["options"],
        "pairs": {role: len(p) for role, p in pairs.items()},
        "teacher": {"base": teacher_job["base_name"], "settings": teacher_job["settings"],
                    **fit_measured(
            teacher, pairs["train"], measured, log, recall_at=recall_at, deadline=by(shares[0]))},
    }  # fmt: skip
    phase("teacher", since)

    since = time.perf_counter()
    pool = pairs["train"] + pairs["distill"]
    pool_encoded = teacher.encode(pool)
    soft = {
        t: teacher.probabilities(pool_encoded, temperature=t)
        for t in {settings.temperature for settings in student_settings}
    }
    teacher_weights = fp16_weights(torch, teacher.model)
    teacher.model.to("cpu")  # the students get the GPU's memory
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    phase("teacher_scores", since)

    report["students"] = {}
    for student_job, settings, share in zip(
        job["students"], student_settings, shares[1:], strict=True
    ):
        name, since = student_job["name"], time.perf_counter()
        student = Trainer(torch, bases[student_job["base"]], settings, device, labels,
                          layers=student_job.get("layers"))  # fmt: skip
        fitted = fit_measured(student, pool, measured, log, recall_at=recall_at,
                              soft=soft[settings.temperature], deadline=by(share))  # fmt: skip
        weights = fp16_weights(torch, student.model)
        student.model.config.to_json_file(results / f"{name}-config.json")
        report["students"][name] = {
            "base": student_job["base_name"], "layers": student_job.get("layers"),
            "settings": student_job["settings"], **fitted,
            "sha256": hashlib.sha256(weights).hexdigest(),
            "parts": write_parts(results / f"{name}.safetensors", weights, part_bytes),
            "config": f"{name}-config.json",
        }  # fmt: skip
        del student
        phase(name, since)
    report["probe"] = [
        {"claim": p["claim"], "premise": p["premise"]} for p in pairs["held"][:32]
    ]  # the intake's parity check reads these, so it needs no data of its own
    teachers.mkdir(parents=True, exist_ok=True)
    teacher.model.config.to_json_file(teachers / "config.json")
    report["teacher_parts"] = {
        "dir": str(teachers),
        "parts": write_parts(teachers / "teacher.safetensors", teacher_weights, part_bytes),
    }
    report["seconds_total"] = round(time.perf_counter() - started, 1)
    return report


# ----------------------------------------------------------------------------- the queue


def pack(files: Sequence[tuple[str, int]]) -> list[list[tuple[str, int]]]:
    """``(name, bytes)`` files in calls within the return limits, in order, whole files."""
    calls: list[list[tuple[str, int]]] = []
    for name, size in files:
        if (
            not calls
            or len(calls[-1]) + 1 > RETURN_FILES
            or sum(s for _, s in calls[-1]) + size > RETURN_BYTES
        ):
            calls.append([])
        calls[-1].append((name, size))
    return calls


def split_return(
    calls: list[list[tuple[str, int]]],
) -> tuple[list[tuple[str, int]], list[list[tuple[str, int]]]]:
    """What a run call brings back itself (whole fetch calls, in order, while they fit beside
    its own two files), and the fetch calls left."""
    now: list[tuple[str, int]] = []
    while (
        calls
        and len(now) + len(calls[0]) <= RETURN_FILES - 2
        and sum(s for _, s in [*now, *calls[0]]) <= RETURN_BYTES
    ):
        now += calls.pop(0)
    return now, calls


def fetch_command(results: Path, files: Sequence[tuple[str, int]]) -> str:
    """One fetch call's command: its files copied into ``$OUT/<job>/``."""
    jobs = sorted({name.split("/")[0] for name, _ in files})
    return " && ".join(
        f"mkdir -p $OUT/{job} && cp "
        + " ".join(f"{results}/{n}" for n, _ in files if n.startswith(job + "/"))
        + f" $OUT/{job}/"
        for job in jobs
    )


def run(
    bundle: Path,
    out: Path,
    device: str | None = None,
    call_seconds: float = CALL_SECONDS,
    work: Path = Path(WORK_DIR),
) -> dict[str, Any]:
    """Every job of the queue that this call can finish, in order; returns the queue report it
    also writes to ``out/queue-report.json``. ``work``: the machine's folder that outlives the
    call (joined bases, finished jobs' results, teachers)."""
    config = json.loads((bundle / CONFIG_FILE).read_text(encoding="utf-8"))
    # Before torch and transformers load (seconds of the lend): a torn transfer stops at once.
    check_files(bundle, config["files"])
    import torch
    import transformers

    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / LOG_FILE)  # the call's jobs are timed from here, as before
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"
    log(f"device {name}, torch {torch.__version__}, transformers {transformers.__version__}")
    work.mkdir(parents=True, exist_ok=True)
    results = work / "results"
    call_ends = log.started + call_seconds
    states: dict[str, Any] = {}
    waiting = False
    for job in config["jobs"]:
        folder = results / job["name"]
        if (folder / engine.REPORT_FILE).is_file():
            states[job["name"]] = "done before"
            continue
        left = call_ends - time.perf_counter()
        if waiting or job["budget_seconds"] > left:
            # In order: a later job never runs before one that waits (a lend that ends early
            # has run the first jobs whole).
            log(f"{job['name']}: planned {job['budget_seconds']} s, {left:.0f} s left in this "
                "call: left for the next call")  # fmt: skip
            states[job["name"]] = "waiting"
            waiting = True
            continue
        since = time.perf_counter()
        bases = {
            key: join_base(bundle, config["bases"][key], work / "bases" / key)
            for key in {job["teacher"]["base"], *(s["base"] for s in job["students"])}
        }
        pairs = read_pairs(bundle / job["pairs"])
        log(f"{job['name']}: pairs {', '.join(f'{r} {len(p):,}' for r, p in pairs.items())}")
        shutil.rmtree(folder, ignore_errors=True)
        partial = work / "partial" / job["name"]  # a job cut off mid-way leaves no results
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        report = run_job(
            torch, job, bases, pairs, partial, work / "teachers" / job["name"], device=device,
            deadline=since + job["budget_seconds"], part_bytes=config["return_part_bytes"],
            log=log,
        )  # fmt: skip
        report["device"] = name
        report["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
        report_text = json.dumps(report, indent=2) + "\n"
        (partial / engine.REPORT_FILE).write_text(report_text, encoding="utf-8")
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial.rename(folder)
        states[job["name"]] = "done"
    # What fits beside the queue's own two files comes back now, the rest by fetch calls;
    # files an earlier call brought back are not listed again.
    returned_list = work / "returned.txt"
    returned = set(returned_list.read_text().split()) if returned_list.is_file() else set()
    files = [
        (f"{j['name']}/{p.name}", p.stat().st_size)
        for j in config["jobs"] if states[j["name"]] != "waiting"
        for p in sorted((results / j["name"]).iterdir())
        if f"{j['name']}/{p.name}" not in returned
    ]  # fmt: skip
    now, later = split_return(pack(files))
    for name_, _ in now:
        (out / name_).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(results / name_, out / name_)
    returned_list.write_text("\n".join(sorted(returned | {n for n, _ in now})))
    calls = [{"files": [n for n, _ in c], "command": fetch_command(results, c)} for c in later]
    # The teachers stay on the machine; fetching one is worth its calls only where its held-out
    # figures beat its students' by a margin (docs/gpu-training.md).
    teachers = work / "teachers"
    teacher_calls = [
        {"files": [n for n, _ in c], "command": fetch_command(teachers, c)}
        for c in pack([
            (f"{j['name']}/{p.name}", p.stat().st_size)
            for j in config["jobs"] if states[j["name"]] == "done"
            for p in sorted((teachers / j["name"]).iterdir())
        ])
    ]  # fmt: skip
    queue_report = {
        "device": name,
        "jobs": {
            j["name"]: {"state": states[j["name"]], **summary(results / j["name"])}
            for j in config["jobs"]
        },
        "returned": [n for n, _ in now],
        "fetch": calls,
        "fetch_teachers": teacher_calls,
        "seconds": round(time.perf_counter() - log.started, 1),
    }
    (out / QUEUE_REPORT).write_text(json.dumps(queue_report, indent=2) + "\n", encoding="utf-8")
    done = ", ".join(f"{k} {v}" for k, v in states.items())
    log(f"call done in {queue_report['seconds']} s: {done}; {len(calls)} fetch call(s) left")
    return queue_report


def summary(folder: Path) -> dict[str, Any]:
    """A finished job's held-out figures (``all``) per model and its seconds."""
    path = folder / engine.REPORT_FILE
    if not path.is_file():
        return {}
    report = json.loads(path.read_text(encoding="utf-8"))
    models = {"teacher": report["teacher"], **report["students"]}
    return {
        "held": {m: r["held"].get("all", {}).get("accuracy") for m, r in models.items()},
        "seconds": report["seconds_total"],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path, help="the bundle folder (queue.json, pairs, parts)")
    parser.add_argument("out", type=Path, help="the results folder (what comes back)")
    parser.add_argument("--device", default=None, help="cuda or cpu [default: cuda when present]")
    parser.add_argument("--call-seconds", type=float, default=CALL_SECONDS,
                        help=f"this call's time for jobs [default: {CALL_SECONDS}]")  # fmt: skip
    parser.add_argument("--work", type=Path, default=Path(WORK_DIR),
                        help=f"the machine's lasting folder [default: {WORK_DIR}]")  # fmt: skip
    args = parser.parse_args(argv)
    run(args.bundle, args.out, args.device, args.call_seconds, args.work)


if __name__ == "__main__":
    main()
