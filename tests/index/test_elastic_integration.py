"""The whole Elasticsearch path against a real node: build -> bulk load -> alias swap -> BM25,
kNN and hybrid search -> ``verify`` / ``predict`` -> reader access -> ``kill -9`` and resume ->
``es status`` / ``new-build`` / ``prune`` -> one-line errors.

The node comes from ``FEVEROUS_ES_TEST_URL``, ``FEVEROUS_ES_TEST_USER`` and
``FEVEROUS_ES_TEST_PASSWORD`` (a user that may create indices), as ``python
scripts/es_test_node.py run -- pytest`` sets them; any cluster of 8.12 or later does (e.g. the one
in docker/compose.yaml). Without one these tests skip, unless ``FEVEROUS_ES_REQUIRE_NODE`` is set
(CI): then they fail. Every run uses its own index prefixes and deletes what it made.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from elasticsearch import Elasticsearch
from elasticsearch.helpers import scan

from feverous_es.errors import StoreError
from feverous_es.index.building.builder import build
from feverous_es.index.dump.page import parse_page
from feverous_es.index.dump.wiki import WikiDB, page_part
from feverous_es.index.elastic.analysis import STANDARD_STOP, probe_analysis
from feverous_es.index.elastic.builds import build_meta, delete_prefix
from feverous_es.index.elastic.cli import create_reader_key, reader_role
from feverous_es.index.elastic.client import check_cluster, connect
from feverous_es.index.elastic.config import ElasticConfig, load_config
from feverous_es.index.elastic.errors import elastic_errors
from feverous_es.index.elastic.store import ElasticStore
from feverous_es.index.elastic.writer import ElasticWriter
from tests.conftest import REPO, SAMPLE_DB, write_lines
from tests.elastic_fake import HashEncoder
from tests.es_proxy import HoldingProxy, Seen

NODE_URL = os.environ.get("FEVEROUS_ES_TEST_URL")
if not NODE_URL and os.environ.get("FEVEROUS_ES_REQUIRE_NODE"):
    pytest.fail(
        "FEVEROUS_ES_REQUIRE_NODE is set but FEVEROUS_ES_TEST_URL is not: run the tests with "
        "`python scripts/es_test_node.py run -- pytest`",
        pytrace=False,
    )
pytestmark = pytest.mark.skipif(
    not NODE_URL,
    reason="no Elasticsearch node: run `python scripts/es_test_node.py run -- pytest`, or set "
    "FEVEROUS_ES_TEST_URL / _USER / _PASSWORD",
)

DIM = 16
CLAIM = "Gold medalist Henri Schoeman won bronze at Rio in 2016."


def node_config(prefix: str, dims: int = DIM) -> ElasticConfig:
    env = {
        "FEVEROUS_ES_URL": NODE_URL or "",
        "FEVEROUS_ES_USER": os.environ.get("FEVEROUS_ES_TEST_USER", ""),
        "FEVEROUS_ES_PASSWORD": os.environ.get("FEVEROUS_ES_TEST_PASSWORD", ""),
    }
    config = load_config(env={k: v for k, v in env.items() if v})
    return replace(config, prefix=prefix, replicas=0, dims=dims)


# The lease of a worker these tests kill or stop: it runs out in seconds, not a minute, so
# another takes its part over at once. Only those workers hold so short a lease: a worker left
# to finish on a busy two-core machine can go 3 s without a lease write (half of this lease)
# and would fence itself.
SHORT_LEASE = 6


def cli_env(config: ElasticConfig, lease: float | None = None) -> dict[str, str]:
    """The environment of a ``feverous-es`` process using ``config``'s cluster and prefix;
    ``lease``: its lease's seconds (None: the default minute)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEVEROUS_ES_")}
    env.update(FEVEROUS_ES_URL=config.url or "", FEVEROUS_ES_PREFIX=config.prefix,
               FEVEROUS_ES_REPLICAS="0")  # fmt: skip
    if lease is not None:
        env["FEVEROUS_ES_LEASE_SECONDS"] = f"{lease:g}"
    if config.username:
        env.update(FEVEROUS_ES_USER=config.username, FEVEROUS_ES_PASSWORD=config.password or "")
    return env


def feverous_es(config: ElasticConfig, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "feverous_es", *args],
        env=cli_env(config),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def config() -> Iterator[ElasticConfig]:
    config = node_config(f"feverous-it-{uuid.uuid4().hex[:8]}")
    yield config
    delete_prefix(config)


