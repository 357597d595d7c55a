"""A node of its own from scripts/es_test_node.py, beside the suite's node (its state in a file
of its own), for the tests that stop, kill or restart one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

SCRIPT = [sys.executable, str(REPO / "scripts" / "es_test_node.py")]


class ScriptNode:
    """Drives the test-node script with ``state`` as its node file; ``settings`` holds what
    ``start`` printed (``FEVEROUS_ES_TEST_URL``, ``_USER``, ``_PASSWORD``, ``_CONFIG``)."""

    def __init__(self, state: Path) -> None:
        self.env = {**os.environ, "FEVEROUS_ES_NODE_STATE": str(state)}
        self.settings: dict[str, str] = {}

    def run(self, *command: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*SCRIPT, *command], env=self.env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done

    def start(self) -> dict[str, str]:
        # Quick: these tests hold a few pages, and start the node twice (kill, restart).
        printed = self.run("start", "--quick").stdout.splitlines()
        self.settings = dict(line.removeprefix("export ").split("=", 1) for line in printed)
        return self.settings

    def stop(self) -> subprocess.CompletedProcess[str]:
        return self.run("stop")
