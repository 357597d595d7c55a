"""Claim pipeline speed: `feverous-es verify` latency, the warm API's stage profile and
`predict` throughput.

    run = "bench.pipeline:pipeline_speed"   # on the mini index (--index), or with
    # store = "elasticsearch" the cluster of FEVEROUS_ES_URL; options: verify_claims,
    # warm_claims, predict_claims, readers, batch_size, seed, against_embedded

* verify: one `feverous-es verify CLAIM --json` process per claim, timed from process start to
  exit (imports, model loading and all hops included); p50 / p95 over real dev claims, and the
  import of the command line alone (the floor of any command).
* warm: through the Python API, `Pipeline.open`, a first claim (lazy model loads), then one
  `verify` per claim: p50 / p95 of the whole call and of each stage, and of the tokens each
  model reads a claim (the work behind the times: the budget a cheaper model or a shorter pool
  is chosen against).
* predict: `predict` over real dev claims in one process, batched; claims/s and where the time
  goes per stage (seconds per claim).
* with `readers`: the warm profile again per verdict reader (`default`, `large`, a model or
  models directory, or a git commit's shipped reader), on the same claims in the same process:
  what a reader costs.

Each figure is given per dev file (FEVEROUS-S, FM2, TabFact: their claims differ in what they
cost, tables most) and over all of them; the ``*_claims`` counts are claims of each file,
drawn seeded. ``against_embedded`` (with the cluster) runs predict over the same claims on the
driver's ``--index`` too, in the same process, and prints how many times slower the store is. On
a machine with a CUDA GPU the models run there (device auto); the device is printed.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.context import Context
from bench.data import MINI
from bench.errors import BenchError
from feverous_es.eval.samples import read_records, seeded_sample
from feverous_es.verdict.readers import READERS

FILES = ("feverous_s_dev.jsonl", "fm2_dev.jsonl", "tabfact_dev.jsonl")


def dev_claims(n: int, seed: int) -> dict[str, list[dict]]:
    """``n`` claims of each dev file in ``FILES`` (by file stem), drawn with ``seed``."""
    rng = random.Random(seed)
    return {Path(name).stem: seeded_sample(read_records(MINI / name), n, rng) for name in FILES}


def quantiles(seconds: list[float]) -> dict[str, float]:
    """p50 / p95 in seconds (p95 is the largest value of fewer than 20)."""
    p95 = statistics.quantiles(seconds, n=20)[18] if len(seconds) >= 20 else max(seconds)
    return {"p50_s": statistics.median(seconds), "p95_s": p95}


def model_tokens(costs: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Tokens each model has read so far, over all stages (costs' ``<model> tokens``)."""
    tokens: dict[str, int] = defaultdict(int)
    for counts in costs.values():
        for name, n in counts.items():
            if name.endswith(" tokens"):
                tokens[name.removesuffix(" tokens")] += n
    return dict(tokens)


def token_quantiles(per_claim: list[int], claims: int) -> dict[str, float]:
    """p50 / p95 of a model's tokens a claim, over all ``claims`` (claims before its first run
    read none)."""
    q = quantiles([0] * (claims - len(per_claim)) + per_claim)
    return {"p50": q["p50_s"], "p95": q["p95_s"]}