@pytest.fixture(scope="module")
def built(config: ElasticConfig) -> ElasticConfig:
    db = WikiDB(SAMPLE_DB)
    writer = ElasticWriter(config, DIM)
    try:
        # The first 75 pages: prose pages, then the first with tables (from the 71st on).
        report = build(db, writer, HashEncoder(DIM), limit=75, chunk_elements=500)
    finally:
        writer.close()
        db.close()
    assert report.state.complete and report.state.pages == 75
    return config


def test_cluster_is_supported(config: ElasticConfig) -> None:
    client = connect(config)
    try:
        version = check_cluster(client, config)
    finally:
        client.close()
    assert version is not None and int(version.split(".")[0]) >= 8


def test_build_publishes_through_the_aliases(built: ElasticConfig) -> None:
    client = connect(built)
    try:
        for alias in built.aliases:
            assert list(client.indices.get_alias(name=alias).body) == [f"{alias}-v1"]
        settings = client.indices.get_settings(index=f"{built.elements_alias}-v1").body
        index = next(iter(settings.values()))["settings"]["index"]
        # Reset to the default (absent from the settings), which keeps search-idle.
        assert "refresh_interval" not in index
        assert index["number_of_replicas"] == "0"
        mapping = client.indices.get_mapping(index=built.elements_alias).body
        mappings = next(iter(mapping.values()))["mappings"]
        assert mappings["properties"]["vector"]["index_options"]["type"] == "int8_hnsw"
        meta = build_meta(mappings)
        assert meta is not None and meta["complete"] and meta["format_version"] == 3
        assert meta["analysis"] == probe_analysis(client)
        # One vector per key: a table row's vector is stored once, not on each of its cells.
        keys = {hit["_source"]["vector_key"] for hit in scan(
            client, index=built.elements_alias, _source=["vector_key"], size=5000)}  # fmt: skip
        with_vector = client.count(
            index=built.elements_alias, query={"exists": {"field": "vector"}}
        )
        assert with_vector["count"] == len(keys) < meta["elements"]
    finally:
        client.close()


def test_every_hybrid_mode_and_batch_search(built: ElasticConfig) -> None:
    """What only Elasticsearch has: the hybrid modes and batched searches (the rest of the
    search contract is tests/index/test_store_contract.py, run on this node too)."""
    store = ElasticStore(built)
    try:
        [target] = store.get_elements(["Mars_sentence_0"])
        vector = HashEncoder(DIM).embed([target.embed_text])[0]
        # Real BM25 and int8 kNN (the stand-in's scores are cruder).
        assert store.search_text("fourth planet from the Sun", 10)[0].element.id == target.id
        # int8 kNN finds the vector itself; its cosine is approximate: the build's merged segment
        # keeps quantiles merged from its parts, a few hundredths off at these 16 dimensions.
        [nearest] = store.search_vector(vector, 1)
        assert nearest.element.id == target.id
        assert nearest.score == pytest.approx(1.0, abs=0.1)
    finally:
        store.close()
    for mode in ("knn_query", "msearch"):
        hybrid_store = ElasticStore(replace(built, hybrid=mode))
        try:
            hybrid = hybrid_store.search_hybrid("fourth planet", vector, 5)
            assert hybrid[0].element.id == target.id, mode
            batch = hybrid_store.search_hybrid_batch(
                [("fourth planet", vector), ("planet", np.zeros(DIM))], 5
            )
            assert len(batch) == 2 and all(batch), mode
        finally:
            hybrid_store.close()


def test_verify_and_predict_on_elasticsearch(
    resumed: tuple[ElasticConfig, dict], tmp_path: Path
) -> None:
    sample, report = resumed
    assert report["state"]["complete"] and f"{sample.elements_alias}-v1" in report["index"]
    verified = feverous_es(sample, "verify", CLAIM, "--store", "elasticsearch", "--json")
    assert verified.returncode == 0, verified.stderr
    answer = json.loads(verified.stdout)
    assert answer["label"] == "SUPPORTS"
    assert "Henri Schoeman_sentence_2" in [e["id"] for e in answer["evidence"][:5]]
    claims = tmp_path / "claims.jsonl"
    lines = (REPO / "sample" / "claims.jsonl").read_text().splitlines()[:3]
    write_lines(claims, lines)
    out = tmp_path / "predictions.jsonl"
    predicted = feverous_es(
        sample, "predict", str(claims), "-o", str(out), "--store", "elasticsearch", "--hops", "1"
    )
    assert predicted.returncode == 0, predicted.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and all(row["predicted_evidence"] for row in rows)


