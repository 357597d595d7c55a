"""The GPU job's dry run on this CPU: the bundle a GPU run takes (a tiny random BERT as teacher
and student, 60 pairs, a few steps), sent as the transfer plan says, run by the job script as
the GPU machine runs it, and its student read back; the GPU run is then the second run of this
script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from feverous_es.eval.claims import LABELS
from feverous_es.training import entailment_data as data
from feverous_es.training import gpu_bundle, gpu_job

DATA = Path(__file__).parent / "data"
MIB = 1 << 20
PART_BYTES = MIB  # the tiny model's 2 MB of fp16 weights go in parts, as MiniLM's 45 MB do


def claims() -> list[str]:
    lines = (DATA / "feverous_s_dev_head.jsonl").read_text(encoding="utf-8").splitlines()[1:]
    return [json.loads(line)["claim"] for line in lines]


def dry_pairs() -> list[data.Pair]:
    """60 pairs of two sources: a claim against itself (SUPPORTS), against another claim
    (NOT ENOUGH INFO), negated against itself (REFUTES); a seeded fifth held out. Few: the dry
    run checks the machinery, not what the models learn."""
    texts = claims()
    pairs = []
    for i, claim in enumerate(texts):
        other = texts[(i + 7) % len(texts)]
        source = "first" if i % 2 else "second"
        for n, (text, premise, label) in enumerate([
            (claim, claim, LABELS[0]),
            (f"It is not true that {claim[0].lower()}{claim[1:]}", claim, LABELS[1]),
            (claim, other, LABELS[2]),
        ]):  # fmt: skip
            pair_id = f"{i}-{n}"
            held = (i * 3 + n) % 5 == 0
            pairs.append(data.Pair(source, pair_id, text, premise, label, data.SENTENCE,
                                   held_out=held))  # fmt: skip
    return pairs


def send(bundle: Path, device: Path) -> list[dict]:
    """Each call of the transfer plan, as the device tool carries it: only the carried paths
    arrive, and each call's command gathers them in the device's bundle folder."""
    calls = json.loads((bundle / gpu_bundle.TRANSFERS_FILE).read_text())
    device.mkdir()
    for call in calls:
        assert len(call["carry"]) <= gpu_bundle.MAX_CARRY
        for path in call["carry"]:
            source = Path(path)
            target = device / source.name
            (shutil.copytree if source.is_dir() else shutil.copyfile)(source, target)
    return calls


def run_job(device: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """The job as the last call runs it: the bundle's own script, on the device's folder."""
    return subprocess.run(
        [sys.executable, str(device / gpu_bundle.JOB_FILE), str(device), str(out), "--device",
         "cpu"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def dry_run(
    tiny_base: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict, list[dict]]:
    root = tmp_path_factory.mktemp("gpu-dry-run")
    pairs = dry_pairs()
    train = [p for p in pairs if not p.held_out][::2]  # the rest: the distillation pool's own
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        config = gpu_bundle.write_bundle(
            Path("bundle"), pairs, train, teacher=tiny_base, student=tiny_base,
            teacher_settings=gpu_bundle.TeacherSettings(epochs=2, batch_size=16, max_length=64),
            student_settings=gpu_bundle.StudentSettings(epochs=1, batch_size=16, max_length=64),
            seed=5, wheels=False, part_bytes=PART_BYTES,
        )  # fmt: skip
        calls = send(Path("bundle"), root / "device")
    out = root / "results"
    job = run_job(root / "device", out)
    assert job.returncode == 0, job.stderr[-2000:]
    return root, config, calls


def test_the_plan_sends_every_file_under_the_limits(dry_run: tuple[Path, dict, list]) -> None:
    _, config, calls = dry_run
    sent = {Path(p).name for call in calls for p in call["carry"]}
    assert set(config["files"]) | {gpu_bundle.JOB_FILE} <= sent
    assert all(call["bytes"] <= PART_BYTES for call in calls)
    assert len(config["teacher"]["parts"]) >= 2
    # The last call runs the job, the others only gather their files.
    assert gpu_bundle.JOB_FILE in calls[-1]["command"] and "$OUT" in calls[-1]["command"]
    assert all("$OUT" not in call["command"] for call in calls[:-1])
    roles = config["roles"]
    assert roles["held"] and roles["train"] and roles["distill"]


def test_the_job_reports_each_phase_and_returns_a_loadable_student(
    dry_run: tuple[Path, dict, list], tiny_base: Path, tmp_path: Path
) -> None:
    import numpy as np
    import torch

    root, _, _ = dry_run
    out = root / "results"
    report = json.loads((out / gpu_job.REPORT_FILE).read_text())
    assert set(report["seconds"]) == {"bundle", "teacher", "teacher_scores", "student", "write"}
    assert [e["epoch"] for e in report["teacher"]["curve"]] == [1, 2]
    assert report["teacher"]["best_epoch"] in (1, 2)
    assert {"first", "second", "all"} <= set(report["student"]["held"])
    # What comes back fits the return limits: files of at most 16 MiB.
    assert all((out / n).stat().st_size <= 16 * MIB for n in report["student_parts"])
    assert len(list(out.iterdir())) <= 8

    gpu_bundle.install_student(out, tiny_base, tmp_path / "student")
    settings = {"seed": 0, "max_length": 64, "score_batch_size": 64}
    student = gpu_job.Trainer(torch, tmp_path / "student", settings, "cpu")
    assert student.model.config.id2label == dict(enumerate(LABELS))
    held = [{"claim": p.claim, "premise": p.premise} for p in dry_pairs() if p.held_out]
    predicted = student.probabilities(student.encode(held)).argmax(-1)
    labels = [p.label for p in dry_pairs() if p.held_out]
    right = float(np.mean([LABELS[k] == label for k, label in zip(predicted, labels, strict=True)]))
    # The student read back is the one the job measured (sent as fp16, read back as fp32).
    assert right == pytest.approx(report["student"]["held"]["all"]["accuracy"], abs=0.02)


@pytest.fixture
def device(dry_run: tuple[Path, dict, list], tmp_path: Path) -> Path:
    """A copy of the dry run's device folder (what the lent machine receives), to spoil."""
    return Path(shutil.copytree(dry_run[0] / "device", tmp_path / "device"))