def timed_run(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def verify_latency(store: str, index: str, claims: dict[str, list[dict]]) -> dict:
    command = [sys.executable, "-m", "feverous_es.cli", "verify"]
    options = ["--store", store, "--index", index, "--json"]
    seconds = {
        name: [timed_run([*command, claim["claim"], *options]) for claim in some]
        for name, some in claims.items()
    }
    imports = [timed_run([sys.executable, "-c", "import feverous_es.cli"]) for _ in range(5)]
    return {
        "files": {name: {"claims": len(s), **quantiles(s)} for name, s in seconds.items()},
        "all": quantiles([t for s in seconds.values() for t in s]),
        "import_cli_p50_s": statistics.median(imports),
    }


def warm_profile(
    store: str,
    index: str,
    claims: dict[str, list[dict]],
    reader: str | None = None,
) -> dict:
    """``Pipeline.open``, a first claim, then the whole call and each stage per claim (with
    the verdict's ``reader`` when given: a name or a model directory)."""
    from feverous_es.plugins.config import load_config
    from feverous_es.verify.pipeline import Pipeline

    config = load_config(reader=reader)
    started = time.perf_counter()
    pipeline = Pipeline.open(index, store=store, config=config)
    opened = time.perf_counter() - started
    files: dict[str, dict] = {}
    everything: list[float] = []
    with pipeline:
        started = time.perf_counter()
        pipeline.verify("Warm-up: the first claim loads the models it needs.")
        first = time.perf_counter() - started
        for name, some in claims.items():
            total: list[float] = []
            stages: dict[str, list[float]] = defaultdict(list)
            tokens: dict[str, list[int]] = defaultdict(list)
            pipeline.costs.clear()
            before: dict[str, int] = {}  # each model's tokens before the claim: the costs grow
            for claim in some:
                pipeline.seconds.clear()
                started = time.perf_counter()
                pipeline.verify(claim["claim"])
                total.append(time.perf_counter() - started)
                for stage, seconds in pipeline.seconds.items():
                    stages[stage].append(seconds)
                after = model_tokens(pipeline.costs)
                for model in after:  # a model this claim did not run read 0 tokens
                    tokens[model].append(after[model] - before.get(model, 0))
                before = after
            everything += total
            files[name] = {
                "claims": len(total),
                **quantiles(total),
                "stages": {stage: quantiles(seconds) for stage, seconds in stages.items()},
                "model_tokens": {
                    model: token_quantiles(n, len(some)) for model, n in tokens.items()
                },
                # What each stage counted a claim (feverous_es.runtime.costs): the work behind
                # the times, which does not move with the machine's load.
                "costs_per_claim": {
                    stage: {name: round(n / len(some), 1) for name, n in sorted(counts.items())}
                    for stage, counts in pipeline.costs.items()
                },
            }
    return {"open_s": opened, "first_claim_s": first, "files": files, "all": quantiles(everything)}


def predict_throughput(
    store: str, index: str, claims: dict[str, list[dict]], batch_size: int
) -> dict:
    from feverous_es.output.predict import predict_file
    from feverous_es.plugins.config import load_config
    from feverous_es.verify.pipeline import Pipeline

    pipeline = Pipeline.open(index, store=store, config=load_config())
    files: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        pipeline.verify("Warm-up: load every model before timing.")
        for name, some in claims.items():
            source, out = Path(tmp) / f"{name}.jsonl", Path(tmp) / f"{name}.out.jsonl"
            source.write_text("".join(json.dumps(c) + "\n" for c in some), encoding="utf-8")
            pipeline.seconds.clear()
            started = time.perf_counter()
            predict_file(pipeline, source, out, batch_size=batch_size)
            wall = time.perf_counter() - started
            files[name] = {
                "claims": len(some),
                "claims_per_s": len(some) / wall,
                "stage_s_per_claim": {k: v / len(some) for k, v in pipeline.seconds.items()},
            }
    reranker = getattr(pipeline.reranker, "non_cell", None)
    device = getattr(reranker, "provider", "CPUExecutionProvider")
    pipeline.close()
    return {"device": device, "files": files}


def pipeline_speed(
    context: Context,
    *,
    store: str = "embedded",
    verify_claims: int = 20,
    warm_claims: int = 200,
    predict_claims: int = 200,
    readers: Sequence[str] = (),
    batch_size: int = 16,
    seed: int = 0,
    against_embedded: bool = False,
) -> dict[str, object]:
    """Verify latency, the warm profile (and per reader: default, large, auto, or a model or
    models directory) and predict throughput, each on that many claims of each dev file. An
    earlier commit is measured as it ran, beside this checkout: bench/side_by_side.py."""
    if store not in ("embedded", "elasticsearch"):
        raise BenchError(f"store {store!r} is not embedded or elasticsearch")
    index = str(context.place("index")) if store == "embedded" else ""
    against = str(context.place("index")) if against_embedded else None
    unknown = [name for name in readers if name not in READERS and not Path(name).is_dir()]
    if unknown:
        raise BenchError(f"{unknown[0]!r} is no reader name ({', '.join(READERS)}) or directory")
    return profile(
        store, index, readers, (verify_claims, warm_claims, predict_claims), batch_size, seed,
        against,
    )  # fmt: skip


def profile(
    store: str,
    index: str,
    readers: Sequence[str],
    counts: tuple[int, int, int],
    batch_size: int,
    seed: int,
    against: str | None,
) -> dict[str, object]:
    verify_claims, warm_claims, predict_claims = counts
    figures: dict[str, object] = {}
    if verify_claims:
        claims = dev_claims(verify_claims, seed)
        figures["verify"] = latency = verify_latency(store, index, claims)
        print(
            f"verify, one process per claim: importing the command line alone "
            f"{latency['import_cli_p50_s']:.2f} s"
        )
        for name, q in [*latency["files"].items(), ("all", latency["all"])]:
            print(f"  {name:16s} p50 {q['p50_s']:.2f} s  p95 {q['p95_s']:.2f} s")
    if warm_claims:
        claims = dev_claims(warm_claims, seed + 2)
        figures["warm"] = warm = warm_profile(store, index, claims)
        every = warm["all"]
        print(
            f"warm API: open {warm['open_s']:.2f} s, first claim {warm['first_claim_s']:.2f} s, "
            f"then p50 {every['p50_s'] * 1000:.0f} ms, p95 {every['p95_s'] * 1000:.0f} ms"
        )
        for name, result in warm["files"].items():
            print(
                f"  {name} ({result['claims']} claims): p50 {result['p50_s'] * 1000:.0f} ms, "
                f"p95 {result['p95_s'] * 1000:.0f} ms"
            )
            for stage, q in result["stages"].items():
                rows = {
                    name.removesuffix(" rows"): n
                    for name, n in result["costs_per_claim"].get(stage, {}).items()
                    if name.endswith(" rows")
                }
                read = "  ".join(f"{name} {n:g} inputs" for name, n in rows.items())
                print(
                    f"    {stage:12s} p50 {q['p50_s'] * 1000:8.1f} ms  "
                    f"p95 {q['p95_s'] * 1000:8.1f} ms  {read}"
                )
            for model, q in result["model_tokens"].items():
                print(f"    {model:24s} tokens a claim: p50 {q['p50']:7.0f}  p95 {q['p95']:7.0f}")
    if readers:
        claims = dev_claims(warm_claims or 50, seed + 2)
        figures["warm_by_reader"] = by_reader = {}
        for reader in readers:
            by_reader[reader] = one = warm_profile(store, index, claims, reader)
            verdict = [
                f["stages"].get("verdict", {}).get("p50_s", 0.0) for f in one["files"].values()
            ]
            print(
                f"warm API, reader {reader}: p50 {one['all']['p50_s'] * 1000:.0f} ms, p95 "
                f"{one['all']['p95_s'] * 1000:.0f} ms; verdict stage p50 per file "
                + ", ".join(f"{v * 1000:.0f} ms" for v in verdict)
            )
    if predict_claims:
        claims = dev_claims(predict_claims, seed + 1)
        figures["predict"] = result = predict_throughput(store, index, claims, batch_size)
        print(f"predict, batch {batch_size} ({result['device']}):")
        for name, one in result["files"].items():
            print(f"  {name} ({one['claims']} claims): {one['claims_per_s']:.2f} claims/s")
            for stage, seconds in one["stage_s_per_claim"].items():
                print(f"    {stage:12s} {seconds * 1000:8.1f} ms per claim")
        if against:
            figures["predict_embedded"] = embedded = predict_throughput(
                "embedded", against, claims, batch_size
            )
            print(f"predict on the embedded index {against}, the same claims:")
            for name, one in embedded["files"].items():
                rate = one["claims_per_s"]
                slower = rate / result["files"][name]["claims_per_s"]
                print(f"  {name}: {rate:.2f} claims/s ({store} {slower:.2f}x slower)")
    return figures
