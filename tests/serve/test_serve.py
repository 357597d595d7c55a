"""`feverous-es serve` against a real server on a loopback port: every route, the token, each
kind of bad request; the worker's batching and its bounded queue."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import unicodedata
from collections import Counter

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from bench.serve_process import running_server
from feverous_es.serve.bodies import MAX_BODY_BYTES, MAX_CLAIM_CHARS, MAX_SOURCE_CHARS
from feverous_es.serve.health import without_credentials
from feverous_es.serve.schema import (
    BatchAnswer,
    EntailAnswer,
    SearchHit,
    TextCheckAnswer,
    VerifyAnswer,
)
from feverous_es.serve.worker import PipelineWorker, QueueFull

TOKEN = "test-token-5b1d"
CLAIM = "Gold medalist Henri Schoeman won bronze at Rio in 2016."
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server(sample_index):
    with running_server(sample_index, token=TOKEN) as server:
        yield httpx.Client(base_url=server.url, headers=AUTH, timeout=60)


def one_line_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and "\n" not in body["error"] and body["error"]
    return body["error"]


def test_verify_answers_what_verify_json_prints(server, sample_index) -> None:
    response = server.post("/v1/verify", json={"claim": CLAIM})
    assert response.status_code == 200
    got = response.json()
    printed = subprocess.run(
        [
            sys.executable,
            "-m",
            "feverous_es",
            "verify",
            CLAIM,
            "--index",
            str(sample_index),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # the same answer, but the models a new process loaded (a service loads them at start)
    assert got == {k: v for k, v in json.loads(printed).items() if k != "loaded"}
    VerifyAnswer.model_validate(got)  # the documented schema holds every field, and only those
    assert got["probability"] == got["probabilities"][got["label"]]  # one figure to show
    assert got["label"] in {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}
    evidence = {e["id"] for e in got["evidence"]}
    assert got["decided"]["evidence"] and set(got["decided"]["evidence"]) <= evidence
    assert "Henri Schoeman_sentence_2" in got["decided"]["evidence"]  # the bronze-at-Rio one
    assert {"bronze", "rio", "schoeman"} <= set(got["decided"]["words"])
    scored = server.post("/v1/verify", json={"claim": CLAIM, "evidence_scores": True}).json()
    VerifyAnswer.model_validate(scored)
    scores = scored.pop("decided").pop("scores")
    assert scored == {k: v for k, v in got.items() if k != "decided"}  # the same verdict
    assert set(scores) == {i for i in got["decided"]["evidence"] if "_sentence_" in i}
    for row in scores.values():  # each sentence read on its own: the verdict model's labels
        assert set(row) == set(got["probabilities"]) and sum(row.values()) == pytest.approx(1)


def test_hops_and_the_batch_route(server) -> None:
    claims = [
        CLAIM,
        "ricardo páez play for venezuela",
        "The Glenn Thompson Plantation is in Alabama.",
    ]
    batch = server.post("/v1/verify/batch", json={"claims": claims, "hops": 0})
    assert batch.status_code == 200
    BatchAnswer.model_validate(batch.json())
    results = batch.json()["results"]
    assert [r["claim"] for r in results] == claims  # in request order
    assert all(r["hops"] == [] for r in results)  # hops 0: no next hop ran
    table = results[1]["decided"]["table"]  # a table claim: the verdict read its table
    assert (
        unicodedata.normalize("NFC", table["page"]) == "Ricardo Páez"
        and table["rows"]
        and table["matched"]
    )
    row, column = table["matched"][0]
    assert "venezuela" in table["rows"][row][column]


def test_entail_reads_the_claim_against_the_evidence_given(server, sample_index) -> None:
    body = {
        "claim": "Henri Schoeman is an American swimmer.",
        "evidence": ["Henri Schoeman is a South African triathlete.", "He won bronze at Rio."],
        "title": "Henri Schoeman",
    }
    got = server.post("/v1/entail", json=body).json()
    printed = subprocess.run(
        [sys.executable, "-m", "feverous_es", "entail", body["claim"], "--json", "--title",
         body["title"], "-e", body["evidence"][0], "-e", body["evidence"][1]],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert got == json.loads(printed)  # the pipeline's verdict model, as the command reads it
    EntailAnswer.model_validate(got)  # the answer is what the OpenAPI document says
    assert got["premise"] == "[Henri Schoeman] " + " [Henri Schoeman] ".join(body["evidence"])
    assert got["label"] == max(got["probabilities"], key=got["probabilities"].get)
    assert sum(got["probabilities"].values()) == pytest.approx(1, abs=1e-3)
    assert "evidence" in one_line_error(server.post("/v1/entail", json={"claim": "x"}), 422)
    empty = {"claim": "x", "evidence": ["  "]}
    assert "evidence" in one_line_error(server.post("/v1/entail", json=empty), 422)
    both = {"claim": "x", "text": "y", "evidence": ["z"]}
    assert "either claim or text" in one_line_error(server.post("/v1/entail", json=both), 422)
    blank = {"text": "   ", "evidence": ["z"]}
    assert "text" in one_line_error(server.post("/v1/entail", json=blank), 422)
    no_source = {"text": "A claim.", "evidence": []}
    assert "evidence" in one_line_error(server.post("/v1/entail", json=no_source), 422)
    huge = {"claim": "x", "evidence": ["word " * (MAX_SOURCE_CHARS // 8)] * 2}
    assert "over 100000" in one_line_error(server.post("/v1/entail", json=huge), 413)


def test_entail_checks_a_text_against_a_long_source(server) -> None:
    filler = [f"The town of Aldbury{i} has held a fair since {1700 + i}." for i in range(80)]
    fact = "Henri Schoeman won the bronze medal in the triathlon at the 2016 Summer Olympics."
    source = " ".join([*filler[:60], fact, *filler[60:]])
    text = "Henri Schoeman won a bronze medal at the 2016 Olympics. He won gold in 2012."
    body = {"text": text, "evidence": [source], "title": ""}
    check = server.post("/v1/entail", json=body).json()
    TextCheckAnswer.model_validate(check)
    first, second = check["sentences"]
    assert first["label"] == "SUPPORTS" and fact in first["window"]["text"]
    assert source[first["window"]["start"] : first["window"]["end"]] == first["window"]["text"]
    assert second["label"] != "SUPPORTS" and check["summary"]["not_supported"] == [1]
    assert text[second["start"] : second["end"]] == "He won gold in 2012."


def test_entail_offsets_are_code_points_of_the_text_as_sent(server) -> None:
    """Offsets index what the user sent: the whitespace around it, and the soft hyphens the
    text rule removes before reading, still counted; an emoji counts one (a code point)."""
    filler = [f"The \U0001f389 fair of Ald\u00adbury{i} began in {1700 + i}." for i in range(60)]
    fact = "Henri Schoeman won the bronze medal in the tri\u00adathlon at the 2016 Summer Olympics."
    pieces = ["  " + " ".join(filler), fact + " \U0001f3c5"]
    text = " \U0001f389 Henri Schoe\u00adman won a bronze medal at the 2016 Olympics.  "
    check = server.post("/v1/entail", json={"text": text, "evidence": pieces}).json()
    (sentence,) = check["sentences"]
    window = sentence["window"]
    assert sentence["label"] == "SUPPORTS" and window["start"] > 0
    assert "\n".join(pieces)[window["start"] : window["end"]] == window["text"]
    assert fact in window["text"] and "\u00ad" in window["text"]  # as sent, not as read
    assert text[sentence["start"] : sentence["end"]].startswith("\U0001f389 Henri Schoe\u00adman")


def test_search_and_health(server) -> None:
    hits = server.post(
        "/v1/search",
        json={"query": "Henri Schoeman triathlete", "k": 3, "mode": "bm25", "types": ["sentence"]},
    ).json()
    assert len(hits) == 3 and all(h["type"] == "sentence" for h in hits)
    assert hits[0]["page"] == "Henri Schoeman" and hits[0]["score"] >= hits[-1]["score"]
    for hit in hits:
        SearchHit.model_validate(hit)
    health = server.get("/v1/health").json()
    assert health["status"] == "ok" and health["store"]["kind"] == "embedded"
    assert health["store"]["complete"] and health["store"]["elements"] > 1000
    assert health["store"]["location"] and all(m["path"] for m in health["models"])  # token held
    names = {m["name"] for m in health["models"]}
    assert {"embedder", "verdict"} <= names
    for model in health["models"]:
        assert all(re.fullmatch("[0-9a-f]{64}", h) for h in model["files"].values())
    openapi = server.get("/openapi.json").json()
    assert "/v1/verify" in openapi["paths"]
    answer = openapi["components"]["schemas"]["VerifyAnswer"]["properties"]
    assert "entry in `probabilities`" in answer["probability"]["description"]
    error = {"$ref": "#/components/schemas/ErrorAnswer"}
    for path, method, statuses in [
        ("/v1/verify", "post", ("400", "401", "413", "422", "500", "503", "504")),
        ("/v1/entail", "post", ("401", "413", "422", "500", "501", "503", "504")),
        ("/v1/health/ready", "get", ("503",)),
    ]:
        responses = openapi["paths"][path][method]["responses"]
        for status in statuses:  # every error a route answers, with the body it really has
            assert responses[status]["content"]["application/json"]["schema"] == error, status
        assert "security" in openapi["paths"][path][method] or path.startswith("/v1/health/")
    assert "HTTPValidationError" not in openapi["components"]["schemas"]  # no {"detail": ...}
    assert openapi["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    search = openapi["paths"]["/v1/search"]["post"]["responses"]["200"]["content"]
    hit = {"$ref": "#/components/schemas/SearchHit"}
    assert search["application/json"]["schema"]["items"] == hit


def test_every_api_route_needs_the_token(server) -> None:
    routes = [
        ("POST", "/v1/verify", {"claim": CLAIM}),
        ("POST", "/v1/verify/batch", {"claims": [CLAIM]}),
        ("POST", "/v1/search", {"query": "x"}),
        ("GET", "/v1/health", None),
        ("GET", "/openapi.json", None),
    ]
    for method, path, body in routes:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            response = httpx.request(
                method, str(server.base_url) + path, json=body, headers=headers
            )
            assert "token" in one_line_error(response, 401)
            assert TOKEN not in response.text
    page = httpx.get(str(server.base_url) + "/")  # the page holds no data: no token needed
    assert page.status_code == 200 and 'id="claim-form"' in page.text
    assert httpx.get(str(server.base_url) + "/static/app.js").status_code == 200


def test_bad_requests_are_one_line_4xx(server) -> None:
    assert "claim" in one_line_error(server.post("/v1/verify", json={"claim": "   "}), 422)
    long = "word " * (MAX_CLAIM_CHARS // 5 + 1)
    assert "claim" in one_line_error(server.post("/v1/verify", json={"claim": long}), 422)
    assert "claim" in one_line_error(server.post("/v1/verify", json={}), 422)
    unknown = server.post("/v1/verify", json={"claim": CLAIM, "verbose": True})
    assert "verbose" in one_line_error(unknown, 422)
    malformed = server.post(
        "/v1/verify", content=b'{"claim": ', headers={"Content-Type": "application/json"}
    )
    assert "malformed JSON" in one_line_error(malformed, 400)
    too_many = server.post("/v1/verify/batch", json={"claims": [CLAIM] * 65})
    assert "claims" in one_line_error(too_many, 422)
    heaviest = server.post("/v1/verify/batch", json={"claims": [CLAIM] * 64, "hops": 10})
    assert "over 512" in one_line_error(heaviest, 422)
    assert "hops" in one_line_error(
        server.post("/v1/verify", json={"claim": CLAIM, "hops": 99}), 422
    )
    big = b'{"claim": "' + b"x" * MAX_BODY_BYTES + b'"}'
    assert "over" in one_line_error(server.post("/v1/verify", content=big), 413)

    def chunks():  # no Content-Length: the limit is enforced as the body streams in
        yield b'{"claim": "'
        for _ in range(MAX_BODY_BYTES // 4096 + 2):
            yield b"x" * 4096
        yield b'"}'

    assert "over" in one_line_error(server.post("/v1/verify", content=chunks()), 413)
    assert one_line_error(server.get("/v1/nothing"), 404) == "not found"
    assert one_line_error(server.get("/v1/verify"), 405) == "method not allowed"
    assert server.get("/v1/health").status_code == 200  # nothing above took the server down


def test_without_a_token_the_api_is_open_and_tells_no_paths(sample_index) -> None:
    with running_server(sample_index, args=("--max-queue", "4")) as server:
        health = httpx.get(server.url + "/v1/health", timeout=30)
    assert health.status_code == 200 and health.json()["queue"]["max"] == 4
    assert str(sample_index) not in health.text and "location" not in health.json()["store"]
    assert all("path" not in model for model in health.json()["models"])


def test_store_credentials_never_leave_the_server() -> None:
    assert (
        without_credentials("https://elastic:s3cret@es.example:9200/") == "https://es.example:9200/"
    )
    assert without_credentials("/data/index") == "/data/index"


class BlockingPipeline:
    """Stands in for the pipeline: records each batch, and holds the first until released."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = threading.Event()
        self.config = type("Config", (), {"hops": 7})()
        self.seconds: dict[str, float] = {}
        self.costs: dict[str, Counter[str]] = {}

    def verify_many(self, claims):
        self.release.wait(10)
        self.batches.append(list(claims))
        self.seconds["verdict"] = self.seconds.get("verdict", 0.0) + 0.5
        return [f"result of {c}" for c in claims]


