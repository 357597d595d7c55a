"""What ``/v1/health`` reports of the store and the models, and what of it anyone may read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from feverous_es.verify.pipeline import Pipeline


def describe(pipeline: Pipeline, store: str, location: str) -> dict[str, Any]:
    """What ``/v1/health`` reports: the store (kind, location without credentials, the build's
    counts and format) and every model the pipeline runs, with its graphs' sha256 (as their
    manifests record them: nothing is hashed at start)."""
    from feverous_es.runtime.embedder import default_model_dir
    from feverous_es.runtime.parts import graph_digests

    opened = pipeline.context.store
    state = opened.state()
    if hasattr(opened, "config"):  # Elasticsearch: the cluster the configuration chose
        location = opened.config.display_url
    info: dict[str, Any] = {
        "kind": store,
        "location": without_credentials(location),
        "elements": state.elements,
        "pages": state.pages,
        "complete": state.complete,
    }
    meta = Path(location) / "meta.json"
    if store == "embedded" and meta.is_file():
        info["format"] = json.loads(meta.read_text(encoding="utf-8"))
    dirs = {"embedder": default_model_dir()}
    dirs.update(getattr(pipeline.verdict, "model_dirs", dict)())
    models = [
        {
            "name": name,
            "path": str(path),
            "files": graph_digests(path),
        }
        for name, path in dirs.items()
    ]
    return {"store": info, "models": models, "hops": pipeline.config.hops}


def without_credentials(location: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(location)
    if parts.password is None and parts.username is None:
        return location
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


def without_paths(health: dict[str, Any]) -> dict[str, Any]:
    """``/v1/health``'s details as anyone may read them: no store location, no model path."""
    store = {k: v for k, v in health.get("store", {}).items() if k != "location"}
    models = [{k: v for k, v in m.items() if k != "path"} for m in health.get("models", ())]
    return {**health, "store": store, "models": models}
