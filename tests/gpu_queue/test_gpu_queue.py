"""The GPU queue's dry run on this CPU: the three jobs built from real claims over the sample
index (tiny random BERTs as teachers and students, a few steps), the bundle sent call by call as
its plan says (each call's own command, run by bash), the runner run twice as a short lend would
(the first call ends before the last jobs), the rest fetched, and each job's students taken in
as installable models. The GPU run is then the second run of this script."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_DB, write_lines

pytest.importorskip("torch")
pytest.importorskip("optimum.exporters.onnx")

from feverous_es.errors import TrainError
from feverous_es.training import engine
from feverous_es.training.gpu_results import install_student, read_report
from feverous_es.training.install import check_model
from gpu_queue import bundle as gpu_bundle
from gpu_queue import job as gpu_job
from gpu_queue import plan as gpu_plan
from gpu_queue.command import QueueOptions, build_jobs
from gpu_queue.intake import ROLES, intake
from gpu_queue.spec import Job, Model

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20
PART_BYTES = 2 * MIB  # the tiny model's 2 MB of fp16 weights go in parts, as MiniLM's 45 MB do
# This CPU's pace, shared with other tests: the budgets leave the dry run's epochs whole.
CPU = gpu_plan.Rates(teacher_tokens=500, student_tokens=1_000, load=5, first_epoch=5)


def claim_files(root: Path) -> tuple[Path, Path, Path]:
    """The sample's FEVEROUS-S claims (sentence gold), its TabFact claims (gold tables), and
    a few NLI pairs of both kinds."""
    rows = [json.loads(line) for line in (REPO / "sample" / "claims.jsonl").open()][1:]
    dummy = json.dumps({"id": "", "claim": "", "label": "", "evidence": []})
    sentences = [json.dumps(r) for r in rows if not r.get("gold_tables")]
    tables = [json.dumps(r) for r in rows if r.get("gold_tables")]
    pairs = root / "nli.jsonl.gz"
    with gzip.open(pairs, "wt", encoding="utf-8") as out:
        for n in range(12):
            out.write(json.dumps({
                "source": "nli-table", "id": f"b{n}", "claim": f"It was released in {2000 + n}.",
                "label": ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")[n % 3],
                "table": {"title": "Album", "caption": "", "header": ["", ""],
                          "rows": [["Released", f"{2000 + n - n % 3}"]]},
            }) + "\n")  # fmt: skip
    return (
        write_lines(root / "sentences_dev.jsonl", [dummy, *sentences]),
        write_lines(root / "tables_dev.jsonl", [dummy, *tables]),
        pairs,
    )


def shrink(job: Job) -> Job:
    """The job with a dry run's settings: 2 teacher epochs, 1 student epoch, short pairs."""

    def small(model: Model, epochs: int) -> Model:
        settings = replace(model.settings, epochs=epochs, batch_size=16, max_length=64,
                           score_batch_size=64)  # fmt: skip
        return replace(model, settings=settings)

    return replace(job, teacher=small(job.teacher, 2),
                   students=tuple(small(s, 1) for s in job.students))  # fmt: skip


