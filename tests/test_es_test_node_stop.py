"""`scripts/es_test_node.py stop` confirms the node is gone: SIGTERM, then SIGKILL, then a check;
a node that survives keeps its data and state and is an error (exit 1), never a silent 0."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO

# Ignores SIGTERM, as a node stuck in its shutdown would.
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', "
    "flush=True); time.sleep(600)"
)


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    path = REPO / "scripts" / "es_test_node.py"
    spec = importlib.util.spec_from_file_location("es_test_node", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("FEVEROUS_ES_NODE_STATE", str(tmp_path / "node.json"))
    monkeypatch.setattr(module, "STOP_TIMEOUT", 1.0)
    monkeypatch.setattr(module, "KILL_TIMEOUT", 1.0)
    return module


def node(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    process = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    data = tmp_path / "node-data"
    data.mkdir()
    state = {"pid": str(process.pid), "dir": str(data), "url": "http://127.0.0.1:1"}
    (tmp_path / "node.json").write_text(json.dumps(state))
    return process, data


def test_stop_kills_a_node_that_ignores_sigterm_and_confirms_it_is_gone(
    script: ModuleType, tmp_path: Path
) -> None:
    process, data = node(tmp_path)
    assert script.stop() is True
    assert process.wait(timeout=5) == -9  # SIGKILL, after SIGTERM was ignored
    assert not data.exists() and not (tmp_path / "node.json").exists()


def test_a_node_that_survives_is_an_error_and_keeps_its_state(
    script: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    process, data = node(tmp_path)
    monkeypatch.setattr(script, "alive", lambda pid: True)  # as a process in D state would be
    try:
        with pytest.raises(script.NodeError, match="still running after SIGKILL"):
            script.stop()
        assert data.exists() and (tmp_path / "node.json").exists()
        assert script.main(["stop"]) == 1
    finally:
        process.kill()
        process.wait()
