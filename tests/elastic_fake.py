"""An in-memory stand-in for the few Elasticsearch endpoints the store uses, plugged in as the
client's transport node: the real ``Elasticsearch`` client builds and sends every request, the
fake answers it. It keeps indices, aliases, mappings ``_meta`` and settings, applies bulk
actions, refresh (documents are searchable only after it), delete-by-query, and evaluates the
handful of query shapes the store sends (term, terms, range, bool, match, multi_match, knn),
and scrolls. Scores are crude (matching-token counts, ``(1 + cos) / 2`` for knn); tests check
requests and documents, not BM25.

It refuses what a real node refuses (each checked against Elasticsearch 8.19): an all-zero vector
for a cosine field, a search window over 10,000 hits, a wildcard delete
(``action.destructive_requires_name``), an alias ``remove`` that must exist but does not. Its
``modules`` say which optional server modules it has: without ``rest-root`` ``GET /`` answers
405, without ``reindex`` there is no ``_delete_by_query``, without ``analysis-common`` only the
server's own analysis exists (as in Elastic's integ-test distribution, :data:`MINIMAL`).
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
import orjson
from elastic_transport import ApiResponseMeta, BaseNode, HttpHeaders
from elastic_transport._node import NodeApiResponse
from elasticsearch import Elasticsearch

from feverous_es.index.elastic.client import make_client
from feverous_es.index.elastic.config import ElasticConfig

Handler = Callable[["Request"], "tuple[int, Any] | None"]

FULL = frozenset({"analysis-common", "reindex", "rest-root"})
MINIMAL: frozenset[str] = frozenset()
# Analysis the server has without analysis-common.
_CORE_ANALYZERS = {"standard", "simple", "whitespace", "stop", "keyword"}
_CORE_FILTERS = {"lowercase", "stop"}
_COMMON_FILTERS = {"asciifolding", "stemmer", "porter_stem"}
MAX_RESULT_WINDOW = 10_000


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, str]
    body: Any
    headers: dict[str, str]


@dataclass
class Index:
    mappings: dict[str, Any]
    settings: dict[str, Any]
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    visible: set[str] = field(default_factory=set)
    aliases: set[str] = field(default_factory=set)
    seq_nos: dict[str, int] = field(default_factory=dict)  # a document's, by id (_doc writes)


def _tokens(text: Any) -> set[str]:
    if isinstance(text, list):
        return set().union(*(_tokens(t) for t in text)) if text else set()
    return set(re.findall(r"\w+", str(text).lower()))


def _values(doc: dict[str, Any], name: str) -> list[Any]:
    value = doc.get(name.split(".")[0])
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


class FakeCluster:
    version = "8.19.3"

    def __init__(self, modules: frozenset[str] = FULL) -> None:
        self.modules = modules
        self.scrolls: dict[str, list[dict[str, Any]]] = {}
        self.indices: dict[str, Index] = {}
        self.requests: list[Request] = []
        self.handlers: list[Handler] = []  # tried first; return None to fall through
        self.api_keys: list[dict[str, Any]] = []

    # Plumbing.

    def client(self, config: ElasticConfig | None = None, **overrides: Any) -> Elasticsearch:
        cluster = self

        class Node(FakeNode):
            fake = cluster

        config = config or ElasticConfig(url="http://fake:9200")
        return make_client(config, node_class=Node, **overrides)

    def requests_to(self, method: str, pattern: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and re.fullmatch(pattern, r.path)]

    def resolve(self, expression: str) -> list[str]:
        names: list[str] = []
        for part in expression.split(","):
            if "*" in part:
                regex = re.compile(re.escape(part).replace(r"\*", ".*"))
                names.extend(n for n in sorted(self.indices) if regex.fullmatch(n))
            elif part in self.indices:
                names.append(part)
            else:
                held = [n for n, index in sorted(self.indices.items()) if part in index.aliases]
                if not held:
                    raise KeyError(part)
                names.extend(held)
        return names

    def answer(self, request: Request) -> tuple[int, Any]:
        self.requests.append(request)
        for handler in self.handlers:
            result = handler(request)
            if result is not None:
                return result
        try:
            return self._route(request)
        except KeyError as missing:
            return 404, _error("index_not_found_exception", f"no such index [{missing.args[0]}]")

    def _route(self, r: Request) -> tuple[int, Any]:
        parts = [unquote(p) for p in r.path.strip("/").split("/") if p]
        method = r.method
        if not parts:
            if "rest-root" not in self.modules:
                return 405, {"error": "Incorrect HTTP method for uri [/] and method [GET], "
                             "allowed: [DELETE]", "status": 405}  # fmt: skip
            return 200, {"version": {"number": self.version}, "tagline": "You Know, for Search"}
        if parts[:2] == ["_nodes", "_local"]:
            return 200, {"nodes": {"n1": {"version": self.version}}}
        if parts == ["_analyze"]:
            return self._analyze(r.body)
        if parts == ["_search", "scroll"]:
            if method == "DELETE":
                return 200, {"succeeded": True}
            return 200, self._scroll_page(r.body["scroll_id"])
        if parts[0] == "_cluster" and parts[1:2] == ["health"]:  # one node, every shard placed
            return 200, {"status": "green", "number_of_data_nodes": 1, "timed_out": False}
        if parts[0] == "_tasks":  # the force merge's task: done at once
            return 200, {"completed": True, "task": {"id": parts[1]},
                         "response": {"_shards": {"failed": 0}}}  # fmt: skip
        if parts == ["_bulk"]:
            return 200, self._bulk(r.body)
        if parts == ["_aliases"] and method == "POST":
            return self._update_aliases(r.body["actions"])
        if parts[0] == "_alias":
            return self._get_alias(parts[1])
        if parts == ["_security", "api_key"]:
            key = {"id": f"id{len(self.api_keys)}", "name": r.body["name"], "api_key": "k",
                   "encoded": "ZW5jb2RlZA=="}  # fmt: skip
            self.api_keys.append(r.body)
            return 200, key
        if parts[-1] == "_msearch":
            lines = r.body
            responses = []
            named = r.params.get("include_named_queries_score") == "true"
            for header, body in zip(lines[0::2], lines[1::2], strict=True):
                responses.append(self._search(header["index"], body, named)[1])
            return 200, {"took": 1, "responses": responses}
        name = parts[0]
        if len(parts) == 1:
            if method == "HEAD":
                return (200 if name in self.indices else 404), None
            if method == "PUT":
                if name in self.indices:
                    return 400, _error("resource_already_exists_exception", f"[{name}] exists")
                body = r.body or {}
                problem = self._analysis_problem(body)
                if problem:
                    return 400, _error("mapper_parsing_exception", problem)
                self.indices[name] = Index(
                    mappings=body.get("mappings", {}), settings=body.get("settings", {})
                )
                return 200, {"acknowledged": True, "index": name}
            if method == "DELETE":
                if "*" in name:
                    reason = "Wildcard expressions or all indices are not allowed"
                    return 400, _error("illegal_argument_exception", reason)
                for target in self.resolve(name):
                    del self.indices[target]
                return 200, {"acknowledged": True}
        action = parts[1]
        if action == "_doc" and len(parts) == 3:
            return self._doc(r, self.resolve(name)[0], parts[2])
        if action == "_mapping" and method == "GET":
            return 200, {n: {"mappings": self.indices[n].mappings} for n in self.resolve(name)}
        if action == "_mapping" and method == "PUT":
            for target in self.resolve(name):
                self.indices[target].mappings.update(r.body)
            return 200, {"acknowledged": True}
        if action == "_settings":
            for target in self.resolve(name):
                self.indices[target].settings.update(r.body.get("index", r.body))
            return 200, {"acknowledged": True}
        if action == "_forcemerge":
            self.resolve(name)  # a missing index answers 404
            if r.params.get("wait_for_completion") == "false":
                return 200, {"task": "fake-node:1"}
            return 200, {"_shards": {"failed": 0}}
        if action == "_refresh":
            for target in self.resolve(name):
                index = self.indices[target]
                index.visible = set(index.docs)
            return 200, {"_shards": {"failed": 0}}
        if action == "_count":
            targets = self.resolve(name)
            return 200, {"count": sum(len(self.indices[t].visible) for t in targets)}
        if action == "_delete_by_query":
            if "reindex" not in self.modules:
                return 400, {"error": f"no handler found for uri [{r.path}] and method "
                             f"[{method}]"}  # fmt: skip
            deleted = 0
            for target in self.resolve(name):
                index = self.indices[target]
                for doc_id in [
                    d for d in index.visible if _matches(index.docs[d], r.body["query"])
                ]:
                    del index.docs[doc_id]
                    deleted += 1
                index.visible = set(index.docs)
            return 200, {"deleted": deleted, "failures": []}
        if action == "_mget":
            targets = self.resolve(name)
            docs = []
            for doc_id in r.body["ids"]:
                found = [self.indices[t].docs[doc_id] for t in targets
                         if doc_id in self.indices[t].docs]  # fmt: skip
                if found:
                    docs.append({"_id": doc_id, "found": True, "_source": _source(found[0])})
                else:
                    docs.append({"_id": doc_id, "found": False})
            return 200, {"docs": docs}
        if action == "_search":
            named = r.params.get("include_named_queries_score") == "true"
            status, answer = self._search(name, r.body, named)
            if status == 200 and "scroll" in r.params:
                scroll_id = f"scroll{len(self.scrolls)}"
                size = r.body.get("size", 10)
                self.scrolls[scroll_id] = answer["hits"]["hits"][size:]
                answer["hits"]["hits"] = answer["hits"]["hits"][:size]
                answer["_scroll_id"] = scroll_id
            return status, answer
        return 400, _error("unsupported", f"fake cannot answer {method} {r.path}")

    # Endpoints.

    def _doc(self, r: Request, name: str, doc_id: str) -> tuple[int, Any]:
        """One document read, or written as the lease writes it: create-only, or conditioned
        on the sequence number read (one primary term)."""
        index = self.indices[name]
        held = doc_id in index.docs
        if r.method == "GET":
            if not held:
                return 404, {"_index": name, "_id": doc_id, "found": False}
            found = {"_seq_no": index.seq_nos[doc_id], "_source": index.docs[doc_id]}
            return 200, {"_index": name, "_id": doc_id, "found": True, "_primary_term": 1, **found}
        create = r.params.get("op_type") == "create"
        expected = r.params.get("if_seq_no")
        if (create and held) or (
            expected is not None and (not held or int(expected) != index.seq_nos[doc_id])
        ):
            return 409, _error("version_conflict_engine_exception", f"[{doc_id}]: conflict")
        index.docs[doc_id] = r.body
        index.visible.add(doc_id)
        index.seq_nos[doc_id] = self.seq_no = getattr(self, "seq_no", -1) + 1
        return 200, {"_index": name, "_id": doc_id, "_seq_no": self.seq_no, "_primary_term": 1,
                     "result": "updated" if held else "created"}  # fmt: skip

    def _bulk(self, lines: list[dict[str, Any]]) -> dict[str, Any]:
        items = []
        rest = iter(lines)
        for header in rest:
            (op, meta), *_ = header.items()
            source = next(rest) if op != "delete" else None
            name, doc_id = meta["_index"], meta["_id"]
            if name not in self.indices:
                items.append({op: {"_index": name, "_id": doc_id, "status": 404,
                                   "error": {"type": "index_not_found_exception"}}})  # fmt: skip
                continue
            docs, seq_nos = self.indices[name].docs, self.indices[name].seq_nos
            if op == "delete":
                expected = meta.get("if_seq_no")
                if expected is not None and seq_nos.get(doc_id, -1) != int(expected):
                    status = 409  # rewritten since it was read (or gone)
                else:
                    status = 200 if docs.pop(doc_id, None) is not None else 404
                items.append({op: {"_index": name, "_id": doc_id, "status": status}})
                continue
            vector = (source or {}).get("vector")
            if vector is not None and not np.any(vector):
                items.append({op: {"_index": name, "_id": doc_id, "status": 400,
                                   "error": {"type": "document_parsing_exception", "reason":
                                             "The [cosine] similarity does not support vectors "
                                             "with zero magnitude."}}})  # fmt: skip
                continue
            docs[doc_id] = source
            seq_nos[doc_id] = self.seq_no = getattr(self, "seq_no", -1) + 1
            items.append({op: {"_index": name, "_id": doc_id, "status": 201}})
        return {"took": 1, "errors": any(i[next(iter(i))]["status"] >= 300 for i in items),
                "items": items}  # fmt: skip

    def _update_aliases(self, actions: list[dict[str, Any]]) -> tuple[int, Any]:
        results, errors = [], False
        for action in actions:  # validate first: the fake is atomic too
            (op, spec), *_ = action.items()
            if spec["index"] not in self.indices:
                return 404, _error("index_not_found_exception", spec["index"])
            if op == "add" and spec["alias"] in self.indices:
                return 400, _error("invalid_alias_name_exception", "an index exists")
            missing = op == "remove" and spec["alias"] not in self.indices[spec["index"]].aliases
            if missing and spec.get("must_exist"):
                return 404, _error("aliases_not_found_exception", f"[{spec['alias']}] missing")
            # Since 8.14 a remove of a missing alias succeeds in part and says so.
            errors |= missing
            target = {"type": op, "indices": [spec["index"]], "aliases": [spec["alias"]]}
            results.append({"action": target, "status": 404 if missing else 200})
        for action in actions:
            (op, spec), *_ = action.items()
            aliases = self.indices[spec["index"]].aliases
            if op == "add":
                aliases.add(spec["alias"])
            else:
                aliases.discard(spec["alias"])
        if errors:
            return 200, {"acknowledged": True, "errors": True, "action_results": results}
        return 200, {"acknowledged": True, "errors": False}

    def _get_alias(self, alias: str) -> tuple[int, Any]:
        held = {n: {"aliases": {alias: {}}} for n, i in self.indices.items() if alias in i.aliases}
        if not held:
            return 404, {"error": f"alias [{alias}] missing", "status": 404}
        return 200, held

    def _analysis_problem(self, body: dict[str, Any]) -> str | None:
        """Why creating an index with ``body`` fails on this cluster's modules, or None."""
        analysis = body.get("settings", {}).get("analysis", {})
        filters = set(_CORE_FILTERS) | (_COMMON_FILTERS if "analysis-common" in self.modules
                                        else set())  # fmt: skip
        analyzers = set(_CORE_ANALYZERS) | set(analysis.get("analyzer", {}))
        if "analysis-common" in self.modules:
            analyzers.add("english")
        for name, spec in analysis.get("filter", {}).items():
            if spec.get("type") not in filters:
                return f"Unknown filter type [{spec.get('type')}] for [{name}]"
            filters.add(name)
        for name, spec in analysis.get("analyzer", {}).items():
            for used in spec.get("filter", []):
                if used not in filters:
                    return f"failed to find filter under name [{used}] for [{name}]"

        def mapped(props: dict[str, Any]) -> list[dict[str, Any]]:
            out = []
            for spec in props.values():
                out.append(spec)
                out.extend(mapped(spec.get("fields", {})))
            return out

        for spec in mapped(body.get("mappings", {}).get("properties", {})):
            if spec.get("analyzer", "standard") not in analyzers:
                return f"analyzer [{spec['analyzer']}] has not been configured in mappings"
        return None

    def _analyze(self, body: dict[str, Any]) -> tuple[int, Any]:
        known = set(_CORE_FILTERS) | (_COMMON_FILTERS if "analysis-common" in self.modules
                                      else set())  # fmt: skip
        for spec in body.get("filter", []):
            kind = spec.get("type") if isinstance(spec, dict) else spec
            if kind not in known:
                return 400, _error("illegal_argument_exception",
                                   f"failed to find global filter under [{kind}]")  # fmt: skip
        return 200, {"tokens": [{"token": t} for t in sorted(_tokens(body.get("text", "")))]}

    def _scroll_page(self, scroll_id: str) -> dict[str, Any]:
        rest = self.scrolls.get(scroll_id, [])
        page, self.scrolls[scroll_id] = rest[:10], rest[10:]
        return {"_scroll_id": scroll_id, "_shards": {"total": 1, "successful": 1, "failed": 0},
                "hits": {"hits": page}}  # fmt: skip

    def _search(self, name: str, body: dict[str, Any], named: bool = False) -> tuple[int, Any]:
        if body.get("from", 0) + body.get("size", 10) > MAX_RESULT_WINDOW:
            return 400, _error("illegal_argument_exception", "Result window is too large")
        stored = body.get("stored_fields") != "_none_"  # "_none_": no _id, no _source
        source = stored and body.get("_source", True) is not False
        if not stored and body.get("_source", True) is not False:
            reason = "[stored_fields] cannot be disabled if [_source] is requested"
            return 400, _error("illegal_argument_exception", reason)
        knn = body.get("knn")
        if knn and not np.any(knn["query_vector"]):
            return 400, _error("illegal_argument_exception",
                               "The [cosine] similarity does not support vectors with zero "
                               "magnitude.")  # fmt: skip
        docs = []
        for target in self.resolve(name):
            index = self.indices[target]
            docs.extend((target, d, index.docs[d]) for d in sorted(index.visible))
        scored: dict[tuple[str, str], float] = {}
        parts: dict[tuple[str, str], dict[str, float]] = {}
        if "query" in body:
            text_name = _query_name(body["query"])
            for target, doc_id, doc in docs:
                score = _score(doc, body["query"])
                if score is not None:
                    scored[(target, doc_id)] = score
                    if text_name:
                        parts.setdefault((target, doc_id), {})[text_name] = score
        if "knn" in body:
            knn = body["knn"]
            query = np.asarray(knn["query_vector"], dtype=np.float32)
            near = []
            for target, doc_id, doc in docs:
                if "vector" not in doc or not all(_matches(doc, f) for f in knn.get("filter", [])):
                    continue
                vector = np.asarray(doc["vector"], dtype=np.float32)
                cos = float(vector @ query / (np.linalg.norm(vector) * np.linalg.norm(query)))
                near.append(((1 + cos) / 2 * knn.get("boost", 1.0), (target, doc_id)))
            near.sort(key=lambda item: -item[0])
            for score, key in near[: knn["k"]]:
                scored[key] = scored.get(key, 0.0) + score
                if "_name" in knn:
                    parts.setdefault(key, {})[knn["_name"]] = score
        ranked = sorted(scored.items(), key=lambda item: -item[1])
        if "sort" in body:
            by_ord = {(t, d): doc.get("ord", 0) for t, d, doc in docs}
            ranked.sort(key=lambda item: by_ord[item[0]])
            if "search_after" in body:
                ranked = [i for i in ranked if by_ord[i[0]] > body["search_after"][0]]
        hits = []
        for (target, doc_id), score in ranked[: body.get("size", 10)]:
            doc = self.indices[target].docs[doc_id]
            hit = {"_index": target, "_score": score}
            if stored:
                hit["_id"] = doc_id
            if source:
                hit["_source"] = _source(doc)
            if body.get("seq_no_primary_term"):
                hit.update(_seq_no=self.indices[target].seq_nos.get(doc_id, -1), _primary_term=1)
            if "docvalue_fields" in body:
                hit["fields"] = {name: [doc[name]] for name in body["docvalue_fields"]
                                 if doc.get(name) is not None}  # fmt: skip
            if (target, doc_id) in parts:
                found = parts[(target, doc_id)]
                hit["matched_queries"] = found if named else sorted(found)
            if "sort" in body:
                hit["sort"] = [doc.get("ord", 0)]
            hits.append(hit)
        shards = {"total": 1, "successful": 1, "skipped": 0, "failed": 0}
        return 200, {"took": 1, "timed_out": False, "_shards": shards, "hits": {"hits": hits}}