def test_the_worker_batches_waiting_claims_and_refuses_past_its_queue() -> None:
    async def scenario() -> tuple[list, BaseException | None]:
        pipeline = BlockingPipeline()
        worker = PipelineWorker(pipeline, max_queue=3, max_batch=16)  # type: ignore[arg-type]
        worker.on_batch = lambda claims, seconds: told.append((claims, seconds))
        worker.start()
        first = asyncio.ensure_future(worker.verify(["a"]))
        await asyncio.sleep(0.2)  # the worker holds "a"; the next ones wait in the queue
        queued = [asyncio.ensure_future(worker.verify([c])) for c in ("b", "c", "d")]
        await asyncio.sleep(0.1)
        refused = None
        try:
            await worker.verify(["e"])
        except QueueFull as error:
            refused = error
        pipeline.release.set()
        results = await asyncio.gather(first, *queued)
        worker.stop()
        return [results, pipeline.batches], refused

    told: list[tuple[int, dict[str, float]]] = []
    (results, batches), refused = asyncio.run(scenario())
    assert isinstance(refused, QueueFull) and "busy" in str(refused)
    assert results == [["result of a"], ["result of b"], ["result of c"], ["result of d"]]
    assert batches == [["a"], ["b", "c", "d"]]  # the three that waited went as one batch
    assert told == [(1, {"verdict": 0.5}), (3, {"verdict": 0.5})]  # each batch's own seconds


