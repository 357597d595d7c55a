"""``feverous-es es …``: the cluster-side commands (status, new builds, publishing a build
written in parts, pruning, reader keys).

The cluster and credentials come from the environment or the config file (see
:mod:`feverous_es.index.elastic.config`), never from flags.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from feverous_es.console import print_json, user_errors
from feverous_es.errors import StoreError
from feverous_es.params import COUNT, json_option

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

    from feverous_es.index.elastic.config import ElasticConfig
    from feverous_es.index.elastic.parts import PartProgress

DEFAULT_KEY_NAME = "feverous-es-reader"


def reader_role(config: ElasticConfig) -> dict[str, Any]:
    """The role of a reader key: ``read`` on the build's aliases and nothing else (no cluster
    privilege, no access to the versioned indices by name)."""
    return {
        "feverous-es-reader": {
            "cluster": [],
            "indices": [
                {
                    "names": list(config.aliases),
                    "privileges": ["read"],
                    "allow_restricted_indices": False,
                }
            ],
        }
    }


def create_reader_key(
    client: Elasticsearch, config: ElasticConfig, name: str, expiration: str | None
) -> dict[str, Any]:
    """Create the reader API key; returns the API's answer (id, name, api_key, encoded, …)."""
    if config.auth_kind() == "api_key":
        raise StoreError(
            "an API key cannot create a key with privileges: run `feverous-es es reader-key` "
            "with FEVEROUS_ES_USER / FEVEROUS_ES_PASSWORD (a user with manage_api_key or "
            "manage_own_api_key) instead of FEVEROUS_ES_API_KEY"
        )
    from elasticsearch import BadRequestError

    from feverous_es.index.elastic.errors import api_reason, elastic_errors

    options: dict[str, Any] = {
        "name": name,
        "role_descriptors": reader_role(config),
        "metadata": {"application": "feverous-es", "access": "read aliases"},
    }
    if expiration:
        options["expiration"] = expiration
    with elastic_errors(config, "cannot create the reader key"):
        try:
            return dict(client.security.create_api_key(**options).body)
        except BadRequestError as error:
            # API keys live in the security index, whose mapping needs analysis-common.
            if "filter type" not in api_reason(error):
                raise
            raise StoreError(
                f"Elasticsearch at {config.display_url} cannot store API keys: its security "
                "index needs the analysis-common module, which the cluster lacks (Elastic's "
                "integ-test distribution does); grant readers the role `feverous-es es "
                "reader-key` would through a file realm instead (docs/elasticsearch.md)"
            ) from None


def _connect() -> tuple[ElasticConfig, Elasticsearch]:
    from feverous_es.index.elastic.client import connect
    from feverous_es.index.elastic.config import load_config

    config = load_config()
    return config, connect(config)


@contextlib.contextmanager
def _cluster(doing: str = "") -> Iterator[tuple[ElasticConfig, Elasticsearch]]:
    """The configured cluster's config and client, closed after the block; the client's errors
    inside it are one line saying what could not be done (``doing``)."""
    from feverous_es.index.elastic.errors import elastic_errors

    config, client = _connect()
    try:
        with elastic_errors(config, doing):
            yield config, client
    finally:
        client.close()


@click.group("es")
def es_group() -> None:
    """Elasticsearch cluster commands. The cluster comes from FEVEROUS_ES_URL (credentials from
    FEVEROUS_ES_API_KEY or FEVEROUS_ES_USER / FEVEROUS_ES_PASSWORD) or the config file
    $FEVEROUS_ES_ELASTIC_CONFIG (default ~/.config/feverous-es/elasticsearch.toml)."""


