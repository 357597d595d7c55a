"""Finding plugins by stage and name.

Plugins are Python entry points in the group ``feverous_es.<stage>``; the built-ins are declared
in this project's ``pyproject.toml`` exactly as a third-party package would declare its own:

    [project.entry-points."feverous_es.reranker"]
    my-ranker = "my_package.ranking:make_ranker"

:func:`register` adds one in-process (a notebook, a test) without installing anything.
"""

from __future__ import annotations

import inspect
from importlib.metadata import entry_points
from typing import Any

from feverous_es.errors import PluginError
from feverous_es.plugins.interfaces import PluginContext, PluginFactory

STAGES = ("pages", "candidates", "reranker", "selector", "hop", "verdict")
GROUP_PREFIX = "feverous_es."

_registered: dict[tuple[str, str], PluginFactory] = {}


def _check_stage(stage: str) -> None:
    if stage not in STAGES:
        raise PluginError(f"unknown pipeline stage {stage!r} (stages: {', '.join(STAGES)})")


def register(stage: str, name: str, factory: PluginFactory) -> None:
    """Make ``factory`` available as plugin ``name`` of ``stage`` in this process."""
    _check_stage(stage)
    _registered[stage, name] = factory


def available() -> dict[str, dict[str, str]]:
    """Per stage, each plugin name and where it comes from (``module:attr`` or ``registered``)."""
    found: dict[str, dict[str, str]] = {stage: {} for stage in STAGES}
    for stage in STAGES:
        for point in entry_points(group=GROUP_PREFIX + stage):
            found[stage][point.name] = point.value
    for stage, name in _registered:
        found[stage][name] = "registered in this process"
    return found


def factory(stage: str, name: str) -> PluginFactory:
    _check_stage(stage)
    if (stage, name) in _registered:
        return _registered[stage, name]
    points = entry_points(group=GROUP_PREFIX + stage, name=name)
    if not points:
        names = ", ".join(sorted(available()[stage])) or "none installed"
        raise PluginError(f"no {stage} plugin named {name!r} (available: {names})")
    point = next(iter(points))
    try:
        return point.load()
    except Exception as error:  # a broken third-party plugin must not look like our bug
        raise PluginError(
            f"{stage} plugin {name!r} ({point.value}) failed to load: {error}"
        ) from error


def load(stage: str, name: str, context: PluginContext, options: dict[str, Any]) -> Any:
    """Build plugin ``name`` of ``stage`` for ``context`` with ``options``."""
    make = factory(stage, name)
    try:
        inspect.signature(make).bind(context, **options)
    except TypeError as error:  # checked before the call: a TypeError inside is not the options'
        raise PluginError(f"{stage} plugin {name!r}: bad options {options}: {error}") from None
    except ValueError:  # no signature to read (a builtin): the call itself will tell
        pass
    return make(context, **options)