def grant_reader_by_file_realm(config: ElasticConfig, name: str, password: str) -> None:
    """Give a user the reader role through the test node's file realm (users, users_roles and
    roles.yml, which the node reloads within seconds)."""
    conf = Path(os.environ["FEVEROUS_ES_TEST_CONFIG"])
    (role,) = reader_role(config).items()
    with (conf / "roles.yml").open("a") as roles:
        roles.write(f"\n{name}: {json.dumps(role[1])}\n")  # JSON is YAML
    digest = base64.b64encode(hashlib.sha1(password.encode()).digest()).decode()
    with (conf / "users").open("a") as users:
        users.write(f"{name}:{{SHA}}{digest}\n")
    with (conf / "users_roles").open("a") as users_roles:
        users_roles.write(f"{name}:{name}\n")


def test_reader_reads_the_aliases_only(built: ElasticConfig) -> None:
    """The reader key's role on a real node. Where the cluster cannot store API keys (its
    security index needs analysis-common, which Elastic's integ-test distribution lacks) the
    command says so in one line, and the same role is granted through the file realm."""
    admin = connect(built)
    try:
        without_common = probe_analysis(admin) == STANDARD_STOP
        if without_common:
            with pytest.raises(StoreError, match="cannot store API keys") as caught:
                create_reader_key(admin, built, f"{built.prefix}-reader", "1d")
            assert "\n" not in str(caught.value)
            name, password = f"{built.prefix}-reader", uuid.uuid4().hex
            grant_reader_by_file_realm(built, name, password)
            reader = replace(built, username=name, password=password)
        else:
            answer = create_reader_key(admin, built, f"{built.prefix}-reader", "1d")
            reader = replace(built, api_key=answer["encoded"], username=None, password=None)
    finally:
        admin.close()
    deadline = time.monotonic() + 30
    while True:  # the file realm reloads its files every few seconds
        try:
            store = ElasticStore(reader)
            break
        except StoreError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    try:
        assert store.search_text("planet", 3)
        assert store.search_tables("Turkish Cup", 3)  # the tables alias too
        assert store.state().complete
    finally:
        store.close()
    client = connect(reader)
    try:
        with pytest.raises(StoreError, match="lack a permission"), elastic_errors(reader):
            client.index(index=reader.elements_alias, document={"id": "x"})
        # The versioned indices are not readable by name, only through the aliases.
        with pytest.raises(StoreError, match="lack a permission"), elastic_errors(reader):
            client.search(index=f"{reader.elements_alias}-v1")
    finally:
        client.close()


def element_ids(config: ElasticConfig) -> list[str]:
    client = connect(config)
    try:
        return [
            hit["_source"]["id"]
            for hit in scan(client, index=config.elements_alias, _source=["id"], size=5000)
        ]
    finally:
        client.close()