def run_call(call: dict, root: Path, out: Path, call_seconds: float | None = None) -> str:
    """One call of the plan as the device tool makes it, in ``root`` (the repository root): its
    own command, the machine's folders moved under ``root``, the job on this CPU."""
    command = call["command"].replace(gpu_plan.DEVICE_DIR, str(root / "device"))
    command = command.replace("python3 ", f"{sys.executable} ").replace("$OUT", str(out))
    if f"python3 {gpu_plan.DEVICE_DIR}/{gpu_plan.JOB_FILE}" in call["command"]:  # the queue's
        command += f" --device cpu --work {root / 'machine'}"
        if call_seconds is not None:
            command += f" --call-seconds {call_seconds}"
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["bash", "-c", command], cwd=root, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def queue(
    tiny_base: Path, sample_index: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict, list[dict]]:
    """The bundle, sent and run in two calls (the first with time for its first job only), and
    what every call brought back gathered per job as ``results/<job>``."""
    root = tmp_path_factory.mktemp("gpu-queue")
    sentences, tables, pairs = claim_files(root)
    options = QueueOptions(
        index=sample_index, work=root / "work", bundle=Path("bundle"),
        claims=[sentences, tables], pairs=[pairs], limit=24, retrieved=12, wheels=False,
        part_bytes=PART_BYTES, base_dirs={"mpnet": tiny_base, "minilm": tiny_base},
    )  # fmt: skip
    jobs = [shrink(job) for job in build_jobs(options)]
    assert [job.name for job in jobs] == ["ranker", "reader"]  # the queue's order
    # Bundled with the reader first: its budget, a short first call's, is under the ranker's,
    # so the ranker cannot start in that call whatever the reader's pace.
    jobs = [jobs[1], jobs[0]]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        plan = gpu_bundle.write_bundle(
            Path("bundle"), jobs, {"mpnet": {"dir": tiny_base}, "minilm": {"dir": tiny_base}},
            wheels=False, part_bytes=PART_BYTES, rates=CPU, rates_from=SAMPLE_DB,
        )  # fmt: skip
    calls = plan["calls"]
    first_run = next(i for i, c in enumerate(calls) if c["what"] == "carry and run")
    for call in calls[:first_run]:
        run_call(call, root, root / "out" / str(call["call"]))
    # A short first call: time for the first job only; the second runs the rest.
    config = json.loads((root / "bundle" / gpu_job.CONFIG_FILE).read_text())
    first_budget = config["jobs"][0]["budget_seconds"]
    assert config["jobs"][1]["budget_seconds"] > first_budget + 1
    run_call(calls[first_run], root, root / "out" / "run-1", call_seconds=first_budget + 1)
    second = dict(calls[first_run], command=gpu_plan.run_command(wheels=False))
    run_call(second, root, root / "out" / "run-2")
    reports = [json.loads((root / "out" / f"run-{n}" / gpu_job.QUEUE_REPORT).read_text())
               for n in (1, 2)]  # fmt: skip
    for n, report in enumerate(reports, 1):
        for number, fetch in enumerate(report["fetch"]):
            run_call(fetch, root, root / "out" / f"fetch-{n}-{number}")
    # The rates job's calls, last: on this CPU it finds no CUDA provider and measures torch.
    for call in [c for c in calls if "rates" in c["what"]]:
        run_call(call, root, root / "out" / f"rates-{call['call']}")
    results = root / "results"
    for folder in (root / "out").iterdir():
        for path in folder.glob("*/*"):
            (results / path.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, results / path.parent.name / path.name)
    return root, plan, reports


def test_the_plan_sends_each_base_once_within_the_limits(
    queue: tuple[Path, dict, list[dict]],
) -> None:
    root, plan, _ = queue
    config = json.loads((root / "bundle" / gpu_job.CONFIG_FILE).read_text())
    assert [j["name"] for j in config["jobs"]] == ["reader", "ranker"]
    # mpnet is every job's teacher and minilm every student's base: each travels once.
    assert set(config["bases"]) == {"mpnet", "minilm"}
    queue_calls = [c for c in plan["calls"] if "rates" not in c["what"]]  # the rates job: apart
    carried = [Path(p).relative_to("bundle").as_posix() for c in queue_calls for p in c["carry"]]
    assert len(carried) == len(set(carried))
    assert all(part in carried for base in config["bases"].values() for part in base["parts"])
    assert {"ranker", "reader", "job.py", "engine.py", "queue.json"} <= set(carried)
    assert all(len(c["carry"]) <= gpu_plan.MAX_CARRY for c in plan["calls"])
    assert all(c.get("bytes", 0) <= PART_BYTES for c in queue_calls)
    assert all(len(c["command"]) <= 2000 for c in plan["calls"])  # the device tool's limit
    assert [c["what"] for c in plan["calls"]].count("carry and run") == 1
    # Each job states its own estimate, and the plan its total against a lend.
    assert set(plan["jobs"]) == {"ranker", "reader"}
    assert all(j["budget_seconds"] > sum(j["seconds"].values()) for j in plan["jobs"].values())
    assert plan["seconds_at_budgets"] >= sum(j["budget_seconds"] for j in plan["jobs"].values())
    assert plan["seconds"] >= sum(sum(j["seconds"].values()) for j in plan["jobs"].values())


def test_a_short_call_runs_the_first_job_whole_and_leaves_the_rest_for_the_next(
    queue: tuple[Path, dict, list[dict]],
) -> None:
    _, _, (first, second) = queue
    assert {name: job["state"] for name, job in first["jobs"].items()} == {
        "reader": "done", "ranker": "waiting"}  # fmt: skip
    assert {name: job["state"] for name, job in second["jobs"].items()} == {
        "reader": "done before", "ranker": "done"}  # fmt: skip
    for report in (first, second):
        assert report["device"] == "cpu"
        assert len(report["returned"]) <= gpu_job.RETURN_FILES - 2
    # Nothing comes back twice: the second call lists only the jobs it ran.
    returned = [*first["returned"], *second["returned"]]
    fetched = [f for r in (first, second) for call in r["fetch"] for f in call["files"]]
    assert len(returned + fetched) == len(set(returned + fetched))
    assert all(len(call["files"]) <= gpu_job.RETURN_FILES for r in (first, second)
               for call in r["fetch"])  # fmt: skip
    # The teachers stay on the machine, each listed for a later fetch where its call ran it.
    teachers = {f.split("/")[0] for r in (first, second) for c in r["fetch_teachers"]
                for f in c["files"]}  # fmt: skip
    assert teachers == {"ranker", "reader"}


