"""`feverous-es serve` under load, over HTTP on loopback.

    run = "bench.serve:load"   # on the mini index (--index); options: warm, clients, requests
    run = "bench.serve:soak_memory"   # options: minutes, clients, every, warmup

Starts the service over INDEX (a real server process on a free port), then:

1. **warm single-claim latency**: ``warm`` claims one after another through
   ``POST /v1/verify``, p50 / p95;
2. **concurrency**: ``clients`` clients, each sending ``requests`` claims one request at a
   time, all at once: throughput, p50 / p95 latency, errors (anything but 200), the server's
   memory before and after, and how many pipeline batches served them. Memory is resident
   (RSS) and anonymous (RSS less file-backed pages: the mapped index files the server has
   read so far count in RSS, but they are the OS's page cache, shared and reclaimable).

The soak, instead: ``clients`` clients verify distinct dev claims back to back for ``minutes``,
and every ``every`` seconds the bench records that interval's requests,
errors and p50 / p95, and the server's memory from ``/proc/PID/status`` (Linux), kept apart:
anonymous (``RssAnon``: the process's own heap, where a leak shows) and file-backed
(``RssFile``: the index's mapped files as they are read, which the OS may reclaim). Anonymous
memory is read each second, and an interval keeps its floor and peak: a batch's buffers come
and go, the floor is what the server keeps. Whether memory is flat is read on the floors
after ``warmup`` minutes: their range and trend (a least-squares slope, MB an hour).

Claims are real dev claims (FM2, FEVEROUS-S and TabFact, in turn), from ../shared/data.
"""

from __future__ import annotations

import asyncio
import time
from itertools import zip_longest
from pathlib import Path

import httpx
import numpy as np

from bench.context import Context
from bench.data import MINI
from bench.serve_process import running_server
from feverous_es.eval.samples import claim_texts

MEMORY_EVERY = 1.0  # seconds between the soak's memory readings
FILES = ("fm2_dev.jsonl", "feverous_s_dev.jsonl", "tabfact_dev.jsonl")


def dev_claims(count: int | None = None) -> list[str]:
    """``count`` claims (None: all), taken in turn from the dev files while they last
    (skipping their dummy first line)."""
    per_file = [claim_texts([MINI / name]) for name in FILES]
    turns = zip_longest(*per_file)
    return [claim for turn in turns for claim in turn if claim is not None][:count]


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.array(seconds) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 1),
            "p95_ms": round(float(np.percentile(ms, 95)), 1)}  # fmt: skip


async def concurrent_load(url: str, claims: list[str], clients: int, requests: int) -> dict:
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


def memory_mb(pid: int) -> dict[str, float]:
    """The process's resident memory by kind, from ``/proc/PID/status`` (Linux): anonymous
    (``RssAnon``), file-backed (``RssFile``), shared memory (``RssShmem``) and their sum."""
    kinds = {"RssAnon": "anonymous", "RssFile": "file", "RssShmem": "shmem"}
    parts = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in kinds:
            parts[kinds[name]] = round(int(value.split()[0]) / 1024, 1)
    return {"rss": round(sum(parts.values()), 1), **parts}


async def soak(url: str, pid: int, claims: list[str], clients: int, seconds: float,
               every: float) -> list[dict]:  # fmt: skip
    """Run the clients for ``seconds``; one record an interval of ``every`` seconds."""
    window: list[float] = []
    errors: list[str] = []
    intervals: list[dict] = []
    started = time.perf_counter()
    deadline = started + seconds
    sent = 0

    async def client() -> None:
        nonlocal sent
        async with httpx.AsyncClient(base_url=url, timeout=300) as http:
            while time.perf_counter() < deadline:
                claim = claims[sent % len(claims)]  # each claim once before any repeats
                sent += 1
                began = time.perf_counter()
                response = await http.post("/v1/verify", json={"claim": claim})
                window.append(time.perf_counter() - began)
                if response.status_code != 200:
                    errors.append(f"{response.status_code} {response.text[:100]}")

    async def sampler() -> None:
        reported_errors = 0
        while True:
            # Memory is read each second: a reading taken mid-batch holds that batch's
            # transient buffers (tens of MB), so the interval's floor is what stays.
            readings = []
            end = started + every * (len(intervals) + 1)
            while (now := time.perf_counter()) < end:
                readings.append(memory_mb(pid))
                await asyncio.sleep(min(MEMORY_EVERY, end - now))
            readings = readings or [memory_mb(pid)]
            latencies = window[:]
            window.clear()
            anonymous = [r["anonymous"] for r in readings]
            record = {
                "minute": round((time.perf_counter() - started) / 60, 2),
                "requests": len(latencies),
                "errors": len(errors) - reported_errors,
                **(percentiles(latencies) if latencies else {}),
                "memory_mb": {
                    **readings[-1],
                    "anonymous_floor": min(anonymous),
                    "anonymous_peak": max(anonymous),
                },
            }
            reported_errors = len(errors)
            intervals.append(record)
            m = record["memory_mb"]
            print(f"  {record['minute']:6.1f} min: {record['requests']:4d} requests, "
                  f"{record['errors']} errors, p50 {record.get('p50_ms', '-')} ms, anonymous "
                  f"{m['anonymous_floor']}-{m['anonymous_peak']} MB, file {m['file']} MB",
                  flush=True)  # fmt: skip
            if time.perf_counter() >= deadline:
                return

    await asyncio.gather(sampler(), *(client() for _ in range(clients)))
    if errors:
        intervals[-1]["error_examples"] = errors[:5]
    return intervals