@pytest.fixture(scope="module")
def resumed(sample_vectors: Path) -> Iterator[tuple[ElasticConfig, dict]]:
    """The sample indexed the hard way: ``kill -9`` once two chunks are saved, then the same
    command again, which resumes; its configuration and the resumed run's ``--json`` report.
    The verify test reads this build too (one build of the sample serves both). The killed
    run embeds, so the kill lands as in any build, mostly while a chunk is embedded; the run
    that resumes reads the vectors of the run's sample index (``--vector-cache``)."""
    sample = node_config(f"feverous-it-{uuid.uuid4().hex[:8]}", dims=384)
    cache = ["--vector-cache", str(sample_vectors)]
    args = [sys.executable, "-m", "feverous_es", "index", str(SAMPLE_DB), "--store",
            "elasticsearch", "--chunk-size", "1500"]  # fmt: skip
    process = subprocess.Popen(args, env=cli_env(sample, SHORT_LEASE), cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    client = connect(sample)
    try:
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline:
            mappings = client.options(ignore_status=404).indices.get_mapping(
                index=f"{sample.elements_alias}-v1"
            )
            meta = build_meta(next(iter(mappings.body.values()), {}).get("mappings", {})) or {}
            if meta.get("next_seq", 0) >= 2:  # two chunks saved, the third in flight
                break
            time.sleep(0.2)
        assert process.poll() is None, "the build ended before it could be killed"
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert not client.indices.exists_alias(name=sample.elements_alias)
    finally:
        client.close()
    indexed = feverous_es(sample, "index", str(SAMPLE_DB), "--store", "elasticsearch", *cache,
                          "--json")  # fmt: skip
    assert indexed.returncode == 0, indexed.stderr
    yield sample, json.loads(indexed.stdout)
    delete_prefix(sample)


def test_kill_9_midway_then_resume_holds_every_element_once(
    resumed: tuple[ElasticConfig, dict],
) -> None:
    sample, report = resumed
    ids = element_ids(sample)
    assert len(ids) == len(set(ids)) == report["state"]["elements"]
    with WikiDB(SAMPLE_DB) as db:
        expected = {e.id for _, page, data in db.rows() for e in parse_page(page, data).elements}
    assert set(ids) == expected


def index_part(
    config: ElasticConfig, part: str, vectors: Path | None, out: int = subprocess.PIPE,
    lease: float | None = None,
) -> subprocess.Popen:  # fmt: skip
    """``feverous-es index`` of the sample as part ``part`` (``I/N``), started, not waited for;
    ``vectors``: a vector cache to read (None: embed); ``lease``: as :func:`cli_env`'s."""
    cache = ["--vector-cache", str(vectors)] if vectors else []
    args = [sys.executable, "-m", "feverous_es", "index", str(SAMPLE_DB), "--store",
            "elasticsearch", "--chunk-size", "200", "--part", part, "--json", *cache]  # fmt: skip
    return subprocess.Popen(args, env=cli_env(config, lease), cwd=REPO, stdout=out,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def finished(process: subprocess.Popen) -> dict:
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr
    return json.loads(stdout)


def wait_for_a_saved_chunk(
    client: Elasticsearch, config: ElasticConfig, part: str, worker: subprocess.Popen
) -> None:
    """Until ``part``'s progress says a chunk is saved (or its ``worker`` ended, or 300 s)."""
    progress = f"{config.elements_alias}-v1-parts"
    deadline = time.monotonic() + 300
    while worker.poll() is None and time.monotonic() < deadline:
        # 404: not made yet; 503: made, its shard not started yet.
        doc = client.options(ignore_status=(404, 503)).get(index=progress, id=part).body
        if doc.get("found") and doc["_source"]["next_seq"] >= 1:
            return
        time.sleep(0.1)


@pytest.fixture(scope="module")
def in_parts(sample_vectors: Path) -> Iterator[tuple[ElasticConfig, dict]]:
    """The sample indexed by 3 parts as parallel processes, the hard way: parts 1 and 2
    together, part 2 killed (-9) once it saved a chunk, a publish tried before parts 2 and 3
    are done; then parts 2 (resuming, once the killed worker's lease ran out) and 3 together,
    part 3 by two workers at once (as a scheduler may start two). Its configuration, and what
    was seen on the way."""
    config = node_config(f"feverous-it-{uuid.uuid4().hex[:8]}", dims=384)
    seen: dict = {}
    # The part killed embeds (as in the killed one-process build above); the others read the
    # vectors of the run's sample index.
    first = index_part(config, "1/3", sample_vectors)
    second = index_part(config, "2/3", None, subprocess.DEVNULL, SHORT_LEASE)
    client = connect(config)
    try:
        wait_for_a_saved_chunk(client, config, "2", second)
        assert second.poll() is None, "part 2 ended before it could be killed"
        second.send_signal(signal.SIGKILL)
        second.wait()
        seen["first"] = finished(first)
        seen["early publish"] = feverous_es(config, "es", "publish")
        seen["alias before"] = client.indices.exists_alias(name=config.elements_alias)
        last = [index_part(config, part, sample_vectors) for part in ("2/3", "3/3", "3/3")]
        seen["last"] = [finished(process) for process in last]  # every one exits 0
        seen["status"] = json.loads(feverous_es(config, "es", "status", "--json").stdout)
    finally:
        client.close()
    yield config, seen
    delete_prefix(config)


def test_a_build_in_parts_publishes_only_when_every_part_is_done(
    in_parts: tuple[ElasticConfig, dict],
) -> None:
    config, seen = in_parts
    assert seen["first"]["waiting_for"] == ["2/3", "3/3"]
    early = seen["early publish"]
    assert early.returncode == 1 and "2/3, 3/3 not complete" in early.stderr
    assert not seen["alias before"]
    # The last to finish published the build: it waits for no part.
    assert min(len(report["waiting_for"]) for report in seen["last"]) == 0
    # Part 3 had one writer: the other worker waited for its lease and found it complete.
    twins = seen["last"][1:]
    assert sorted(report["elements"] > 0 for report in twins) == [False, True]
    assert [r["state"]["elements"] for r in twins] == [twins[0]["state"]["elements"]] * 2
    (build,) = seen["status"]["builds"]
    assert build["published"] and build["state"]["complete"]
    with WikiDB(SAMPLE_DB) as db:
        pages = Counter(page_part(page, 3) for _, page, _ in db.rows())
    assert [(p["part"], p["complete"], p["pages"]) for p in build["parts"]] == [
        (f"{i}/3", True, pages[i]) for i in (1, 2, 3)
    ]
    client = connect(config)
    try:
        for alias in config.aliases:
            assert list(client.indices.get_alias(name=alias).body) == [f"{alias}-v1"]
    finally:
        client.close()


def taken_over_while_stopped(
    config: ElasticConfig, stopped: subprocess.Popen, vectors: Path,
    then: Callable[[], None] = lambda: None,
) -> tuple[dict, str]:  # fmt: skip
    """Stop part 1/2's worker ``stopped`` (SIGSTOP), call ``then``, and past its lease let
    another worker take part 1/2 over and complete it; then resume the first (SIGCONT). The
    other's report, and what the first wrote on stderr until it ended."""
    stopped.send_signal(signal.SIGSTOP)
    try:
        then()
        time.sleep(SHORT_LEASE + 2)  # past its lease
        owner = finished(index_part(config, "1/2", vectors))
    finally:
        stopped.send_signal(signal.SIGCONT)
    _, stderr = stopped.communicate(timeout=300)
    return owner, stderr


def test_a_worker_stopped_past_its_lease_then_resumed_damages_nothing(
    sample_vectors: Path,
) -> None:
    """Part 1 of 2 stopped (SIGSTOP) once it saved a chunk, longer than its lease; a twin takes
    the part over and completes it; the stopped worker, resumed (SIGCONT), fences itself: it
    stops, saying why, with nothing written or deleted. Part 2 completes and publishes: every
    element of the dump once, the twin's chunks intact (publishing counts them)."""
    config = node_config(f"feverous-it-{uuid.uuid4().hex[:8]}", dims=384)
    stopped = index_part(config, "1/2", None, lease=SHORT_LEASE)  # embeds: slow to stop midway
    client = connect(config)
    try:
        wait_for_a_saved_chunk(client, config, "1", stopped)
        if stopped.poll() is not None:
            pytest.fail(f"part 1 ended before it could be stopped: {stopped.communicate()[1]}")
        twin, stderr = taken_over_while_stopped(config, stopped, sample_vectors)
        last = finished(index_part(config, "2/2", sample_vectors))
    finally:
        client.close()
    try:
        assert stopped.returncode == 1 and "without writing more" in stderr, stderr
        assert twin["state"]["complete"] and last["waiting_for"] == []
        ids = element_ids(config)
        with WikiDB(SAMPLE_DB) as db:
            expected = [
                e.id for _, page, data in db.rows() for e in parse_page(page, data).elements
            ]
        assert len(ids) == len(set(ids)) and set(ids) == set(expected)
    finally:
        delete_prefix(config)


def held(proxy: HoldingProxy, worker: subprocess.Popen, seconds: float = 300) -> bool:
    """Whether ``proxy`` holds an answer for ``worker`` before it ends (or ``seconds`` pass)."""
    deadline = time.monotonic() + seconds
    while worker.poll() is None and time.monotonic() < deadline:
        if proxy.holding.wait(0.2):
            return True
    return proxy.holding.is_set()


def sample_element_ids() -> set[str]:
    with WikiDB(SAMPLE_DB) as db:
        return {e.id for _, page, data in db.rows() for e in parse_page(page, data).elements}


def test_a_worker_stopped_in_its_open_time_scan_deletes_nothing_of_the_new_owner(
    sample_vectors: Path,
) -> None:
    """Part 1 of 2 is killed with a chunk's documents in but its progress not saved. A worker
    resuming it is stopped (SIGSTOP) with the hits of its discard's scroll in hand, past its
    lease; another takes the part, deletes the leftovers itself, writes the same ids again and
    completes it. The first, resumed (SIGCONT), must delete none of them: it is fenced before
    its bulk deletes, and each delete carries the sequence number it read. Part 2 then
    publishes, counting every document."""
    config = node_config(f"feverous-it-{uuid.uuid4().hex[:8]}", dims=384)

    def chunk_in_flight(method: str, path: str, seen: Seen) -> bool:
        return path.startswith("/_bulk") and seen.saved_chunks >= 1

    def discard_scroll(method: str, path: str, seen: Seen) -> bool:
        return "/_search" in path and "scroll=" in path

    killed, stopped = HoldingProxy(config.url or "", chunk_in_flight), None
    try:
        with killed.running():
            first = index_part(replace(config, url=killed.url), "1/2", sample_vectors,
                               lease=SHORT_LEASE)  # fmt: skip
            assert held(killed, first), f"no chunk was in flight: {first.communicate()}"
            first.kill()  # the chunk's documents are in, its progress is not
            first.wait()
        stopped = HoldingProxy(config.url or "", discard_scroll)
        with stopped.running():
            resuming = index_part(replace(config, url=stopped.url), "1/2", sample_vectors,
                                  lease=SHORT_LEASE)  # fmt: skip
            assert held(stopped, resuming), f"no discard: {resuming.communicate()}"
            # the hits wait in its socket while it is stopped
            owner, stderr = taken_over_while_stopped(config, resuming, sample_vectors,
                                                     then=stopped.release)  # fmt: skip
        last = finished(index_part(config, "2/2", sample_vectors))
        assert resuming.returncode == 1 and "without writing more" in stderr, stderr
        assert owner["state"]["complete"] and last["waiting_for"] == []
        ids = element_ids(config)
        assert len(ids) == len(set(ids)) and set(ids) == sample_element_ids()
    finally:
        delete_prefix(config)


def test_a_new_build_takes_its_shards_and_a_part_on_another_dump_refuses(
    sample_vectors: Path, tmp_path: Path
) -> None:
    """`es new-build --shards N` gives every index of the build N primaries; a build in parts
    records its dump, and a part started on another one refuses with one line, writing nothing."""
    from feverous_es.index.dump.wiki import write_dump

    config = node_config(f"feverous-it-{uuid.uuid4().hex[:8]}", dims=384)
    with WikiDB(SAMPLE_DB) as db:
        rows = [(page, data) for _, page, data in db.rows(limit=12)]
    dumps = [tmp_path / "a.db", tmp_path / "b.db"]
    write_dump(dumps[0], rows[:6])
    write_dump(dumps[1], rows[6:])
    client = connect(config)
    try:
        created = feverous_es(config, "es", "new-build", "--shards", "2")
        assert created.returncode == 0 and "2 primary shard(s)" in created.stdout, created.stderr
        settings = client.indices.get_settings(index=f"{config.prefix}-*-v1").body
        assert {s["settings"]["index"]["number_of_shards"] for s in settings.values()} == {"2"}
        args = ["--store", "elasticsearch", "--vector-cache", str(sample_vectors), "--json"]
        first = feverous_es(config, "index", str(dumps[0]), "--part", "1/2", *args)
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout)["waiting_for"] == ["2/2"]
        other = feverous_es(config, "index", str(dumps[1]), "--part", "2/2", *args)
        assert other.returncode == 1 and "reads another dump" in other.stderr
        assert len(other.stderr.strip().splitlines()) == 1, other.stderr
        progress = client.options(ignore_status=404).get(
            index=f"{config.elements_alias}-v1-parts", id="2"
        )
        assert not progress.body.get("found"), "the refused part wrote its progress"
    finally:
        client.close()
        delete_prefix(config)


KNN_NOISE = 0.05  # how far two builds' int8 kNN scores of one vector may differ


def ranking(hits: list) -> tuple[list[float], list[str]]:
    """Hits as two builds of the same documents must agree on them: the scores in order, and
    the ids above the last score (ties are ordered by where a document sits in its segment,
    which differs with the order documents were written)."""
    scores = [round(hit.score, 2) for hit in hits]
    return scores, sorted(hit.element.id for hit in hits if round(hit.score, 2) > scores[-1])


def test_a_build_in_parts_holds_what_one_process_writes(
    in_parts: tuple[ElasticConfig, dict], resumed: tuple[ElasticConfig, dict]
) -> None:
    """The same documents, once each (part 2 was killed mid-build and resumed), and the same
    BM25 and kNN answers as the sample built by one process."""
    from feverous_es.runtime.embedder import Embedder

    parted, (whole, _) = in_parts[0], resumed
    ids = element_ids(parted)
    assert len(ids) == len(set(ids)) and set(ids) == set(element_ids(whole))
    queries = ["fourth planet from the Sun", "Henri Schoeman triathlon bronze", "Turkish Cup"]
    vectors = Embedder().embed(queries)
    # HNSW finds approximately, along a graph each build lays out its own way: searched with
    # 10,000 candidates a shard (the sample's every vector), both builds search exhaustively.
    stores = [ElasticStore(replace(c, num_candidates_factor=1000)) for c in (parted, whole)]
    try:
        a, b = (store.state() for store in stores)
        assert (a.elements, a.pages) == (b.elements, b.pages)
        for query, vector in zip(queries, vectors, strict=True):
            text = [ranking(store.search_text(query, 10)) for store in stores]
            assert text[0] == text[1], query
            # int8 kNN: a segment's quantiles depend on the documents it was first written with,
            # so two builds of the same vectors score a few hundredths apart (as two one-process
            # builds written in other chunks do), and a table row's cells share one vector: the
            # same nearest vector (key), and every key one build scores clearly above its last
            # hit (by more than that noise) among the other's; near its last score they swap.
            knn = [store.search_vector(vector, 10) for store in stores]
            keys = [list(dict.fromkeys(hit.element.vector_key for hit in hits)) for hits in knn]
            assert keys[0][0] == keys[1][0], query
            for mine, theirs in ((knn[0], keys[1]), (knn[1], keys[0])):
                clear = {h.element.vector_key for h in mine if h.score > mine[-1].score + KNN_NOISE}
                assert clear <= set(theirs), query
            for a, b in zip(knn[0][:3], knn[1][:3], strict=True):
                assert a.score == pytest.approx(b.score, abs=KNN_NOISE), query
    finally:
        for store in stores:
            store.close()


def test_es_status_new_build_and_prune(built: ElasticConfig) -> None:
    status = feverous_es(built, "es", "status", "--json")
    assert status.returncode == 0, status.stderr
    (v1,) = json.loads(status.stdout)["builds"]
    assert v1["published"] and v1["state"]["analysis"] in ("english_folding", "standard_stop")
    made = feverous_es(built, "es", "new-build", "--dim", str(DIM))
    assert made.returncode == 0 and "created v2" in made.stdout, made.stderr
    db = WikiDB(SAMPLE_DB)
    writer = ElasticWriter(built, DIM)
    try:
        assert writer.version == 2
        build(db, writer, HashEncoder(DIM), limit=5)
    finally:
        writer.close()
        db.close()
    pruned = feverous_es(built, "es", "prune", "--keep", "1", "--yes")
    assert pruned.returncode == 0, pruned.stderr
    assert f"{built.elements_alias}-v1" in pruned.stdout
    rows = json.loads(feverous_es(built, "es", "status", "--json").stdout)["builds"]
    assert [(row["version"], row["published"]) for row in rows] == [(2, True)]
    store = ElasticStore(built)
    try:
        assert store.state().pages == 5
    finally:
        store.close()


@pytest.fixture
def not_elasticsearch() -> Iterator[str]:
    """An HTTP server that is not Elasticsearch."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def stopped_node(config: ElasticConfig) -> ElasticConfig:
    """The test node's credentials at a port nothing listens on any more, as a stopped node
    leaves it (a node killed under a server: tests/serve/test_serve_node_loss.py)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return replace(config, url=f"http://127.0.0.1:{port}")


def test_bad_credentials_wrong_url_and_stopped_node_are_one_line(
    config: ElasticConfig, not_elasticsearch: str, stopped_node: ElasticConfig
) -> None:
    cases = [
        (replace(config, password="definitely-wrong"), "refused the credentials"),
        (replace(config, url=not_elasticsearch), "not a supported Elasticsearch"),
        (stopped_node, "cannot reach Elasticsearch"),
    ]
    for bad, message in cases:
        done = feverous_es(bad, "es", "status")
        assert done.returncode == 1, (message, done.stdout)
        line = done.stderr.strip()
        assert "\n" not in line and message in line, line
        assert "Traceback" not in line and "definitely-wrong" not in line