def test_the_worker_drops_requests_whose_client_went_away() -> None:
    async def scenario() -> list[list[str]]:
        pipeline = BlockingPipeline()
        worker = PipelineWorker(pipeline, max_queue=8)  # type: ignore[arg-type]
        worker.start()
        first = asyncio.ensure_future(worker.verify(["a"]))
        await asyncio.sleep(0.2)
        gone = asyncio.ensure_future(worker.verify(["b"]))
        kept = asyncio.ensure_future(worker.verify(["c"]))
        await asyncio.sleep(0.1)
        gone.cancel()  # its client disconnected, or a drain's timeout ended it
        pipeline.release.set()
        await asyncio.gather(first, kept)
        worker.stop()
        return pipeline.batches

    assert asyncio.run(scenario()) == [["a"], ["c"]]


class PoisonedPipeline(BlockingPipeline):
    """Raises on any batch that holds the claim "poison", as a plugin would on strange input."""

    def verify_many(self, claims):
        if "poison" in claims:
            self.batches.append(list(claims))
            raise ValueError("cannot read this claim")
        return super().verify_many(claims)


def test_one_raising_claim_fails_only_its_own_request() -> None:
    async def scenario() -> list:
        pipeline = PoisonedPipeline()
        worker = PipelineWorker(pipeline, max_queue=8, max_batch=16)  # type: ignore[arg-type]
        worker.start()
        first = asyncio.ensure_future(worker.verify(["a"]))
        await asyncio.sleep(0.2)  # "a" holds the worker; the next three wait and go as one batch
        queued = [asyncio.ensure_future(worker.verify([c])) for c in ("b", "poison", "d")]
        await asyncio.sleep(0.1)
        pipeline.release.set()
        answers = await asyncio.gather(first, *queued, return_exceptions=True)
        worker.stop()
        return [answers, pipeline.batches]

    answers, batches = asyncio.run(scenario())
    assert answers[:2] == [["result of a"], ["result of b"]] and answers[3] == ["result of d"]
    assert isinstance(answers[2], ValueError)
    assert batches == [["a"], ["b", "poison", "d"], ["b"], ["poison"], ["d"]]  # then one by one