def test_a_torn_transfer_stops_the_job_before_any_training(
    dry_run: tuple[Path, dict, list], device: Path, tmp_path: Path
) -> None:
    config = dry_run[1]
    part = device / config["teacher"]["parts"][0]
    part.write_bytes(part.read_bytes()[:1000])
    job = run_job(device, tmp_path / "o")
    assert job.returncode != 0
    assert f"{part} does not match its sha256" in job.stderr
    (device / config["student"]["parts"][0]).unlink()
    job = run_job(device, tmp_path / "o")
    assert "is missing: was every transfer of the bundle sent?" in job.stderr


def test_the_epochs_stop_in_time_for_the_results_to_come_back(device: Path, tmp_path: Path) -> None:
    config = json.loads((device / gpu_job.CONFIG_FILE).read_text())
    config["budget_seconds"] = 0  # already spent: each model trains one epoch, then stops
    config["teacher"]["settings"]["epochs"] = 3
    (device / gpu_job.CONFIG_FILE).write_text(json.dumps(config))
    out = tmp_path / "results"
    job = run_job(device, out)
    assert job.returncode == 0, job.stderr[-2000:]
    assert "stopping after epoch 1: the next would pass the time budget" in job.stdout
    report = json.loads((out / gpu_job.REPORT_FILE).read_text())
    assert [e["epoch"] for e in report["teacher"]["curve"]] == [1]
    assert report["student_parts"]  # the results still come back


def test_the_plan_packs_every_file_once_within_the_limits_and_runs_the_job_last() -> None:
    sizes = {f"teacher.safetensors.{n:02d}": 56 * MIB for n in range(3)}
    sizes |= {"teacher.safetensors.03": 30 * MIB, "student.safetensors.00": 43 * MIB}
    sizes |= {"pairs.jsonl.gz": 20 * MIB, "wheels": 16 * MIB, "job.py": 20_000, "job.json": 9_000}
    sizes |= {f"teacher-file-{n}": 100_000 for n in range(9)}
    last = [gpu_bundle.JOB_FILE, gpu_job.CONFIG_FILE]
    groups = gpu_bundle.plan_transfers(sizes, last, 56 * MIB)
    assert sorted(name for group in groups for name in group) == sorted(sizes)
    assert all(sum(sizes[n] for n in g) <= 56 * MIB and len(g) <= 8 for g in groups)
    assert set(last) <= set(groups[-1]) and len(groups) == 6  # 290 MiB in calls of <= 56
    calls = gpu_bundle.transfer_calls(Path("gpu-bundle"), groups, wheels=True)
    assert "pip install" in calls[-1]["command"] and calls[-1]["command"].endswith("$OUT")
    assert all(c["carry"][0].startswith("gpu-bundle/") for c in calls)
    assert all(len(c["command"]) <= 2000 for c in calls)  # the device tool's limit


def test_results_without_the_student_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(gpu_bundle.TrainError, match="not a GPU job's results"):
        gpu_bundle.install_student(tmp_path, tmp_path, tmp_path / "student")