def test_a_call_without_time_for_a_job_starts_none(device: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    job = subprocess.run(
        [sys.executable, str(device / "job.py"), str(device), str(out), "--device", "cpu",
         "--work", str(tmp_path / "machine"), "--call-seconds", "5"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert job.returncode == 0, job.stderr[-2000:]
    report = json.loads((out / gpu_job.QUEUE_REPORT).read_text())
    assert {j["state"] for j in report["jobs"].values()} == {"waiting"}
    assert not report["returned"] and not (tmp_path / "machine" / "results").exists()


def test_each_job_reports_its_phases_and_held_out_figures(
    queue: tuple[Path, dict, list[dict]],
) -> None:
    results = queue[0] / "results"
    ranker = read_report(results / "ranker")
    assert set(ranker["students"]) == {"student", "student-3"}
    assert ranker["students"]["student-3"]["layers"] == 3
    assert set(ranker["seconds"]) == {"teacher", "teacher_scores", "student", "student-3"}
    # Epochs by the budget (this CPU's pace varies with what else runs): at least one, kept.
    epochs = [e["epoch"] for e in ranker["teacher"]["curve"]]
    assert epochs[0] == 1 and ranker["teacher"]["best_epoch"] in epochs
    held = ranker["teacher"]["held"]["all"]  # recall of the gold among each claim's best
    assert held["claims"] > 0 and 0.0 <= held["accuracy"] <= 1.0
    reader = read_report(results / "reader")
    assert reader["labels"] == ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
    assert reader["students"]["student"]["held"]["all"]["pairs"] > 0
    assert set(reader["pairs"]) == {"train", "valid", "held", "distill"}
    assert all(f.stat().st_size <= 16 * MIB for f in results.rglob("*"))


@pytest.mark.parametrize(("job", "student"), [("ranker", "student-3"), ("reader", "student")])
def test_intake_turns_each_student_into_an_installable_model(
    queue: tuple[Path, dict, list[dict]], tiny_base: Path, tmp_path: Path, job: str, student: str
) -> None:
    results = queue[0] / "results" / job
    out = tmp_path / "model"
    report = intake(results, out, tmp_path / "work", tiny_base, student=student)
    check_model(out, ROLES[job])  # what `train install --as ROLE` checks first
    assert report["export"]["parity"]["fp32"]["max_abs_diff"] < 1e-4
    card = (out / "README.md").read_text()
    assert "on cpu" in card.lower() and f"--as {ROLES[job]}" in card
    # The split the benchmarks hold the same claims out by (bench/sentence_ranker.py reads it).
    training = json.loads((out / "training.json").read_text())
    assert training["holdout"] == 0.35 and training["training"]["seed"] == 13
    assert training["claims"][0] == "sentences_dev.jsonl"


@pytest.fixture
def device(queue: tuple[Path, dict, list[dict]], tmp_path: Path) -> Path:
    """A copy of the machine's bundle folder (what the lent machine received), to spoil."""
    return Path(shutil.copytree(queue[0] / "device", tmp_path / "device"))


def run_job(device: Path, out: Path, work: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(device / "job.py"), str(device), str(out), "--device", "cpu",
         "--work", str(work)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_the_rates_job_runs_last_and_says_why_it_measured_torch(
    queue: tuple[Path, dict, list[dict]],
) -> None:
    """The GPU rates job (the queue's last calls): on a machine whose onnxruntime cannot use a
    GPU it says why, measures torch's rate instead, labelled, and leaves the plan's CUDA rate
    unmeasured (it ran on no GPU); its files stay out of the training queue's check."""
    from feverous_es.index.building.plan import BuildRates
    from feverous_es.runtime.embedder import CUDA_BATCH_SIZE

    root, plan, _ = queue
    whats = [call["what"] for call in plan["calls"]]
    first_rates = whats.index("carry (rates)") if "carry (rates)" in whats else len(whats) - 1
    assert whats[-1] == "carry and run rates"
    assert all("rates" in w for w in whats[first_rates:])
    assert all("rates" not in w for w in whats[:first_rates])
    config = json.loads((root / "bundle" / gpu_job.CONFIG_FILE).read_text())
    assert not any(n.startswith(("rates/", "ort/")) for n in config["files"])
    assert "rates/embedder.fp16.onnx" in config["rates"]["files"]
    report = json.loads((root / "results" / "rates" / "report.json").read_text())
    # A CPU onnxruntime offers no CUDA provider; onnxruntime-gpu on a machine without a GPU
    # would put the session's nodes on the CPU, which the job forbids: either way the reason
    # names the CPU.
    assert "CPU" in report["why_not_onnxruntime"]
    assert report["engine"].startswith("torch") and report["device"] == "cpu"
    embedder = report["figures"]["embedder"]
    assert embedder["tokens_per_s"] > 0 and embedder["at_batch_128"]["tokens_per_s"] > 0
    assert embedder["batch"] == CUDA_BATCH_SIZE  # the rate of the batch `index` embeds
    rates = BuildRates.load(root / "results" / "rates" / "rates.json")
    assert rates.embed_tokens_per_s["cuda"] is None  # measured on no GPU: nothing claimed
    assert rates.embed_tokens_per_s.get("cuda-torch") is None


def test_a_torn_transfer_stops_the_call_before_any_training(device: Path, tmp_path: Path) -> None:
    config = json.loads((device / gpu_job.CONFIG_FILE).read_text())
    part = device / config["bases"]["mpnet"]["parts"][0]
    part.write_bytes(part.read_bytes()[:1000])
    job = run_job(device, tmp_path / "o", tmp_path / "machine")
    assert job.returncode != 0
    assert f"{part} does not match its sha256" in job.stderr
    (device / config["bases"]["minilm"]["parts"][0]).unlink()
    job = run_job(device, tmp_path / "o", tmp_path / "machine")
    assert "is missing: was every transfer of the bundle sent?" in job.stderr
    assert not (tmp_path / "machine" / "results").exists()


def test_the_epochs_stop_in_time_for_the_results_to_come_back(device: Path, tmp_path: Path) -> None:
    config = json.loads((device / gpu_job.CONFIG_FILE).read_text())
    config["jobs"] = config["jobs"][:1]
    config["jobs"][0]["budget_seconds"] = 0  # already spent: each model trains one epoch
    config["jobs"][0]["teacher"]["settings"]["epochs"] = 3
    (device / gpu_job.CONFIG_FILE).write_text(json.dumps(config))
    out = tmp_path / "results"
    job = run_job(device, out, tmp_path / "machine")
    assert job.returncode == 0, job.stderr[-2000:]
    assert "stopping after epoch 1: the next would pass the time budget" in job.stdout
    report = json.loads((out / config["jobs"][0]["name"] / engine.REPORT_FILE).read_text())
    assert [e["epoch"] for e in report["teacher"]["curve"]] == [1]
    assert report["students"]["student"]["parts"]  # the results still come back


def test_the_plan_packs_every_file_once_within_the_limits_and_runs_the_queue_last() -> None:
    sizes = {f"bases/mpnet.safetensors.{n:02d}": 56 * MIB for n in range(3)}
    sizes |= {"bases/mpnet.safetensors.03": 30 * MIB, "bases/minilm.safetensors.00": 43 * MIB}
    sizes |= {"reader": 20 * MIB, "ranker": 9 * MIB, "wheels": 16 * MIB, "job.py": 30_000,
              "queue.json": 9_000}  # fmt: skip
    sizes |= {f"bases/mpnet-file-{n}": 100_000 for n in range(9)}
    last = [*gpu_plan.RUNNER_FILES, gpu_job.CONFIG_FILE]
    sizes |= {gpu_plan.ENGINE_FILE: 4_000, gpu_plan.SPEC_FILE: 2_000}
    groups = gpu_plan.group_files(sizes, last, 56 * MIB)
    assert sorted(name for group in groups for name in group) == sorted(sizes)
    assert all(sum(sizes[n] for n in g) <= 56 * MIB and len(g) <= 8 for g in groups)
    assert set(last) <= set(groups[-1])


def test_the_first_reader_jobs_results_read_as_the_queues(tmp_path: Path) -> None:
    """The reader job of 2026-11-27 ran before the queue (one student at the top of its
    report): its results read back as a queue job's."""
    old = {"device": "NVIDIA H200", "versions": {}, "seconds": {}, "seconds_total": 1.0,
           "bases": {"teacher": "mpnet", "student": "minilm"},
           "teacher": {"best_epoch": 4}, "student": {"best_epoch": 3},
           "student_parts": ["student.safetensors.00"], "student_sha256": "x"}  # fmt: skip
    (tmp_path / engine.REPORT_FILE).write_text(json.dumps(old))
    report = read_report(tmp_path)
    assert report["students"]["student"]["parts"] == ["student.safetensors.00"]
    assert report["students"]["student"]["best_epoch"] == 3
    assert report["teacher"]["base"] == "mpnet"
    with pytest.raises(TrainError, match=r"lacks student\.safetensors\.00"):
        install_student(tmp_path, tmp_path, tmp_path / "student")


def test_results_without_a_report_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(TrainError, match="not a GPU job's results"):
        install_student(tmp_path, tmp_path, tmp_path / "student")