def test_every_status_the_server_answered_is_documented(server) -> None:
    """Real answers of the verify route, each status in OpenAPI with the error body."""
    route = "/v1/verify"
    answers = [
        server.post(route, json={"claim": CLAIM}),
        server.post(route, content=b'{"claim": ', headers={"Content-Type": "application/json"}),
        httpx.post(str(server.base_url) + route, json={"claim": CLAIM}),  # no token
        server.post(route, content=b"x" * (MAX_BODY_BYTES + 1)),
        server.post(route, json={"claim": " "}),
    ]
    documented = server.get("/openapi.json").json()["paths"][route]["post"]["responses"]
    for answer in answers:
        assert str(answer.status_code) in documented, answer.status_code
        if answer.status_code != 200:
            schema = documented[str(answer.status_code)]["content"]["application/json"]
            assert schema["schema"] == {"$ref": "#/components/schemas/ErrorAnswer"}
            assert set(answer.json()) == {"error"}
    assert {a.status_code for a in answers} == {200, 400, 401, 413, 422}


def test_strange_text_has_one_rule_on_every_route(server) -> None:
    answer = server.post("/v1/verify", json={"claim": "Paris\x00 is in \u202eFrance.\x1b"})
    assert answer.status_code == 200 and answer.json()["claim"] == "Paris  is in France. "
    hits = server.post("/v1/search", json={"query": "Paris\x07 France\u200b"})
    assert hits.status_code == 200 and hits.json()
    for path, body in (
        ("/v1/verify", {"claim": "Rome\ud83d is in Italy."}),
        ("/v1/verify/batch", {"claims": [CLAIM, "Rome\ud83d"]}),
        ("/v1/search", {"query": "Rome\ud83d"}),
        ("/v1/entail", {"claim": "Rome\ud83d", "evidence": ["Rome is in Italy."]}),
        ("/v1/entail", {"claim": "Rome is in Italy.", "evidence": ["Rome\ud83d"]}),
    ):
        sent = json.dumps(body).encode()  # "\\ud83d" escaped: valid JSON, not valid text
        answer = server.post(path, content=sent, headers={"Content-Type": "application/json"})
        one_line_error(answer, 422)  # refused before any stage reads it (pydantic's check)


def test_entail_reads_several_documents_one_by_one(server) -> None:
    documents = ["Paris is the capital of France.", "Henri Schoeman is a South African triathlete."]
    body = {"claim": "Henri Schoeman is a triathlete.", "evidence": documents, "documents": True}
    got = server.post("/v1/entail", json=body).json()
    EntailAnswer.model_validate(got)
    assert got["label"] == "SUPPORTS" and got["document"] == 1
    assert documents[1][got["window"]["start"] : got["window"]["end"]] == got["window"]["text"]
    one_source = server.post("/v1/entail", json={**body, "documents": False}).json()
    assert one_source["document"] is None
