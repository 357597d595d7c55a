"""Losing the Elasticsearch node under a serving instance, live: `feverous-es serve` over a node
of its own, under load; the node is killed (``kill -9``) and started again on the same data.

While it is gone, requests get 503 with one line and readiness goes 503 (the load balancer's
cue); once it is back, readiness returns to 200, the same claims get the same answers, and no
document is lost. Runs where the other live-node tests run (``es_test_node.py run -- pytest``).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from bench.serve_process import running_server
from feverous_es.index.elastic.client import connect
from feverous_es.index.elastic.config import load_config
from tests.conftest import REPO
from tests.es_nodes import ScriptNode
from tests.index.test_elastic_integration import NODE_URL, cli_env, feverous_es

pytestmark = pytest.mark.skipif(
    not NODE_URL, reason="no Elasticsearch node: run `python scripts/es_test_node.py run -- pytest`"
)
CLAIMS = [json.loads(line)["claim"] for line in (REPO / "sample" / "claims.jsonl").open()][:3]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScriptNode]:
    node = ScriptNode(tmp_path_factory.mktemp("node") / "node.json")
    node.start()
    yield node
    node.stop()


def until(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not within {seconds:g} s: {what}"
        time.sleep(0.25)


def answer(http: httpx.Client, claim: str) -> tuple[str, list[str]]:
    response = http.post("/v1/verify", json={"claim": claim})
    assert response.status_code == 200, response.text
    body = response.json()
    return body["label"], [e["id"] for e in body["evidence"]]


def test_node_loss_is_503_then_the_same_answers(node: ScriptNode, sample_vectors: Path) -> None:
    settings = {
        "FEVEROUS_ES_URL": node.settings["FEVEROUS_ES_TEST_URL"],
        "FEVEROUS_ES_USER": node.settings["FEVEROUS_ES_TEST_USER"],
        "FEVEROUS_ES_PASSWORD": node.settings["FEVEROUS_ES_TEST_PASSWORD"],
        "FEVEROUS_ES_PREFIX": f"feverous-loss-{uuid.uuid4().hex[:8]}",
        "FEVEROUS_ES_REPLICAS": "0",
    }
    config = load_config(env=settings)
    # A few pages are enough: the answers are compared with themselves, not with the gold.
    indexed = feverous_es(config, "index", str(REPO / "sample" / "wiki.db"), "--store",
                          "elasticsearch", "--limit", "12", "--vector-cache", str(sample_vectors),
                          "--json")  # fmt: skip
    assert indexed.returncode == 0, indexed.stderr

    def documents() -> int:
        client = connect(config)
        try:
            aliases = (config.elements_alias, config.pages_alias, config.tables_alias)
            return sum(int(client.count(index=alias)["count"]) for alias in aliases)
        finally:
            client.close()

    stored = documents()
    env = {**cli_env(config), "PATH": os.environ.get("PATH", "")}
    with running_server(None, args=("--store", "elasticsearch"), env=env) as server:
        http = httpx.Client(base_url=server.url, timeout=60)
        before = [answer(http, claim) for claim in CLAIMS]
        statuses: list[tuple[int, str]] = []
        stop = threading.Event()

        def load() -> None:  # one client verifying claims back to back, throughout
            with httpx.Client(base_url=server.url, timeout=60) as client:
                while not stop.is_set():
                    sent = client.post("/v1/verify", json={"claim": CLAIMS[len(statuses) % 3]})
                    statuses.append((sent.status_code, sent.text))
                    if sent.status_code != 200:
                        time.sleep(0.1)  # a client backs off a 503

        loader = threading.Thread(target=load)
        loader.start()
        try:
            until(lambda: len(statuses) >= 2, 120, "the load's first answers")
            node.run("kill")
            refused = http.post("/v1/verify", json={"claim": CLAIMS[0]})
            assert refused.status_code == 503
            error = refused.json()["error"]
            assert "\n" not in error and error.startswith("store unreachable (request ")
            assert "127.0.0.1" not in error and "http" not in error  # no URL, no host
            until(lambda: http.get("/v1/health/ready").status_code == 503, 10, "readiness 503")
            ready = http.get("/v1/health/ready").json()["error"]
            assert ready == "not ready: store unreachable"  # a category: no host, no port
            health = http.get("/v1/health")
            assert health.status_code == 503 and health.json()["status"] == "unavailable"
            assert health.json()["reason"] == "store unreachable"
            assert http.get("/v1/health/live").status_code == 200  # the process is fine
            node.run("restart")
            until(lambda: http.get("/v1/health/ready").status_code == 200, 60, "readiness 200")
            count = len(statuses)
            until(lambda: len(statuses) >= count + 2, 120, "the load answered again")
        finally:
            stop.set()
            loader.join(timeout=120)
        assert {status for status, _ in statuses} <= {200, 503}
        assert any(status == 503 for status, _ in statuses)  # the load met the loss ...
        assert statuses[-1][0] == 200  # ... and got answers again
        for status, body in statuses:
            if status == 503:
                assert set(json.loads(body)) == {"error"}
        after = [answer(http, claim) for claim in CLAIMS]
        metrics = http.get("/metrics").text
    assert after == before
    assert documents() == stored
    unreachable = 'feverous_es_store_errors_total{kind="unreachable"}'
    assert float(metrics.split(unreachable, 1)[1].split()[0]) >= 2
