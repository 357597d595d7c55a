"""A trainer's options travel one road: its run options' fields are the command's options, so
the command line, the Python API and the GPU queue's bundle agree on every default."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import click
import pytest

from feverous_es.params import from_params
from feverous_es.training.cli import train_group
from feverous_es.training.features.options import TableRunOptions
from feverous_es.training.hop.options import RunOptions as HopRunOptions
from feverous_es.training.hop.options import TrainSettings as HopSettings
from feverous_es.training.rerank.options import RunOptions as RerankRunOptions
from feverous_es.training.rerank.options import TrainSettings as RerankSettings
from feverous_es.training.verdict.options import RunOptions as VerdictRunOptions
from feverous_es.training.verdict.options import TrainSettings as VerdictSettings
from gpu_queue.__main__ import gpu_group
from gpu_queue.command import TRAINING_JOBS, QueueOptions

REQUIRED = ["--claims", "c.jsonl", "--out", "model", "--index", "index"]


def parsed(group: click.Group, name: str, args: list[str]) -> dict:
    command = group.commands[name]
    with command.make_context(name, args) as context:
        return dict(context.params)


@pytest.mark.parametrize(
    ("name", "made_by_hand"),
    [
        ("verdict", lambda: VerdictRunOptions(claims=[Path("c.jsonl")], out=Path("model"),
                                              index=Path("index"), work=None,
                                              settings=VerdictSettings())),
        ("rerank", lambda: RerankRunOptions(claims=[Path("c.jsonl")], out=Path("model"),
                                            index=Path("index"), work=None,
                                            settings=RerankSettings())),
        ("hop", lambda: HopRunOptions(claims=[Path("c.jsonl")], out=Path("model"),
                                      index=Path("index"), work=None,
                                      settings=HopSettings(base=Path("t5")))),
        ("table-verdict", lambda: TableRunOptions(claims=[Path("c.jsonl")], out=Path("model"),
                                                  index=Path("index"), work=None)),
    ],
)  # fmt: skip
def test_a_command_left_to_its_defaults_builds_the_run_options_the_api_builds(
    name: str, made_by_hand: object
) -> None:
    args = REQUIRED + (["--base", "t5"] if name == "hop" else [])
    params = parsed(train_group, name, args)
    expected = made_by_hand()  # type: ignore[operator]
    built = from_params(type(expected), params, set())
    assert built == expected
    # Every option the command takes is a field of its run options.
    assert set(params) <= _all_fields(type(expected))


def _all_fields(cls: type) -> set[str]:
    """The names of ``cls``'s fields, a nested dataclass's fields among them."""
    hints = typing.get_type_hints(cls)
    names = set()
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        names |= _all_fields(kind) if dataclasses.is_dataclass(kind) else {field.name}
    return names


def test_a_trainers_own_default_and_help_reach_its_command_line() -> None:
    options = {p.name: p for p in train_group.commands["verdict"].params}
    assert options["holdout"].default == 0.35 and options["learning_rate"].opts == ["--lr"]
    assert options["max_length"].help == "Tokens of claim + premise."
    assert options["epochs"].default == 3.0
    hop = {p.name: p for p in train_group.commands["hop"].params}
    assert hop["base"].required and not options["base"].required
    assert hop["freeze_embeddings"].default is False


def test_the_bundle_command_builds_the_queue_options_with_their_defaults(tmp_path: Path) -> None:
    # --data is the command's own (it names the claim files): any folder parses.
    args = ["--index", str(tmp_path), "--work", "w", "--data", str(tmp_path)]
    params = parsed(gpu_group, "bundle", [*args, "--jobs", "reader,ranker", "--jobs", "table"])
    options = from_params(QueueOptions, {**params, "claims": []}, set())
    assert tuple(options.jobs) == ("reader", "ranker", "table")
    assert options.bundle == Path("gpu-bundle") and options.wheels
    default = from_params(
        QueueOptions,
        {**parsed(gpu_group, "bundle", args), "claims": []},
        set(),
    )
    assert tuple(default.jobs) == TRAINING_JOBS
    assert default == QueueOptions(index=tmp_path, work=Path("w"), claims=[])


@pytest.mark.parametrize(
    ("kind", "settings", "error"),
    [
        ("tables", {}, "--kind must be one of both, cells, sentences,"),
        ("sentences", {"layers": 3}, "--layers needs --teacher"),
        ("both", {"teacher": Path("ranker")}, "give one --kind"),
        ("cells", {"teacher": Path("ranker"), "base": Path("minilm")}, "and no --base"),
    ],
)  # fmt: skip
def test_the_rankers_options_are_checked_in_their_own_check(
    kind: str, settings: dict, error: str
) -> None:
    from feverous_es.errors import TrainError

    def options(kind: str, **settings: object) -> RerankRunOptions:
        return RerankRunOptions(claims=[Path("c.jsonl")], out=Path("model"), index=Path("index"),
                                work=Path("work"), settings=RerankSettings(**settings), kind=kind)  # type: ignore[arg-type]  # fmt: skip

    with pytest.raises(TrainError, match=error):
        options(kind, **settings).check()
    assert options("both").kinds == ("cells", "sentences")