@es_group.command("reader-key")
@click.option("--name", default=DEFAULT_KEY_NAME, help="Name of the API key.")
@click.option("--expiration", help="Lifetime, e.g. 90d (default: never expires).")
@json_option("the API's whole answer")
@user_errors()
def reader_key(name: str, expiration: str | None, as_json: bool) -> None:
    """Create an API key that may only read the aliases, for another team.

    The key (its `encoded` form, for `Authorization: ApiKey …`) is printed once on stdout;
    store it now, it cannot be shown again.
    """
    with _cluster() as (config, client):
        answer = create_reader_key(client, config, name, expiration)
    if as_json:
        print_json(answer)
        return
    click.echo(
        f"created API key {answer.get('name')!r} (id {answer.get('id')}), read-only on "
        f"{', '.join(config.aliases)}"
        + (f", expires in {expiration}" if expiration else ", no expiry"),
        err=True,
    )
    click.echo(answer["encoded"])


@es_group.command("status")
@json_option("the status")
@user_errors()
def status(as_json: bool) -> None:
    """The cluster, what the aliases point at, and every build version with its state."""
    from feverous_es.index.elastic.builds import (
        KINDS,
        analysis_from_meta,
        list_builds,
        state_from_meta,
        tables_from_meta,
    )
    from feverous_es.index.elastic.client import check_cluster
    from feverous_es.index.elastic.loader import BuildIndices, alias_holders
    from feverous_es.index.elastic.parts import read_progress

    with _cluster() as (config, client):
        version = check_cluster(client, config)
        aliases = {alias: alias_holders(client, alias) for alias in config.aliases}
        builds = list_builds(client, config)
        progress = {n: read_progress(client, BuildIndices.of(config, n)) for n in builds}
    rows = []
    for number, build in sorted(builds.items()):
        meta = build["meta"]
        rows.append(
            {
                "parts": [_part_row(p) for _, p in sorted(progress[number].items())],
                "version": number,
                **{f"{kind}_index": build[kind] for kind in KINDS},
                "published": build["elements"] in aliases[config.elements_alias],
                "state": None
                if meta is None
                else {
                    **dataclasses.asdict(state_from_meta(meta)),
                    "tables": tables_from_meta(meta),
                    "format_version": meta.get("format_version"),
                    "analysis": analysis_from_meta(meta),
                },
            }
        )
    if as_json:
        print_json({"cluster": config.display_url, "version": version, "aliases": aliases,
                    "builds": rows})  # fmt: skip
        return
    click.echo(f"cluster {config.display_url} (Elasticsearch {version or 'version not visible'})")
    for alias, holders in aliases.items():
        click.echo(f"  alias {alias} -> {', '.join(holders) or '(none)'}")
    for row in rows:
        state = row["state"]
        detail = (
            "not made by feverous-es"
            if state is None
            else ("complete" if state["complete"] else "in progress")
            + f", {state['elements']:,} elements, {state['pages']:,} pages, "
            f"{state['tables']:,} tables, format {state['format_version']}, "
            f"{state['analysis']} analysis"
        )
        mark = " (published)" if row["published"] else ""
        click.echo(f"  v{row['version']}: {detail}{mark}")
        for part in row["parts"]:
            click.echo(
                f"    part {part['part']}: {'complete' if part['complete'] else 'in progress'}, "
                f"{part['pages']:,} of {part['rows']:,} pages, {part['elements']:,} elements, "
                f"{part['rate']:,.0f} elements/s"
            )


def _part_row(progress: PartProgress) -> dict[str, Any]:
    """A part of a build as ``es status`` shows it."""
    return {"part": str(progress.part), "complete": progress.state.complete,
            "pages": progress.state.pages + progress.state.malformed, "rows": progress.rows,
            "elements": progress.state.elements, "seconds": progress.seconds,
            "rate": round(progress.rate, 1), "updated": progress.updated}  # fmt: skip


