"""The one rule for strange text in a claim, a query or a source (feverous_es.input_text): the
same answer from the function, the pipeline's CLI and HTTP."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from feverous_es.errors import BadTextError
from feverous_es.input_text import clean_text


def test_controls_read_as_spaces_and_invisible_formatting_goes() -> None:
    assert clean_text("Paris\x00is\x1b[31m in France.") == "Paris is [31m in France."
    # A right-to-left override would show "France" reversed; the claim read is the plain one.
    assert clean_text("Paris is in \u202eFrance\u202c.\u200b") == "Paris is in France."
    assert clean_text("line\nbreak\ttab") == "line\nbreak\ttab"  # whitespace is whitespace
    kept = "Café au lait 🙂, \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645, 👩\u200d🔬"
    assert clean_text(kept) == kept  # accents, other scripts, joiners, emoji


def test_a_lone_surrogate_is_refused_with_its_position() -> None:
    with pytest.raises(BadTextError, match=r"lone surrogate \(U\+D83D\) at character 4"):
        clean_text("Rome\ud83d and more", "the claim")
    with pytest.raises(BadTextError, match="the query"):
        clean_text("\udc00", "the query")


def test_the_cli_cleans_a_claim_and_refuses_a_surrogate_in_one_line(sample_index) -> None:
    def verify(claim: bytes) -> subprocess.CompletedProcess:
        # argv as bytes: a byte that is not UTF-8 reaches Python as a lone surrogate
        command = [sys.executable.encode(), b"-m", b"feverous_es", b"verify", claim,
                   b"--index", str(sample_index).encode(), b"--json"]  # fmt: skip
        return subprocess.run(command, capture_output=True, text=True, timeout=300)

    done = verify("Paris is\x1b in \u202eFrance.".encode())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["claim"] == "Paris is  in France."
    refused = verify(b"Paris is in Fran\xe7e.")  # Latin-1, not UTF-8
    assert refused.returncode != 0 and "lone surrogate" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
