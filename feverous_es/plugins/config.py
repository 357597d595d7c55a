"""The pipeline configuration: which plugin runs each stage, with which options.

Later sources override earlier ones: the defaults below, a TOML file (``--config`` or
``$FEVEROUS_ES_CONFIG``), environment variables ``FEVEROUS_ES_<STAGE>=name`` (e.g.
``FEVEROUS_ES_RERANKER=retrieval``) and ``FEVEROUS_ES_HOPS``, then command-line flags.

    hops = 7

    [plugins]
    reranker = "cross-encoder"

    [options.reranker]
    cell_model = "/models/my-cell-ranker"
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from feverous_es.errors import PluginError
from feverous_es.plugins.registry import STAGES

DEFAULT_PLUGINS: dict[str, str] = {
    "pages": "hybrid",
    "candidates": "papelo",
    # The packaged sentence ranker, fused with the retrieval order, on sentences only: chosen
    # by held-out complete-evidence recall (docs/decisions.md, Retrieval).
    "reranker": "sentence-ranker",
    "selector": "budget",
    "hop": "links",
    "verdict": "classifier",
}
# Rounds of next-hop pursuit after the initial retrieval (0: none). Papelo applied the module up
# to seven times and the FEVEROUS score still improved at the seventh.
DEFAULT_HOPS = 7
ENV_CONFIG = "FEVEROUS_ES_CONFIG"


@dataclass(frozen=True)
class PipelineConfig:
    plugins: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_PLUGINS))
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    hops: int = DEFAULT_HOPS

    def stage_options(self, stage: str) -> dict[str, Any]:
        return dict(self.options.get(stage, {}))

    def with_stage_options(self, stage: str, **options: Any) -> PipelineConfig:
        """The configuration with these options of ``stage`` set over the ones it has."""
        merged = {**self.stage_options(stage), **options}
        return replace(self, options={**self.options, stage: merged})

    def with_reader(self, reader: str) -> PipelineConfig:
        """The configuration with the verdict's reader (its ``model`` option) set: ``default``,
        ``large``, ``auto`` (:mod:`feverous_es.verdict.readers`) or a model directory."""
        return self.with_stage_options("verdict", model=reader)

    def with_plugins(self, **names: str) -> PipelineConfig:
        unknown = set(names) - set(STAGES)
        if unknown:
            raise PluginError(f"unknown pipeline stage(s) {sorted(unknown)} (stages: {STAGES})")
        return replace(self, plugins={**self.plugins, **names})


def _from_file(config: PipelineConfig, path: Path) -> PipelineConfig:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PluginError(f"configuration file {path} does not exist") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise PluginError(f"configuration file {path} is not valid TOML: {error}") from None
    unknown = set(data) - {"plugins", "options", "hops"}
    if unknown:
        raise PluginError(f"{path}: unknown key(s) {sorted(unknown)} (plugins, options, hops)")
    config = config.with_plugins(**data.get("plugins", {}))
    options = {stage: dict(config.options.get(stage, {})) for stage in STAGES}
    for stage, values in data.get("options", {}).items():
        if stage not in STAGES:
            raise PluginError(f"{path}: options for unknown stage {stage!r}")
        options[stage].update(values)
    return replace(config, options=options, hops=int(data.get("hops", config.hops)))


def load_config(
    path: Path | None = None,
    *,
    plugins: Mapping[str, str] | None = None,
    hops: int | None = None,
    reader: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> PipelineConfig:
    """Defaults, then the file, then the environment, then the arguments (the flags).
    ``reader``: the verdict's reader (``default``, ``large`` or a model directory), what
    ``[options.verdict] model`` sets in a file."""
    environ = os.environ if environ is None else environ
    config = PipelineConfig()
    path = path or (Path(environ[ENV_CONFIG]) if environ.get(ENV_CONFIG) else None)
    if path is not None:
        config = _from_file(config, path)
    from_env = {s: environ[var] for s in STAGES if (var := f"FEVEROUS_ES_{s.upper()}") in environ}
    config = config.with_plugins(**{**from_env, **(plugins or {})})
    if hops is None and environ.get("FEVEROUS_ES_HOPS"):
        try:
            hops = int(environ["FEVEROUS_ES_HOPS"])
        except ValueError:
            raise PluginError(
                f"FEVEROUS_ES_HOPS={environ['FEVEROUS_ES_HOPS']!r} is not a number"
            ) from None
    if hops is not None:
        if hops < 0:
            raise PluginError(f"hops must be 0 (no next hop) or more, not {hops}")
        config = replace(config, hops=hops)
    return config if reader is None else config.with_reader(reader)