def _source(doc: dict[str, Any]) -> dict[str, Any]:
    """What ``_source`` returns: the vector is excluded by the mapping."""
    return {k: v for k, v in doc.items() if k != "vector"}


def _error(kind: str, reason: str) -> dict[str, Any]:
    return {"error": {"root_cause": [{"type": kind, "reason": reason}], "type": kind,
                      "reason": reason}, "status": 400}  # fmt: skip


def _query_name(query: Any) -> str | None:
    """The ``_name`` given anywhere inside ``query``."""
    if isinstance(query, dict):
        if isinstance(query.get("_name"), str):
            return query["_name"]
        found = (_query_name(value) for value in query.values())
    elif isinstance(query, list):
        found = (_query_name(value) for value in query)
    else:
        return None
    return next((name for name in found if name), None)


def _matches(doc: dict[str, Any], query: dict[str, Any]) -> bool:
    return _score(doc, query) is not None


def _score(doc: dict[str, Any], query: dict[str, Any]) -> float | None:
    """A crude score, or None when ``doc`` does not match."""
    (kind, spec), *_ = query.items()
    if kind == "match_all":
        return 1.0
    if kind == "term":
        (name, value), *_ = spec.items()
        return 0.0 if value in _values(doc, name) else None
    if kind == "terms":
        (name, values), *_ = spec.items()
        return 0.0 if set(values) & set(_values(doc, name)) else None
    if kind == "range":
        (name, bounds), *_ = spec.items()
        values = _values(doc, name)
        return 0.0 if values and values[0] >= bounds.get("gte", float("-inf")) else None
    if kind == "match":
        (name, params), *_ = spec.items()
        shared = _tokens(params["query"]) & _tokens(doc.get(name.split(".")[0], ""))
        return len(shared) * params.get("boost", 1.0) if shared else None
    if kind == "multi_match":
        shared = sum(
            len(_tokens(spec["query"]) & _tokens(doc.get(f.split(".")[0], "")))
            for f in spec["fields"]
        )
        return float(shared) if shared else None
    if kind == "bool":
        score = 0.0
        for clause in spec.get("must", []):
            part = _score(doc, clause)
            if part is None:
                return None
            score += part
        for clause in spec.get("filter", []):
            if not _matches(doc, clause):
                return None
        should = spec.get("should", [])
        if should:
            parts = [p for p in (_score(doc, c) for c in should) if p is not None]
            if len(parts) < spec.get("minimum_should_match", 1 if not spec.get("must") else 0):
                return None
            score += sum(parts)
        return score
    raise AssertionError(f"the fake cannot evaluate {kind}")