def soak_figures(intervals: list[dict], warmup_minutes: float, clients: int) -> dict:
    """The whole soak's figures: totals, and memory after the warm-up."""
    settled = [i for i in intervals if i["minute"] > warmup_minutes] or intervals[-1:]
    anonymous = np.array([i["memory_mb"]["anonymous_floor"] for i in settled])
    minutes = np.array([i["minute"] for i in settled])
    slope = float(np.polyfit(minutes, anonymous, 1)[0] * 60) if len(settled) > 1 else 0.0
    p50s = [i["p50_ms"] for i in intervals if "p50_ms" in i]
    return {
        "clients": clients,
        "minutes": intervals[-1]["minute"],
        "requests": sum(i["requests"] for i in intervals),
        "errors": sum(i["errors"] for i in intervals),
        "p50_ms_median_interval": round(float(np.median(p50s)), 1),
        "p95_ms_worst_interval": max(i["p95_ms"] for i in intervals if "p95_ms" in i),
        "warmup_minutes": warmup_minutes,
        # Each interval's floor (see soak()): what the server keeps between batches.
        "anonymous_floor_mb_after_warmup": {
            "first": float(anonymous[0]),
            "last": float(anonymous[-1]),
            "min": float(anonymous.min()),
            "max": float(anonymous.max()),
            "slope_mb_per_hour": round(slope, 1),
        },
        "file_mb": {
            "first": intervals[0]["memory_mb"]["file"],
            "last": intervals[-1]["memory_mb"]["file"],
        },
        "intervals": intervals,
    }


def soak_memory(
    context: Context,
    *,
    minutes: float = 60,
    clients: int = 4,
    every: float = 60,
    warmup: float = 25,
) -> dict:
    """A soak of ``minutes`` with ``clients`` clients; memory read each second, an interval every
    ``every`` seconds, flatness judged after ``warmup`` minutes."""
    claims = dev_claims()
    print(f"soak: {clients} clients for {minutes:g} min over {len(claims):,} distinct "
          f"dev claims, a record every {every:g} s")  # fmt: skip
    with running_server(context.place("index"), args=("--max-queue", str(2 * clients))) as server:
        intervals = asyncio.run(soak(server.url, server.pid, claims, clients, minutes * 60, every))
    figures = soak_figures(intervals, warmup, clients)
    a = figures["anonymous_floor_mb_after_warmup"]
    print(
        f"{figures['requests']:,} requests, {figures['errors']} errors; p50 "
        f"{figures['p50_ms_median_interval']} ms (median interval), p95 "
        f"{figures['p95_ms_worst_interval']} ms (worst interval); anonymous memory's floor after "
        f"{warmup:g} min: {a['first']} -> {a['last']} MB (range {a['min']}-{a['max']}, "
        f"trend {a['slope_mb_per_hour']} MB/h); file-backed {figures['file_mb']['first']} -> "
        f"{figures['file_mb']['last']} MB"
    )
    return figures


def load(context: Context, *, warm: int = 60, clients: int = 20, requests: int = 50) -> dict:
    """Warm single-claim latency over ``warm`` claims, then ``clients`` clients sending
    ``requests`` claims each, all at once."""
    claims = dev_claims(warm + clients * requests)
    # The clients all come from loopback: exempt from one client's caps, as behind a proxy.
    queue = str(2 * clients)
    args = ("--max-queue", queue, "--max-queue-per-client", queue, "--exempt-loopback")
    with (
        running_server(context.place("index"), args=args) as server,
        httpx.Client(base_url=server.url, timeout=300) as http,
    ):
        single = []
        for claim in claims[:warm]:
            started = time.perf_counter()
            http.post("/v1/verify", json={"claim": claim}).raise_for_status()
            single.append(time.perf_counter() - started)
        before = memory_mb(server.pid)
        batches_before = http.get("/v1/health").json()["queue"]["batches"]
        concurrent = asyncio.run(concurrent_load(server.url, claims[warm:], clients, requests))
        after = memory_mb(server.pid)
        batches = http.get("/v1/health").json()["queue"]["batches"] - batches_before
    figures = {
        "warm_single_claim": {"claims": len(single), **percentiles(single)},
        "concurrent": {
            "clients": clients,
            "requests_per_client": requests,
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
    return figures
