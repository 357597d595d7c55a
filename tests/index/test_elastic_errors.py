"""Failures of the Elasticsearch store end in one clear line, within a bounded time, without
secrets; and the `feverous-es es` commands (no server: a fake cluster or a closed port)."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from click.testing import CliRunner
from elastic_transport import ConnectionTimeout, TlsError

from feverous_es.cli import main
from feverous_es.errors import IncompatibleIndex, StoreError, StoreUnauthorized, StoreUnreachable
from feverous_es.index.backends import STORES, open_store, open_writer
from feverous_es.index.elastic.cli import create_reader_key, reader_role
from feverous_es.index.elastic.client import check_cluster, connect
from feverous_es.index.elastic.config import ElasticConfig
from feverous_es.index.elastic.errors import elastic_errors
from feverous_es.index.elastic.store import ElasticStore
from tests.elastic_fake import FakeCluster, FakeNode, Request

SECRET = "pa55-w0rd-xyz"
CONFIG = ElasticConfig(url="https://es.example:9200", username="builder", password=SECRET)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and "Traceback" not in text
    assert SECRET not in text
    return text


def test_unreachable_cluster_is_one_line_and_quick() -> None:
    config = ElasticConfig(url=f"http://127.0.0.1:{closed_port()}", username="u",
                           password=SECRET, connect_timeout=2)  # fmt: skip
    started = time.monotonic()
    with pytest.raises(StoreUnreachable) as caught:
        connect(config)
    assert time.monotonic() - started < 5
    text = one_line(caught.value)
    assert text.startswith("cannot reach Elasticsearch at http://127.0.0.1:")
    assert "Connection refused" in text


def raising_node(error: Exception) -> type[FakeNode]:
    class Node(FakeNode):
        def perform_request(self, *args: Any, **kwargs: Any) -> Any:
            raise error

    return Node


def test_tls_failure_names_the_ca_setting() -> None:
    error = TlsError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    from feverous_es.index.elastic.client import make_client

    client = make_client(CONFIG, node_class=raising_node(error))
    with pytest.raises(StoreUnreachable) as caught:
        check_cluster(client, CONFIG)
    text = one_line(caught.value)
    assert text.startswith("TLS failure talking to Elasticsearch at https://es.example:9200")
    assert "CERTIFICATE_VERIFY_FAILED" in text and "FEVEROUS_ES_CA_CERTS" in text


def test_timeout_is_one_line() -> None:
    from feverous_es.index.elastic.client import make_client

    client = make_client(CONFIG, node_class=raising_node(ConnectionTimeout("timed out")))
    with pytest.raises(StoreUnreachable, match="did not answer within the timeout") as caught:
        check_cluster(client, CONFIG)
    one_line(caught.value)


def status_handler(status: int, kind: str, reason: str):
    def handler(request: Request) -> tuple[int, Any]:
        return status, {"error": {"type": kind, "reason": reason}, "status": status}

    return handler


def test_bad_credentials() -> None:
    fake = FakeCluster()
    fake.handlers.append(status_handler(401, "security_exception", "unable to authenticate"))
    with pytest.raises(StoreUnauthorized) as caught:
        check_cluster(fake.client(CONFIG), CONFIG)
    text = one_line(caught.value)
    assert "refused the credentials (401)" in text and "FEVEROUS_ES_PASSWORD" in text


def test_cluster_version_is_checked() -> None:
    fake = FakeCluster()
    fake.version = "8.11.4"
    with pytest.raises(StoreError, match=r"is version 8\.11\.4: this program needs 8\.12 to 9\.x"):
        check_cluster(fake.client(), CONFIG)
    fake.version = "9.1.0"
    assert check_cluster(fake.client(), CONFIG) == "9.1.0"
    old = FakeCluster()
    old.handlers.append(
        status_handler(406, "media_type_header_exception",
                       "Content-Type header [application/vnd.elasticsearch+json; "
                       "compatible-with=8] is not supported")
    )  # fmt: skip
    with pytest.raises(StoreError, match=r"too old: this program needs 8\.12 or later"):
        check_cluster(old.client(), CONFIG)


def test_a_read_only_key_may_not_see_the_version() -> None:
    fake = FakeCluster()
    fake.handlers.append(
        lambda r: (403, {"error": {"type": "security_exception", "reason": "action "
                                   "[cluster:monitor/main] is unauthorized"}, "status": 403})
        if r.path == "/" else None
    )  # fmt: skip
    assert check_cluster(fake.client(), CONFIG) is None


def test_forbidden_and_licence_errors() -> None:
    fake = FakeCluster()
    client = fake.client(CONFIG)
    fake.handlers.append(status_handler(403, "security_exception",
                                        "current license is non-compliant for [rrf]"))  # fmt: skip
    with (
        pytest.raises(StoreError, match="use hybrid = knn_query or msearch") as licence,
        elastic_errors(CONFIG),
    ):
        client.search(index="x")
    assert not isinstance(licence.value, StoreUnauthorized)  # the credentials are not at fault
    fake.handlers[0] = status_handler(403, "security_exception", "action [indices:data/write]")
    forbidden = "the credentials lack a permission: security_exception"
    with pytest.raises(StoreUnauthorized, match=forbidden), elastic_errors(CONFIG):
        client.search(index="x")


def test_existing_index_with_a_conflicting_mapping() -> None:
    fake = FakeCluster()
    fake.client().indices.create(index="feverous-elements-v1", mappings={"properties": {}})
    with pytest.raises(IncompatibleIndex) as caught:
        open_writer_with(fake)
    assert "not made by feverous-es" in one_line(caught.value)


def open_writer_with(fake: FakeCluster) -> Any:
    from feverous_es.index.elastic.writer import ElasticWriter

    return ElasticWriter(CONFIG, 4, client=fake.client())


def test_secrets_never_in_messages() -> None:
    fake = FakeCluster()
    fake.handlers.append(status_handler(400, "illegal_argument_exception",
                                        f"bad password {SECRET}"))  # fmt: skip
    with pytest.raises(StoreError) as caught, elastic_errors(CONFIG, "doing it"):
        fake.client(CONFIG).search(index="x")
    assert one_line(caught.value) == (
        "doing it: Elasticsearch error 400: illegal_argument_exception: bad password ***"
    )


def test_backends_register_elasticsearch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "elasticsearch" in STORES
    monkeypatch.delenv("FEVEROUS_ES_URL", raising=False)
    monkeypatch.setenv("FEVEROUS_ES_ELASTIC_CONFIG", "/nonexistent/es.toml")
    with pytest.raises(StoreError, match=r"config file /nonexistent/es\.toml does not exist"):
        open_store("elasticsearch", "feverous-index")
    monkeypatch.delenv("FEVEROUS_ES_ELASTIC_CONFIG")
    monkeypatch.setenv("HOME", "/nonexistent")
    with pytest.raises(StoreError, match="no Elasticsearch URL"):
        open_writer("elasticsearch", "feverous-index", 384)


def test_cli_failures_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEVEROUS_ES_URL", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("FEVEROUS_ES_USER", "builder")
    monkeypatch.setenv("FEVEROUS_ES_PASSWORD", SECRET)
    runner = CliRunner()
    for args in (
        ["es", "status"],
        ["es", "reader-key"],
        ["search", "x", "--store", "elasticsearch", "--mode", "bm25"],
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 1, (args, result.output)
        output = result.output.strip()
        assert "cannot reach Elasticsearch at http://127.0.0.1:" in output
        assert len(output.splitlines()) == 1 and SECRET not in output
        assert not isinstance(result.exception, Exception) or isinstance(
            result.exception, SystemExit
        )


def test_reader_key_role() -> None:
    role = reader_role(CONFIG)
    assert role == {
        "feverous-es-reader": {
            "cluster": [],
            "indices": [
                {
                    "names": ["feverous-elements", "feverous-pages", "feverous-tables"],
                    "privileges": ["read"],
                    "allow_restricted_indices": False,
                }
            ],
        }
    }
    fake = FakeCluster()
    answer = create_reader_key(fake.client(CONFIG), CONFIG, "team-x", "30d")
    assert answer["encoded"] == "ZW5jb2RlZA=="
    (request,) = [r for r in fake.requests if r.path == "/_security/api_key"]
    assert request.body == {
        "name": "team-x",
        "role_descriptors": role,
        "metadata": {"application": "feverous-es", "access": "read aliases"},
        "expiration": "30d",
    }
    with pytest.raises(StoreError, match="an API key cannot create a key with privileges"):
        create_reader_key(
            fake.client(), ElasticConfig(url="https://h", api_key="id:key"), "n", None
        )


def test_reader_key_command_prints_only_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCluster()
    import feverous_es.index.elastic.cli as es_cli

    monkeypatch.setattr(es_cli, "_connect", lambda: (CONFIG, fake.client(CONFIG)))
    result = CliRunner().invoke(main, ["es", "reader-key", "--name", "team-y"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == "ZW5jb2RlZA=="
    assert fake.api_keys[0]["name"] == "team-y"


def test_store_open_errors_are_store_errors() -> None:
    fake = FakeCluster()
    fake.handlers.append(status_handler(401, "security_exception", "bad"))
    with pytest.raises(StoreError, match="refused the credentials"):
        ElasticStore(CONFIG, client=fake.client(CONFIG))


@pytest.mark.parametrize(
    ("url", "gzipped"),
    [("https://es.example:9200", True), ("http://10.0.0.7:9200", True),
     ("http://localhost:9200", False), ("http://127.0.0.1:9200", False),
     ("http://[::1]:9200", False)],
)  # fmt: skip
def test_requests_beyond_this_host_are_gzipped(url: str, gzipped: bool) -> None:
    """A remote worker sends vectors as JSON text: compressed; a node on this host: plain."""
    from feverous_es.index.elastic.client import make_client

    client = make_client(ElasticConfig(url=url))
    assert [node.config.http_compress for node in client.transport.node_pool.all()] == [gzipped]
    off = make_client(ElasticConfig(url=url, http_compress=False))
    assert [node.config.http_compress for node in off.transport.node_pool.all()] == [False]