class FakeNode(BaseNode):
    fake: FakeCluster

    def perform_request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        headers: HttpHeaders | None = None,
        request_timeout: Any = None,
    ) -> NodeApiResponse:
        split = urlsplit(target)
        params = {k: v[-1] for k, v in parse_qs(split.query).items()}
        headers = dict(headers or {})
        raw = body or b""
        if headers.get("content-encoding") == "gzip":
            raw = gzip.decompress(raw)
        if not raw:
            decoded: Any = None
        elif "ndjson" in headers.get("content-type", ""):
            decoded = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
        else:
            decoded = orjson.loads(raw)
        request = Request(method, split.path, params, decoded, headers)
        status, answer = self.fake.answer(request)
        meta = ApiResponseMeta(
            status=status,
            http_version="1.1",
            headers=HttpHeaders(
                {"content-type": "application/json", "x-elastic-product": "Elasticsearch"}
            ),
            duration=0.0,
            node=self.config,
        )
        return NodeApiResponse(meta, b"" if answer is None else orjson.dumps(answer))


class HashEncoder:
    """A deterministic stand-in for the embedder: a unit vector per text, from its hash."""

    tokens = 0

    def __init__(self, dim: int = 8) -> None:
        self.dim = dim

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(text.encode("utf-8")[:8].ljust(8, b"\0"), "little")
            seed ^= len(text) * 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF
            row = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            out[i] = row / np.linalg.norm(row)
        return out
