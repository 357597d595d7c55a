"""`feverous-es serve` under load, over HTTP on loopback.

    python bench/serve.py INDEX [--claims N] [--clients 20] [--requests 50] [--record NAME]

Starts the service over INDEX (a real server process on a free port), then:

1. **warm single-claim latency**: ``--warm`` claims one after another through
   ``POST /v1/verify``, p50 / p95;
2. **concurrency**: ``--clients`` clients, each sending ``--requests`` claims one request at a
   time, all at once: throughput, p50 / p95 latency, errors (anything but 200), the server's
   memory before and after, and how many pipeline batches served them. Memory is resident
   (RSS) and anonymous (RSS less file-backed pages: the mapped index files the server has
   read so far count in RSS, but they are the OS's page cache, shared and reclaimable).

Claims are real dev claims (FM2, FEVEROUS-S and TabFact, in turn), from ../shared/data.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import psutil
from results import add_record_option, record_if_asked  # bench/results.py

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.serve_server import running_server  # noqa: E402  (the tests' server starter)

MINI = REPO.parent / "shared" / "data" / "minifeverous"
FILES = ("fm2_dev.jsonl", "feverous_s_dev.jsonl", "tabfact_dev.jsonl")


def dev_claims(count: int) -> list[str]:
    """``count`` claims, taken in turn from the dev files (skipping their dummy first line)."""
    per_file = [
        [json.loads(line)["claim"] for line in (MINI / name).read_text().splitlines()[1:]]
        for name in FILES
    ]
    return [per_file[i % len(FILES)][i // len(FILES)] for i in range(count)]


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.array(seconds) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 1),
            "p95_ms": round(float(np.percentile(ms, 95)), 1)}  # fmt: skip


async def load(url: str, claims: list[str], clients: int, requests: int) -> dict:
    latencies: list[float] = []
    errors: list[str] = []

    async def client(number: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=300) as http:
            for i in range(requests):
                claim = claims[(number * requests + i) % len(claims)]
                started = time.perf_counter()
                response = await http.post("/v1/verify", json={"claim": claim})
                latencies.append(time.perf_counter() - started)
                if response.status_code != 200:
                    errors.append(f"{response.status_code} {response.text[:100]}")

    started = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(clients)))
    seconds = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "error_examples": errors[:5],
        "seconds": round(seconds, 1),
        "claims_per_second": round(len(latencies) / seconds, 2),
        **percentiles(latencies),
    }


def memory_mb(process: psutil.Process) -> dict[str, float]:
    info = process.memory_info()
    return {
        "rss": round(info.rss / 2**20, 1),
        "anonymous": round((info.rss - info.shared) / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path, help="embedded index directory")
    parser.add_argument("--warm", type=int, default=60, help="claims for the warm latency")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=50, help="requests per client")
    add_record_option(parser)
    args = parser.parse_args()

    claims = dev_claims(args.warm + args.clients * args.requests)
    with running_server(args.index, args=("--max-queue", str(2 * args.clients))) as server:
        process = psutil.Process(server.pid)
        with httpx.Client(base_url=server.url, timeout=300) as http:
            single = []
            for claim in claims[: args.warm]:
                started = time.perf_counter()
                http.post("/v1/verify", json={"claim": claim}).raise_for_status()
                single.append(time.perf_counter() - started)
            before = memory_mb(process)
            batches_before = http.get("/v1/health").json()["queue"]["batches"]
            concurrent = asyncio.run(
                load(server.url, claims[args.warm :], args.clients, args.requests)
            )
            after = memory_mb(process)
            batches = http.get("/v1/health").json()["queue"]["batches"] - batches_before
    figures = {
        "index": str(args.index),
        "warm_single_claim": {"claims": len(single), **percentiles(single)},
        "concurrent": {
            "clients": args.clients,
            "requests_per_client": args.requests,
            **concurrent,
            "pipeline_batches": batches,
            "memory_before_mb": before,
            "memory_after_mb": after,
        },
    }
    w, c = figures["warm_single_claim"], figures["concurrent"]
    print(f"warm single claim over HTTP: p50 {w['p50_ms']} ms, p95 {w['p95_ms']} ms "
          f"({w['claims']} claims)")  # fmt: skip
    print(
        f"{c['clients']} clients x {c['requests_per_client']} requests: "
        f"{c['claims_per_second']} claims/s, p50 {c['p50_ms']} ms, p95 {c['p95_ms']} ms, "
        f"{c['errors']} errors, {c['pipeline_batches']} pipeline batches; server memory "
        f"RSS {before['rss']} -> {after['rss']} MB, anonymous {before['anonymous']} -> "
        f"{after['anonymous']} MB"
    )
    record_if_asked(args, figures)


if __name__ == "__main__":
    main()
