"""Faults inside the service: a hook that raises, a pipeline that ends its thread, a store that
hangs. Each is injected into the application as it runs (its lifespan starts the real worker
thread), and answered with one JSON line: the worker survives what it can, says when it cannot
(liveness 503, so the orchestrator restarts it), and no caller waits past its deadline."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient

from feverous_es.errors import StoreUnreachable, WorkAbandoned
from feverous_es.plugins.interfaces import Label, Verdict
from feverous_es.serve.app import create_app
from feverous_es.serve.cli import allowed_hosts
from feverous_es.serve.worker import SHUTDOWN_GRACE
from feverous_es.verify.pipeline import ClaimResult


class Stopped(BaseException):
    """What a plugin might raise that is not an Exception (as SystemExit or a C extension's
    interrupt would be)."""


class FaultyPipeline:
    """Stands in for the pipeline: answers each claim, or fails as ``fault`` says."""

    def __init__(self, fault: str = "") -> None:
        self.fault = fault
        self.release = threading.Event()
        self.config = type("Config", (), {"hops": 7})()
        self.seconds: dict[str, float] = {}
        self.costs: dict[str, Counter[str]] = {}
        self.context = type("Context", (), {"store": self})()
        self.calls = 0

    def verify_many(self, claims: list[str]) -> list[Any]:
        self.calls += 1
        if self.fault == "base-exception":
            raise Stopped("a plugin ended the thread")
        if self.fault == "hang":
            self.release.wait(30)  # a store that neither answers nor fails
        if self.fault == "value-error":
            raise ValueError("a plugin's bug, with /srv/secret/path in its message")
        return [ClaimResult(claim, Verdict(Label.SUPPORTS, 0.9, {}), [], []) for claim in claims]

    def ping(self, timeout: float) -> None:
        if self.fault == "store-down":
            raise StoreUnreachable("cannot reach Elasticsearch at http://es-7.internal:9200")

    def close(self) -> None:
        self.release.set()


def client(pipeline: FaultyPipeline, **options: Any) -> TestClient:
    app = create_app(pipeline, **{"health": {}, **options})  # type: ignore[arg-type]
    return TestClient(app, raise_server_exceptions=False)


def test_a_raising_metrics_hook_neither_fails_the_request_nor_ends_the_worker() -> None:
    pipeline = FaultyPipeline()
    with client(pipeline) as http:
        http.app.state.service.worker.on_batch = _raise  # type: ignore[attr-defined]
        first = http.post("/v1/verify", json={"claim": "One claim."})
        second = http.post("/v1/verify", json={"claim": "Another claim."})
        live = http.get("/v1/health/live")
    assert first.status_code == 200 and second.status_code == 200
    assert live.status_code == 200 and pipeline.calls == 2


def _raise(*_: Any) -> None:
    raise RuntimeError("the metrics hook broke")


def test_a_pipeline_that_ends_its_thread_is_a_503_and_liveness_says_why() -> None:
    with client(FaultyPipeline("base-exception")) as http:
        failed = http.post("/v1/verify", json={"claim": "One claim."})
        later = http.post("/v1/verify", json={"claim": "Another claim."})
        live = http.get("/v1/health/live")
    assert failed.status_code == 503
    request_id = failed.headers["x-request-id"]
    assert failed.json() == {  # a category and the request's id; the log has the exception
        "error": f"pipeline stopped (request {request_id}: the server log has the details)"
    }
    assert later.status_code == 503  # refused at once: nothing would ever answer it
    assert live.status_code == 503 and live.json() == {"error": "not alive: pipeline stopped"}
    for answer in (failed, later, live):
        assert "plugin" not in answer.text and "Stopped" not in answer.text


def test_a_store_that_hangs_is_a_504_within_the_deadline_and_does_not_hold_the_exit() -> None:
    import time

    pipeline = FaultyPipeline("hang")
    with client(pipeline, request_timeout=0.5) as http:
        answer = http.post("/v1/verify", json={"claim": "One claim."})
        live = http.get("/v1/health/live")
        time.sleep(1.2)  # the batch has run past three deadlines of 0.5 s
        hung = http.get("/v1/health/live")
        leaving = time.monotonic()
    # The stuck batch is left to the daemon thread after the grace.
    assert time.monotonic() - leaving < SHUTDOWN_GRACE + 2
    pipeline.release.set()
    assert answer.status_code == 504
    assert answer.json()["error"].startswith("no answer within 0.5 s")
    assert answer.json()["error"].endswith(f"(request {answer.headers['x-request-id']})")
    assert live.status_code == 200  # a slow store is not a dead process ...
    assert hung.status_code == 503  # ... until its batch has run three deadlines: restart it
    assert hung.json() == {"error": "not alive: pipeline hung"}


HEALTH = {
    "store": {"kind": "elasticsearch", "location": "http://es-7.internal:9200", "elements": 9},
    "models": [{"name": "verdict", "path": "/srv/models/verdict", "files": {}}],
}


def test_strangers_read_a_category_and_the_token_holder_the_detail() -> None:
    with client(FaultyPipeline("store-down"), health=HEALTH, token="t0k") as http:
        ready = http.get("/v1/health/ready")
        detailed = http.get("/v1/health", headers={"Authorization": "Bearer t0k"})
    assert ready.status_code == 503 and ready.json() == {"error": "not ready: store unreachable"}
    assert detailed.status_code == 503
    assert detailed.json()["detail"] == "cannot reach Elasticsearch at http://es-7.internal:9200"
    assert detailed.json()["models"][0]["path"] == "/srv/models/verdict"
    with client(FaultyPipeline("store-down"), health=HEALTH) as http:  # no token: all may read
        public = http.get("/v1/health")
    assert public.status_code == 503 and public.json()["reason"] == "store unreachable"
    assert "es-7" not in public.text and "/srv/" not in public.text


def test_a_stopped_pipeline_is_not_ready_either() -> None:
    with client(FaultyPipeline("base-exception")) as http:
        http.post("/v1/verify", json={"claim": "One claim."})
        ready = http.get("/v1/health/ready")
    assert ready.status_code == 503 and ready.json() == {"error": "not ready: pipeline stopped"}


def test_evidence_scores_share_the_request_deadline(monkeypatch) -> None:
    """Scoring the evidence is a second job on the worker: it gets what is left of the
    request's deadline, not one of its own."""
    import time

    def slow_scores(result: Any, pipeline: Any) -> dict:
        time.sleep(0.6)
        return {}

    monkeypatch.setattr("feverous_es.serve.routes.evidence_scores", slow_scores)
    pipeline = SlowPipeline()
    with client(pipeline, request_timeout=1.0) as http:
        plain = http.post("/v1/verify", json={"claim": "One claim."})
        scored = http.post("/v1/verify", json={"claim": "One claim.", "evidence_scores": True})
    assert plain.status_code == 200  # 0.6 s of verifying fits the deadline ...
    assert scored.status_code == 504  # ... 0.6 s more of scoring does not