@es_group.command("publish")
@user_errors()
def publish() -> None:
    """Publish the latest build once every part of it is complete (the last part to finish
    does this itself; run it after a part was finished on a machine that could not reach the
    cluster at the end). Refuses, naming the parts missing, before then."""
    from feverous_es.index.elastic.builds import list_builds
    from feverous_es.index.elastic.loader import BuildIndices
    from feverous_es.index.elastic.parts import read_progress
    from feverous_es.index.elastic.writer import publish_parts

    with _cluster("cannot publish the build") as (config, client):
        builds = list_builds(client, config)
        if not builds:
            raise StoreError("there is no build to publish: run `feverous-es index`")
        version = max(builds)
        if not read_progress(client, BuildIndices.of(config, version)):
            raise StoreError(
                f"v{version} is not written in parts: `feverous-es index --store elasticsearch` "
                "publishes it when it completes"
            )
        missing = publish_parts(client, config, version)
    if missing:
        raise StoreError(
            f"v{version} cannot be published yet: part(s) {', '.join(missing)} not complete "
            "(run them with `feverous-es index … --part I/N`)"
        )
    click.echo(f"published v{version}: the aliases point at it")


SHARDS_HELP = (
    "Primary shards of each index (default: `shards` of the config file, else 1). A build in N "
    "parts writes fastest with about N primaries spread over the data nodes: one primary takes "
    "every worker's bulk requests on one node."
)


@es_group.command("new-build")
@click.option(
    "--dim", type=COUNT, default=384,
    help="Vector size (the embedder's).",
)  # fmt: skip
@click.option("--shards", type=COUNT, default=None, help=SHARDS_HELP)
@user_errors()
def new_build(dim: int, shards: int | None) -> None:
    """Create empty indices for the next version; `feverous-es index --store elasticsearch`
    (each `--part I/N` of it) then fills them, and publishes them (alias swap) when it
    completes."""
    from feverous_es.index.elastic.builds import (
        check_aliases_free,
        create_build,
        list_builds,
        next_version,
    )

    with _cluster("cannot create the new build") as (config, client):
        check_aliases_free(client, config)
        builds = list_builds(client, config)
        latest = builds[max(builds)]["meta"] if builds else None
        if latest and not latest.get("complete"):
            raise StoreError(
                f"v{max(builds)} is still in progress: finish it with `feverous-es index "
                "--store elasticsearch`, or delete its indices first"
            )
        version = next_version(builds)
        config = dataclasses.replace(config, shards=shards or config.shards)
        indices = create_build(client, config, version, dim)
    click.echo(
        f"created v{version}: {', '.join(indices)}, {config.shards} primary shard(s) each "
        "(empty; run `feverous-es index`)"
    )


@es_group.command("prune")
@click.option(
    "--keep", type=COUNT, default=2,
    help="Complete versions to keep (the published one always stays).",
)  # fmt: skip
@click.option("--yes", is_flag=True, help="Delete without asking.")
@user_errors()
def prune(keep: int, yes: bool) -> None:
    """Delete old versioned indices: all but the newest KEEP complete builds; never the one
    behind the aliases, never a build in progress."""
    from feverous_es.index.elastic.builds import KINDS, list_builds
    from feverous_es.index.elastic.loader import BuildIndices, alias_holders
    from feverous_es.index.elastic.parts import progress_index

    with _cluster("cannot prune") as (config, client):
        published = set(alias_holders(client, config.elements_alias))
        builds = list_builds(client, config)
        complete = [
            number
            for number, build in sorted(builds.items(), reverse=True)
            if build["meta"] and build["meta"].get("complete")
        ]
        doomed = [n for n in complete[keep:] if builds[n]["elements"] not in published]
        names = [name for n in doomed for name in (builds[n][kind] for kind in KINDS) if name]
        # A build written in parts keeps its parts' progress beside it: it goes with it.
        names += [
            progress_index(BuildIndices.of(config, n)) for n in doomed
            if client.indices.exists(index=progress_index(BuildIndices.of(config, n)))
        ]  # fmt: skip
        if not names:
            click.echo("nothing to delete")
            return
        if not yes:
            click.confirm(f"delete {', '.join(names)}?", abort=True)
        client.indices.delete(index=",".join(names))
    click.echo(f"deleted {', '.join(names)}")
