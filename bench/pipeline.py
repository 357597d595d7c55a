"""Claim pipeline speed: `feverous-es verify` latency and `predict` throughput.

    python bench/pipeline.py INDEX [--verify-claims 20] [--predict-claims 100] [--json OUT]
    python bench/pipeline.py - --store elasticsearch   # the cluster of FEVEROUS_ES_URL

* verify: one `feverous-es verify CLAIM --json` process per claim, timed from process start to
  exit (imports, model loading and all hops included); p50 / p95 over real dev claims.
* predict: `predict` over real dev claims in one process, batched; claims/s and where the time
  goes per stage (seconds per claim).

Claims are drawn, seeded, half from FEVEROUS-S dev and half from TabFact dev. On a machine with
a CUDA GPU the models run there (device auto); the device is printed.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import add_record_option, record_if_asked  # bench/results.py

REPO = Path(__file__).resolve().parents[1]
MINI = REPO.parent / "shared" / "data" / "minifeverous"


def dev_claims(n: int, seed: int) -> list[dict]:
    """``n`` claims, half FEVEROUS-S and half TabFact, drawn with ``seed``."""
    rng = random.Random(seed)
    picked: list[dict] = []
    for name, share in (("feverous_s_dev.jsonl", n - n // 2), ("tabfact_dev.jsonl", n // 2)):
        lines = (MINI / name).read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
        picked += rng.sample([r for r in records if r.get("claim")], share)
    return picked


def verify_latency(store: str, index: str, claims: list[dict]) -> dict[str, float]:
    seconds = []
    for claim in claims:
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "feverous_es.cli", "verify", claim["claim"],
             "--store", store, "--index", index, "--json"],
            check=True, capture_output=True,
        )  # fmt: skip
        seconds.append(time.perf_counter() - started)
    quantiles = statistics.quantiles(seconds, n=20)
    return {"claims": len(seconds), "p50_s": statistics.median(seconds), "p95_s": quantiles[18]}


def predict_throughput(store: str, index: str, claims: list[dict], batch_size: int) -> dict:
    from feverous_es.output.predict import predict_file
    from feverous_es.plugins.config import load_config
    from feverous_es.verify.pipeline import Pipeline

    pipeline = Pipeline.open(index, store=store, config=load_config())
    with tempfile.TemporaryDirectory() as tmp:
        source, out = Path(tmp) / "claims.jsonl", Path(tmp) / "out.jsonl"
        source.write_text("".join(json.dumps(c) + "\n" for c in claims), encoding="utf-8")
        pipeline.verify("Warm-up: load every model before timing.")
        pipeline.seconds.clear()
        started = time.perf_counter()
        predict_file(pipeline, source, out, batch_size=batch_size)
        wall = time.perf_counter() - started
    reranker = getattr(pipeline.reranker, "non_cell", None)
    device = getattr(reranker, "provider", "CPUExecutionProvider")
    pipeline.close()
    return {
        "claims": len(claims),
        "claims_per_s": len(claims) / wall,
        "device": device,
        "stage_s_per_claim": {k: v / len(claims) for k, v in pipeline.seconds.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", help="embedded index directory, or the cluster URL / config")
    parser.add_argument("--store", choices=("embedded", "elasticsearch"), default="embedded")
    parser.add_argument("--verify-claims", type=int, default=20)
    parser.add_argument("--predict-claims", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    add_record_option(parser)
    args = parser.parse_args()
    index = "" if args.index == "-" else args.index

    figures: dict[str, object] = {}
    if args.verify_claims:
        figures["verify"] = latency = verify_latency(
            args.store, index, dev_claims(args.verify_claims, args.seed)
        )
        print(
            f"verify, one process per claim ({latency['claims']} claims): "
            f"p50 {latency['p50_s']:.2f} s, p95 {latency['p95_s']:.2f} s (targets 3 / 8)"
        )
    if args.predict_claims:
        claims = dev_claims(args.predict_claims, args.seed + 1)
        figures["predict"] = result = predict_throughput(args.store, index, claims, args.batch_size)
        print(
            f"predict, batch {args.batch_size} ({result['claims']} claims, {result['device']}): "
            f"{result['claims_per_s']:.2f} claims/s (target 0.5)"
        )
        for stage, seconds in result["stage_s_per_claim"].items():
            print(f"  {stage:12s} {seconds * 1000:8.1f} ms per claim")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    record_if_asked(args, figures)


if __name__ == "__main__":
    main()