class SlowPipeline(FaultyPipeline):
    def verify_many(self, claims: list[str]) -> list[Any]:
        import time

        time.sleep(0.6)
        return super().verify_many(claims)


def posted_until(http: TestClient, claim: str, reached: Callable[[], bool]) -> threading.Thread:
    """``claim`` posted on a thread of its own, once ``reached()`` says the worker has it."""
    import time

    posting = threading.Thread(target=http.post, args=("/v1/verify",),
                               kwargs={"json": {"claim": claim}})  # fmt: skip
    posting.start()
    deadline = time.monotonic() + 5
    while not reached():
        assert time.monotonic() < deadline, f"the worker never took {claim!r}"
        time.sleep(0.01)
    return posting


def test_a_full_queue_is_not_ready() -> None:
    """An orchestrator sends no more traffic to an instance that would refuse it."""
    pipeline = FaultyPipeline("hang")
    with client(pipeline, max_queue=1, max_queue_per_client=2, request_timeout=10) as http:
        worker = http.app.state.service.worker  # type: ignore[attr-defined]
        running = posted_until(http, "Running.", lambda: worker.running_for() > 0)
        waiting = posted_until(http, "Waiting.", lambda: worker.waiting >= 1)
        full = http.get("/v1/health/ready")
        pipeline.release.set()
        running.join()
        waiting.join()
        again = http.get("/v1/health/ready")
    assert full.status_code == 503 and full.json() == {"error": "not ready: queue full"}
    assert again.status_code == 200


def test_one_client_holds_at_most_its_share_of_the_queue() -> None:
    pipeline = FaultyPipeline("hang")
    with client(pipeline, max_queue=8, max_queue_per_client=1, request_timeout=10) as http:
        worker = http.app.state.service.worker  # type: ignore[attr-defined]
        running = posted_until(http, "Running.", lambda: worker.running_for() > 0)
        second = http.post("/v1/search", json={"query": "A query."})
        pipeline.release.set()
        running.join()
        after = http.post("/v1/verify", json={"claim": "Answered now."})
    assert second.status_code == 503 and "its share of the queue" in second.json()["error"]
    assert second.headers["retry-after"] == "1"
    assert after.status_code == 200


def test_readiness_is_measured_from_the_start_without_a_probe() -> None:
    import time

    with client(FaultyPipeline("store-down")) as http:
        deadline = time.monotonic() + 5
        while "feverous_es_ready 0.0" not in (page := http.get("/metrics").text):
            assert time.monotonic() < deadline, page
            time.sleep(0.05)
        down = [line for line in page.splitlines() if line.startswith("feverous_es_store_errors_t")]
    assert down == ['feverous_es_store_errors_total{kind="unreachable"} 1.0']


