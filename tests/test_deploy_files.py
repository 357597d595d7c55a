"""The cluster files a user runs (deploy/): each parses as its scheduler reads it, every
`feverous-es` command in it is one the CLI accepts, and its parts cover the build once (the part
count in each command is the number of tasks the file starts)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from feverous_es import __version__
from feverous_es.index.dump.wiki import Part
from tests.test_docs_commands import check_cli

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def feverous_commands(text: str) -> list[str]:
    """Each `feverous-es …` command in ``text``, continuation lines joined, comments' too."""
    joined = text.replace("\\\n", " ")
    return [line[line.index("feverous-es ") :] for line in joined.splitlines()
            if "feverous-es " in line]  # fmt: skip


def part_of(command: str, task: int) -> Part:
    """The ``--part`` a task's command gives, its shell arithmetic and variables worked out."""
    command = re.sub(r"\$\(\(\s*JOB_COMPLETION_INDEX\s*\+\s*1\s*\)\)", str(task), command)
    command = command.replace("${SLURM_ARRAY_TASK_ID}", str(task))
    given = re.search(r"--part\s+\"?([^\s\"]+)", command)
    assert given, command
    return Part.parse(given[1])


def test_the_kubernetes_job_runs_one_part_a_completion_index() -> None:
    text = (DEPLOY / "index-parts.k8s.yaml").read_text(encoding="utf-8")
    job = yaml.safe_load(text)
    spec = job["spec"]
    kind = (job["apiVersion"], job["kind"], spec["completionMode"])
    assert kind == ("batch/v1", "Job", "Indexed")
    (container,) = spec["template"]["spec"]["containers"]
    (command,) = container["args"]
    assert container["command"] == ["sh", "-c"]  # the arithmetic needs a shell
    count = spec["completions"]
    parts = [part_of(command, index + 1) for index in range(count)]
    assert parts == [Part(i, count) for i in range(1, count + 1)]
    for code in [command, *feverous_commands(text)]:
        assert check_cli(code) == [], code


def job_rule_errors(job: dict) -> list[str]:
    """What the API server refuses in a Job that its OpenAPI schema does not say (the Job
    validation of Kubernetes' batch API)."""
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    errors = []
    if "backoffLimitPerIndex" in spec and spec.get("completionMode") != "Indexed":
        errors.append("backoffLimitPerIndex needs completionMode: Indexed")
    for field in ("backoffLimitPerIndex", "podFailurePolicy"):
        if field in spec and pod.get("restartPolicy") != "Never":
            errors.append(f"{field} needs restartPolicy: Never")
    actions = [rule["action"] for rule in spec.get("podFailurePolicy", {}).get("rules", [])]
    if "FailIndex" in actions and "backoffLimitPerIndex" not in spec:
        errors.append("the FailIndex action needs backoffLimitPerIndex")
    return errors


def test_the_kubernetes_job_is_one_the_api_server_accepts() -> None:
    text = (DEPLOY / "index-parts.k8s.yaml").read_text(encoding="utf-8")
    version = re.search(r"for Kubernetes (\d+\.\d+) or later", text)[1]
    job = yaml.safe_load(text)
    kubernetes_validate.validate(job, f"{version}.0", strict=True)  # raises on a schema error
    assert job_rule_errors(job) == []
    broken = yaml.safe_load(text)  # as the file was: the API server refused it
    broken["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    kubernetes_validate.validate(broken, f"{version}.0", strict=True)  # the schema lets it by
    assert job_rule_errors(broken) == [
        "backoffLimitPerIndex needs restartPolicy: Never",
        "podFailurePolicy needs restartPolicy: Never",
    ]
    typo = yaml.safe_load(text)
    typo["spec"]["template"]["spec"]["containers"][0]["envv"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, f"{version}.0", strict=True)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    registry, _, tag = container["image"].rpartition(":")
    assert "/" in registry and "." in registry.split("/")[0] and tag == __version__
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounted = [m["mountPath"] for m in container["volumeMounts"]]
    assert any(env["FEVEROUS_ES_CA_CERTS"].startswith(path + "/") for path in mounted)


def test_the_slurm_array_runs_one_part_a_task_then_publishes() -> None:
    path = DEPLOY / "index-parts.slurm"
    text = path.read_text(encoding="utf-8")
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    first, last = map(int, re.search(r"#SBATCH --array=(\d+)-(\d+)", text).groups())
    (index,) = [c for c in feverous_commands(text) if c.startswith("feverous-es index ")]
    parts = [part_of(index, task) for task in range(first, last + 1)]
    assert parts == [Part(i, last) for i in range(1, last + 1)]
    commands = feverous_commands(text)
    assert any(c.startswith("feverous-es es publish") for c in commands)  # the fallback step
    assert re.search(r"#SBATCH --time=\d", text)  # every job has a time limit
    (submit,) = [line for line in text.splitlines() if "--dependency=" in line]
    # afterany: the publish step runs when a task failed (afterok never would)
    assert "--dependency=afterany:$array" in submit and "--time=" in submit
    for code in commands:
        assert check_cli(code) == [], code


@pytest.mark.parametrize(("exits", "runs", "status"), [
    ([1, 1, 0], 3, 0),  # a cluster restart failed it twice: the third run resumes and ends
    ([2], 1, 2),  # a usage error fails every time: not retried
    ([1, 1, 1, 1], 3, 1),  # the attempts are bounded
])  # fmt: skip
def test_the_slurm_task_tries_its_part_again_after_a_failure(
    tmp_path: Path, exits: list[int], runs: int, status: int
) -> None:
    bin_dir, count = tmp_path / "bin", tmp_path / "runs"
    bin_dir.mkdir()
    codes = " ".join(map(str, exits))
    fake = bin_dir / "feverous-es"
    fake.write_text(f"#!/bin/bash\necho x >> {count}\ncodes=({codes})\n"
                    f"exit ${{codes[$(( $(wc -l < {count}) - 1 ))]}}\n")  # fmt: skip
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "3", "ATTEMPTS": "3",
           "RETRY_SECONDS": "0", "TMPDIR": str(tmp_path)}  # fmt: skip
    done = subprocess.run(["bash", str(DEPLOY / "index-parts.slurm")], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == status, done.stderr
    assert len(count.read_text().splitlines()) == runs


def test_the_kubernetes_job_is_bounded_in_time_and_memory() -> None:
    text = (DEPLOY / "index-parts.k8s.yaml").read_text(encoding="utf-8")
    job = yaml.safe_load(text)
    assert job["spec"]["activeDeadlineSeconds"] > 0
    (container,) = job["spec"]["template"]["spec"]["containers"]
    resources = container["resources"]
    assert resources["limits"]["memory"] == resources["requests"]["memory"]
    assert "ReadOnlyMany" in text  # the volume every pod mounts at once is named


def test_the_kubernetes_service_probes_its_own_port() -> None:
    text = (DEPLOY / "serve.k8s.yaml").read_text(encoding="utf-8")
    version = re.search(r"for Kubernetes (\d+\.\d+) or later", text)[1]
    deployment, service = yaml.safe_load_all(text)
    for document in (deployment, service):
        kubernetes_validate.validate(document, f"{version}.0", strict=True)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert check_cli("feverous-es " + " ".join(args)) == []
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["probes"] == int(args[args.index("--probe-port") + 1])
    assert ports["api"] == int(args[args.index("--port") + 1])
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "probes"
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/health/ready"
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["api"]  # probes stay inside
    # the drain (--drain-timeout, 30 s by default) and its 10 s bound fit the grace period
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 40
