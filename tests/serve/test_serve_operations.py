"""What an operator relies on, against a real `feverous-es serve`: liveness and readiness,
Prometheus metrics that move with requests, one JSON log line a request, and a drain on
SIGTERM that lets the requests in flight finish. (Losing the store's node: the live
Elasticsearch test in test_serve_node_loss.py.)"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families

from bench.serve_process import running_server
from feverous_es import __version__
from feverous_es.errors import StoreUnreachable
from feverous_es.serve.bodies import MAX_BODY_BYTES
from feverous_es.serve.readiness import Check, Readiness
from feverous_es.serve.worker import SHUTDOWN_GRACE

TOKEN = "ops-token-77c1"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CLAIM = "Gold medalist Henri Schoeman won bronze at Rio in 2016."
# The drain tests send more requests at once from this one address than a client may hold.
CROWD = ("--max-connections-per-client", "64", "--max-queue-per-client", "64")


@pytest.fixture(scope="module")
def server(sample_index):
    # 800 clients on loopback at once, below: one address may hold them all here
    args = ("--max-connections-per-client", "1000")
    with running_server(sample_index, token=TOKEN, args=args) as server:
        yield server


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text page, by name and sorted labels (parsing it is the
    check that it is Prometheus text)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_liveness_and_readiness_need_no_token(server) -> None:
    live = httpx.get(server.url + "/v1/health/live")
    assert live.status_code == 200 and live.json() == {"status": "alive"}
    ready = httpx.get(server.url + "/v1/health/ready")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    assert httpx.get(server.url + "/v1/health").status_code == 401  # the details need it
    health = httpx.get(server.url + "/v1/health", headers=AUTH).json()
    assert health["status"] == "ok" and health["store"]["kind"] == "embedded"


def test_metrics_are_prometheus_text_and_move_with_requests(server) -> None:
    assert httpx.get(server.url + "/metrics").status_code == 401  # the token protects them
    http = httpx.Client(base_url=server.url, headers=AUTH, timeout=60)
    before = samples(http.get("/metrics").text)
    verified = (("route", "/v1/verify"), ("method", "POST"), ("status", "200"))
    key = ("feverous_es_requests_total", tuple(sorted(verified)))
    for _ in range(2):
        assert http.post("/v1/verify", json={"claim": CLAIM}).status_code == 200
    assert http.post("/v1/verify", json={"claim": " "}).status_code == 422
    page = http.get("/metrics")
    assert page.headers["content-type"].startswith("text/plain")
    after = samples(page.text)
    assert after[key] - before.get(key, 0) == 2
    refused = ("feverous_es_requests_total",
               (("method", "POST"), ("route", "/v1/verify"), ("status", "422")))  # fmt: skip
    assert after[refused] - before.get(refused, 0) == 1
    latency = ("feverous_es_request_seconds_count", (("route", "/v1/verify"),))
    assert after[latency] - before.get(latency, 0) == 3
    for stage in ("pages", "candidates", "rerank", "verdict"):
        count = ("feverous_es_stage_seconds_count", (("stage", stage),))
        assert after[count] - before.get(count, 0) == 2, stage  # one batch a claim
    assert after[("feverous_es_batch_claims_count", ())] >= 2
    assert after[("feverous_es_queue_waiting", ())] == 0
    assert after[("feverous_es_queue_capacity", ())] == 64
    assert after[("feverous_es_ready", ())] == 1  # set at start, and by the background probe
    for model in ("embedder", "verdict"):  # each model's runs and tokens, as the meter counts
        for kind in ("runs", "tokens"):
            runs = (f"feverous_es_model_{kind}_total", (("model", model),))
            assert after[runs] - before.get(runs, 0) >= 2, (model, kind)
    searched = [k for k in after if k[0] == "feverous_es_store_calls_total"]
    assert searched and all(after[k] > 0 for k in searched)
    assert after[("feverous_es_build_info", (("version", __version__),))] == 1
    health = http.get("/v1/health").json()
    running = {
        (m["name"], file, digest) for m in health["models"] for file, digest in m["files"].items()
    }
    exposed = {
        (dict(labels)["model"], dict(labels)["file"], dict(labels)["sha256"])
        for (name, labels) in after
        if name == "feverous_es_model_info"
    }
    assert exposed == running and any(name == "verdict" for name, _, _ in exposed)
    unmatched = ("feverous_es_requests_total",
                 (("method", "GET"), ("route", "unmatched"), ("status", "404")))  # fmt: skip
    http.get("/v1/no-such-route-1")
    http.get("/v1/no-such-route-2")
    too_large = ("feverous_es_requests_total",
                 (("method", "POST"), ("route", "/v1/verify"), ("status", "413")))  # fmt: skip
    assert http.post("/v1/verify", content=b"x" * (MAX_BODY_BYTES + 1)).status_code == 413
    for n in range(300):  # invented methods: one OTHER series, not one a name
        http.request(f"INVENTED{n}", "/v1/verify")
    last = samples(http.get("/metrics").text)
    assert last[unmatched] - after.get(unmatched, 0) == 2
    methods = {dict(labels).get("method") for name, labels in last
               if name == "feverous_es_requests_total"}  # fmt: skip
    assert methods <= {"GET", "POST", "HEAD", "OTHER"} and "OTHER" in methods
    assert last[too_large] - after.get(too_large, 0) == 1  # labelled by the route it was sent to


def request_lines(server) -> list[dict]:
    return [json.loads(line) for line in server.log_lines() if line.startswith('{"time"')]


def test_one_json_line_a_request_with_its_id(server) -> None:
    http = httpx.Client(base_url=server.url, headers=AUTH, timeout=60)
    answer = http.post("/v1/verify", json={"claim": CLAIM}, headers={"X-Request-ID": "req-42"})
    assert answer.headers["x-request-id"] == "req-42"  # honoured and returned
    unsafe = http.post("/v1/search", json={"query": "Rio"}, headers={"X-Request-ID": 'a b"c'})
    made = unsafe.headers["x-request-id"]
    assert made != 'a b"c' and len(made) == 32  # not a plain token: a new id instead
    batch = http.post("/v1/verify/batch", json={"claims": [CLAIM, "Paris is in France."]})
    assert batch.status_code == 200
    time.sleep(0.2)  # the line is written as the response ends
    lines = {line["request_id"]: line for line in request_lines(server)}
    one = lines["req-42"]
    assert one["route"] == "/v1/verify" and one["method"] == "POST" and one["status"] == 200
    assert one["claim_chars"] == len(CLAIM) and one["verdict"] == answer.json()["label"]
    assert one["latency_ms"] > 0 and one["client"] == "127.0.0.1"
    assert lines[made]["route"] == "/v1/search" and "verdict" not in lines[made]
    many = lines[batch.headers["x-request-id"]]
    assert many["claims"] == 2 and many["verdict"] == [r["label"] for r in batch.json()["results"]]
    log = server.log.read_text()
    assert CLAIM not in log and TOKEN not in log  # no claim text without --log-claims, no token


def test_log_claims_puts_the_text_in(sample_index) -> None:
    with running_server(sample_index, args=("--log-claims",)) as server:
        httpx.post(server.url + "/v1/verify", json={"claim": CLAIM}, timeout=60)
        time.sleep(0.2)
        [line] = [line for line in request_lines(server) if line["route"] == "/v1/verify"]
    assert line["claim"] == CLAIM


async def sent_then_terminated(
    server, http: httpx.AsyncClient, claims: list[str]
) -> list[asyncio.Future[httpx.Response]]:
    """Every claim posted at once, then SIGTERM while one runs and the rest are queued."""
    sent = [asyncio.ensure_future(http.post("/v1/verify", json={"claim": c})) for c in claims]
    await asyncio.sleep(0.3)  # all sent: one claim running, the rest queued
    server.process.send_signal(signal.SIGTERM)
    return sent


def test_sigterm_drains_the_requests_in_flight_then_exits_0(sample_index) -> None:
    # One claim a batch, 30 of them: the drain lasts seconds even on a quiet machine (six in
    # batches of two were all answered within 0.8 s there), and the drain timeout is long
    # enough for a busy one.
    claims = [f"Claim {i}: Henri Schoeman won bronze at Rio in {1990 + i}." for i in range(30)]
    args = ("--max-batch", "1", "--drain-timeout", "300", *CROWD)
    with running_server(sample_index, args=args) as server:

        async def in_flight() -> tuple[list[httpx.Response], int, Exception | None]:
            async with httpx.AsyncClient(base_url=server.url, timeout=300) as http:
                sent = await sent_then_terminated(server, http, claims)
                await asyncio.sleep(0.5)  # uvicorn closes its socket at its next tick
                pending = sum(not s.done() for s in sent)
                refused = None
                try:
                    async with httpx.AsyncClient(timeout=2) as fresh:
                        await fresh.get(server.url + "/v1/health/live")
                except httpx.TransportError as error:
                    refused = error
                return await asyncio.gather(*sent), pending, refused

        answers, pending, refused = asyncio.run(in_flight())
        code = server.process.wait(timeout=60)
        logged = [line for line in request_lines(server) if line["route"] == "/v1/verify"]
    assert pending > 0  # the drain began with requests still in flight ...
    assert isinstance(refused, httpx.ConnectError)  # ... and took no new connection
    assert [a.status_code for a in answers] == [200] * len(claims)  # every one of them was answered
    assert [a.json()["claim"] for a in answers] == claims
    assert code == 0 and len(logged) == len(claims)


def test_past_the_drain_timeout_the_queued_get_503_and_the_exit_is_bounded(sample_index) -> None:
    claims = [f"Claim {i}: Henri Schoeman won bronze at Rio in {1990 + i}." for i in range(40)]
    args = ("--max-batch", "1", "--drain-timeout", "1", *CROWD)
    with running_server(sample_index, args=args) as server:

        async def cut_off() -> tuple[list[httpx.Response], float]:
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
                sent = await sent_then_terminated(server, http, claims)
                signalled = time.monotonic()
                answers = await asyncio.gather(*sent)
                await asyncio.to_thread(server.process.wait, 60)
                return answers, time.monotonic() - signalled

        answers, exit_seconds = asyncio.run(cut_off())
        code = server.process.returncode
    statuses = [a.status_code for a in answers]
    assert 200 in statuses and 503 in statuses and set(statuses) == {200, 503}, statuses
    pairs = zip(answers, claims, strict=True)
    assert all(a.json()["claim"] == c for a, c in pairs if a.status_code == 200)  # the verified
    refusals = {a.json()["error"].split(" (request ")[0] for a in answers if a.status_code == 503}
    assert refusals == {"the server is shutting down (its 1 s drain is over)"}
    assert code == 0 and exit_seconds < 1 + 2 * SHUTDOWN_GRACE  # the drain, plus the grace


class FlakyStore:
    """A store whose ping fails while ``down`` is set, counting the pings it got."""

    def __init__(self) -> None:
        self.down = threading.Event()
        self.pings = 0

    def ping(self, timeout: float) -> None:
        self.pings += 1
        if self.down.is_set():
            raise StoreUnreachable("cannot reach Elasticsearch at http://es:9200")


def test_readiness_is_cached_and_follows_the_store(caplog) -> None:
    store = FlakyStore()
    seen = []
    readiness = Readiness(store, ttl=0.3, on_store_error=seen.append)  # type: ignore[arg-type]

    async def scenario() -> list[Check]:
        first = [await readiness.check() for _ in range(5)]
        store.down.set()
        cached = await readiness.check()  # within the ttl: the last answer
        await asyncio.sleep(0.35)
        down = await readiness.check()
        await asyncio.sleep(0.35)
        still_down = await readiness.check()
        store.down.clear()
        await asyncio.sleep(0.35)
        back = await readiness.check()
        return [first[0], cached, down, still_down, back]

    with caplog.at_level("WARNING", logger="feverous_es.serve"):
        ready, cached, down, still_down, back = asyncio.run(scenario())
    assert ready.to_dict() == cached.to_dict() == back.to_dict() == {"status": "ready"}
    # What anyone may read names no host; the detail is for the log and the token holder.
    assert (
        down.to_dict()
        == still_down.to_dict()
        == {
            "status": "unavailable",
            "reason": "store unreachable",
        }
    )
    assert down.to_dict(detail=True)["detail"] == "cannot reach Elasticsearch at http://es:9200"
    assert [r.getMessage() for r in caplog.records] == [
        "not ready: store unreachable (cannot reach Elasticsearch at http://es:9200)"
    ]  # logged once, not at every probe
    assert store.pings == 4  # five probes in a row cost one ping
    assert len(seen) == 2 and isinstance(seen[0], StoreUnreachable)


def test_slow_and_idle_clients_are_closed_while_others_are_answered(server) -> None:
    import socket
    from urllib.parse import urlparse

    address = (urlparse(server.url).hostname, urlparse(server.url).port)
    half = (b"POST /v1/verify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 400\r\n\r\n" + b'{"claim": "half a body')  # fmt: skip
    held: list[socket.socket] = []
    try:
        for n in range(800):  # 300 send their headers and half a body, 500 send nothing
            connection = socket.create_connection(address, timeout=60)
            if n < 300:
                connection.sendall(half)
            held.append(connection)
        opened = time.monotonic()
        http = httpx.Client(base_url=server.url, headers=AUTH, timeout=60)
        assert http.post("/v1/verify", json={"claim": CLAIM}).status_code == 200  # meanwhile
        answers = [b"".join(iter(lambda c=c: c.recv(4096), b"")) for c in held]  # until closed
        closed_within = time.monotonic() - opened
    finally:
        for connection in held:
            connection.close()
    assert closed_within < 30
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers[:300])  # told why
    assert set(answers[300:]) <= {b"", answers[0]}  # silent ones: closed (or told the same)
    assert http.get("/v1/health/live").status_code == 200


def test_a_model_or_the_index_gone_under_the_server_makes_it_unready_with_a_category(
    sample_index, tmp_path
) -> None:
    import shutil

    from feverous_es.verdict.readers import reader_dirs

    copy, model = tmp_path / "index", tmp_path / "verdict"
    shutil.copytree(sample_index, copy)
    shutil.copytree(reader_dirs(None)[0], model)
    config = tmp_path / "pipeline.toml"
    config.write_text(f'[options.verdict]\nmodel = "{model}"\n')

    def unready_with() -> dict:
        deadline = time.monotonic() + 30
        while (ready := httpx.get(server.url + "/v1/health/ready")).status_code == 200:
            assert time.monotonic() < deadline, "readiness never noticed"
            time.sleep(0.5)
        assert str(tmp_path) not in ready.text  # a category, no path
        return ready.json()

    with running_server(copy, token=TOKEN, args=("--config", str(config))) as server:
        assert httpx.get(server.url + "/v1/health/ready").status_code == 200
        onnx = next(model.glob("*.onnx"))
        kept = onnx.read_bytes()
        onnx.unlink()  # a cache cleared under the server
        assert unready_with() == {"error": "not ready: model missing"}
        onnx.write_bytes(kept)
        deadline = time.monotonic() + 30
        while httpx.get(server.url + "/v1/health/ready").status_code != 200:
            assert time.monotonic() < deadline, "readiness never came back with the model"
            time.sleep(0.5)
        # the sample's vectors are read whole (a large index's are mapped): watched all the same
        with (copy / "vectors.f16").open("r+b") as vectors:
            vectors.truncate(1024)
        assert unready_with() == {"error": "not ready: index changed"}
        asked = httpx.post(server.url + "/v1/verify", json={"claim": "Mars is a planet."},
                           headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)  # fmt: skip
        assert asked.status_code == 503 and str(tmp_path) not in asked.text
        assert asked.json()["error"].startswith("index changed")
        assert server.process.poll() is None  # still up: an orchestrator moves traffic away


def test_a_model_file_gone_makes_readiness_fail_with_a_category(tmp_path) -> None:
    model = tmp_path / "model.int8.onnx"
    model.write_bytes(b"onnx")

    class Answering:
        def ping(self, timeout: float) -> None:
            pass

    readiness = Readiness(Answering(), model_files=[model], ttl=0)  # type: ignore[arg-type]
    assert asyncio.run(readiness.check()).ready
    model.unlink()
    check = asyncio.run(readiness.check())
    assert not check.ready and check.category == "model missing"
    assert str(model) in check.detail  # for the log and the token holder, not the probe