def test_a_loopback_service_answers_only_loopback_host_names() -> None:
    hosts = allowed_hosts("127.0.0.1")
    assert hosts == ["127.0.0.1", "[::1]", "localhost"]
    assert allowed_hosts("0.0.0.0") is None  # reached by any name: a token
    assert allowed_hosts("::1") == hosts
    with client(FaultyPipeline(), allowed_hosts=hosts) as http:
        answers = {
            host: http.get("/v1/health/live", headers={"Host": host}).status_code
            for host in ("localhost:8080", "127.0.0.1:8080", "[::1]:8080", "evil.example:8080")
        }
        refused = http.get("/v1/health/live", headers={"Host": "evil.example"})
    assert refused.json() == {"error": "invalid Host header"}  # the one error body
    assert answers == {
        "localhost:8080": 200, "127.0.0.1:8080": 200, "[::1]:8080": 200, "evil.example:8080": 400,
    }  # fmt: skip


def test_serving_beyond_loopback_without_a_token_is_refused_unless_asked(sample_index) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "FEVEROUS_ES_SERVE_TOKEN"}
    command = [sys.executable, "-m", "feverous_es", "serve", "--index", str(sample_index),
               "--host", "0.0.0.0", "--port", "0"]  # fmt: skip
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert "without a token" in refused.stderr and "--open-without-token" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_compose_serves_with_a_token_and_the_host_check() -> None:
    from pathlib import Path

    import yaml

    compose = yaml.safe_load((Path(__file__).parents[2] / "docker/compose.yaml").read_text())
    serve = compose["services"]["serve"]
    assert serve["environment"]["FEVEROUS_ES_SERVE_TOKEN"].startswith(
        "${FEVEROUS_ES_SERVE_TOKEN:?"  # compose refuses to start without one
    )
    command = serve["command"]
    hosts = [command[i + 1] for i, arg in enumerate(command) if arg == "--allowed-host"]
    assert "--open-without-token" not in command and hosts and "*" not in hosts


class SteppingPipeline(FaultyPipeline):
    """Works in 100 steps of 50 ms, asking ``stop_when`` between them as the pipeline does
    between its stages."""

    stop_when = None
    steps = 0

    def verify_many(self, claims: list[str]) -> list[Any]:
        import time

        for _ in range(100):
            if self.stop_when is not None and self.stop_when():
                raise WorkAbandoned("stopped")
            time.sleep(0.05)
            self.steps += 1
        return super().verify_many(claims)

    def settled(self) -> int:
        """The steps taken, once they stopped moving."""
        import time

        while True:
            before = self.steps
            time.sleep(0.3)
            if self.steps == before:
                return before


def test_a_request_past_its_deadline_stops_its_work() -> None:
    pipeline = SteppingPipeline()
    with client(pipeline, request_timeout=0.5) as http:
        answer = http.post("/v1/verify", json={"claim": "One claim."})
        steps = pipeline.settled()
    assert answer.status_code == 504
    assert steps < 30  # stopped within a step of its deadline, not after 100


def test_a_client_gone_mid_request_stops_its_work() -> None:
    import httpx
    import uvicorn

    from bench.serve_process import free_port

    pipeline = SteppingPipeline()
    port = free_port()
    app = create_app(pipeline, health={})  # type: ignore[arg-type]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            thread.join(0.05)
        with pytest.raises(httpx.ReadTimeout):  # the client gives up and closes its connection
            httpx.post(f"http://127.0.0.1:{port}/v1/verify", json={"claim": "x"}, timeout=0.5)
        steps = pipeline.settled()
    finally:
        server.should_exit = True
        thread.join(10)
    assert steps < 30  # the work stopped soon after the client left


def test_every_status_a_fault_answers_is_documented_with_the_error_body() -> None:
    """The statuses are those real answers had, not a list written beside the code."""
    answered: set[int] = set()
    for fault, options in (("base-exception", {}), ("hang", {"request_timeout": 0.3}),
                           ("value-error", {})):  # fmt: skip
        pipeline = FaultyPipeline(fault)
        with client(pipeline, **options) as http:
            answer = http.post("/v1/verify", json={"claim": "One claim."})
            documented = http.app.openapi()["paths"]["/v1/verify"]["post"]["responses"]
            pipeline.release.set()
        assert set(answer.json()) == {"error"} and "\n" not in answer.json()["error"]
        assert "/srv" not in answer.text and "Error" not in answer.text  # nothing internal
        answered.add(answer.status_code)
        schema = documented[str(answer.status_code)]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorAnswer"}, answer.status_code
    assert answered == {500, 503, 504}
