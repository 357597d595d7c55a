#!/usr/bin/env python3
"""A throwaway single-node Elasticsearch for the integration tests, from Maven Central.

    python scripts/es_test_node.py run -- pytest     # start a node, run the command, stop it
    python scripts/es_test_node.py start             # start one and print its FEVEROUS_ES_TEST_*
    python scripts/es_test_node.py start --quick     # the same, on half the CPU (a small test's)
    python scripts/es_test_node.py stop              # stop it and delete its data
    python scripts/es_test_node.py kill              # kill -9 it, keeping its data
    python scripts/es_test_node.py restart           # start it again on the same data
    python scripts/es_test_node.py fetch             # only download and unpack

It fetches Elastic's ``integ-test-zip`` distribution of the pinned version (the real server with
the transport modules and x-pack core + security: API keys on the basic licence; no bundled JDK,
no ``analysis-common``), checks its SHA-512 against the one pinned here, and unpacks it into a
cache outside the repo (``$FEVEROUS_ES_NODE_CACHE``, else ``~/.cache/feverous-es/elasticsearch``;
``/var/cache/feverous-es/elasticsearch`` for root, whose home the node's user cannot enter). A
second run uses the cache and needs no network.

The node listens on loopback only, on free ports, with security on (user ``elastic``, a password
generated per start), the basic licence, a 1 GB heap and a data directory of its own that ``stop``
deletes. Elasticsearch refuses to run as root: as root the node runs as ``nobody``. Java 17 or
later must be installed (``ES_JAVA_HOME``, ``JAVA_HOME`` or ``java`` on the PATH).

The tests find the node through ``FEVEROUS_ES_TEST_URL``, ``FEVEROUS_ES_TEST_USER`` and
``FEVEROUS_ES_TEST_PASSWORD`` (not ``FEVEROUS_ES_URL``, so a user's own cluster settings never
point tests at it, nor the tests' node at a user's commands).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

# docker/compose.yaml pins the same version.
VERSION = "8.19.21"
SHA512 = (
    "cf6b0a93860d329937ae7f913ec5073b0c726c77639764b93fc83a304aa1dd9d"
    "4defcfa2849948eea3b0b47c2065f994908603939fc2a4774c9c4d868c5ec1dd"
)
URL = (
    "https://repo1.maven.org/maven2/org/elasticsearch/distribution/integ-test-zip/"
    f"elasticsearch/{VERSION}/elasticsearch-{VERSION}.zip"
)
USER = "elastic"
HEAP = "1g"
START_TIMEOUT = 180.0
STOP_TIMEOUT = 60.0
KILL_TIMEOUT = 10.0  # seconds a SIGKILLed node has to be gone before stop says it is not


class NodeError(Exception):
    """One line for the user; the script exits 1 with it."""


def cache_dir() -> Path:
    if os.environ.get("FEVEROUS_ES_NODE_CACHE"):
        return Path(os.environ["FEVEROUS_ES_NODE_CACHE"]).expanduser()
    if os.geteuid() == 0:
        return Path("/var/cache/feverous-es/elasticsearch")
    return Path("~/.cache/feverous-es/elasticsearch").expanduser()


def state_file() -> Path:
    """Where ``start`` records its node for ``stop``; ``FEVEROUS_ES_NODE_STATE`` names another
    file, for a second node beside the first (the tests stop one to see what a user sees)."""
    if os.environ.get("FEVEROUS_ES_NODE_STATE"):
        return Path(os.environ["FEVEROUS_ES_NODE_STATE"])
    return cache_dir() / "node.json"


def say(message: str) -> None:
    print(f"es-test-node: {message}", file=sys.stderr, flush=True)


# Fetch.


def download(target: Path) -> None:
    """The zip into ``target``, checked against the pinned SHA-512 (a bad file is deleted)."""
    partial = target.with_suffix(".part")
    say(f"downloading Elasticsearch {VERSION} from Maven Central")
    digest = hashlib.sha512()
    try:
        with urllib.request.urlopen(URL, timeout=60) as answer, partial.open("wb") as out:
            total = int(answer.headers.get("Content-Length") or 0)
            done, shown = 0, -1
            while block := answer.read(1 << 20):
                out.write(block)
                digest.update(block)
                done += len(block)
                percent = done * 100 // total if total else 0
                if sys.stderr.isatty() and percent != shown:
                    print(f"\r  {done >> 20} / {total >> 20} MiB", end="", file=sys.stderr)
                    shown = percent
        if sys.stderr.isatty():
            print(file=sys.stderr)
    except (urllib.error.URLError, OSError) as error:
        partial.unlink(missing_ok=True)
        raise NodeError(f"cannot download {URL}: {error}") from None
    if digest.hexdigest() != SHA512:
        partial.unlink(missing_ok=True)
        raise NodeError(f"{URL} does not have the pinned SHA-512: not using it")
    partial.rename(target)


def unpack(archive: Path, into: Path) -> None:
    """Extract keeping the files' Unix modes (zipfile drops them, and bin/ must stay
    executable); atomic: a half-unpacked tree is never left under ``into``."""
    work = Path(tempfile.mkdtemp(prefix=".unpack-", dir=into.parent))
    try:
        with zipfile.ZipFile(archive) as zipped:
            for info in zipped.infolist():
                path = Path(zipped.extract(info, work))
                mode = info.external_attr >> 16 & 0o777
                if mode:
                    path.chmod(mode)
        (unpacked,) = work.iterdir()
        unpacked.rename(into)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def fetch() -> Path:
    """The unpacked distribution, downloading it the first time."""
    cache = cache_dir()
    home = cache / f"elasticsearch-{VERSION}"
    if (home / "bin" / "elasticsearch").is_file():
        return home
    cache.mkdir(parents=True, exist_ok=True)
    archive = cache / f"elasticsearch-{VERSION}.zip"
    if not archive.is_file():
        download(archive)
    unpack(archive, home)
    archive.unlink()
    return home


# Start and stop.


def java_home() -> Path:
    for variable in ("ES_JAVA_HOME", "JAVA_HOME"):
        if os.environ.get(variable):
            return Path(os.environ[variable])
    java = shutil.which("java")
    if java is None:
        raise NodeError("no Java found: install Java 17 or later, or set ES_JAVA_HOME")
    return Path(java).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def node_config(work: Path, http_port: int, transport_port: int) -> str:
    return "\n".join(
        [
            "cluster.name: feverous-es-test",
            "node.name: test-node",
            f"path.data: {work / 'data'}",
            f"path.logs: {work / 'logs'}",
            "network.host: 127.0.0.1",
            f"http.port: {http_port}",
            f"transport.port: {transport_port}",
            "discovery.type: single-node",
            "xpack.security.enabled: true",
            # Loopback only: TLS would only make every client carry a CA file.
            "xpack.security.http.ssl.enabled: false",
            "xpack.security.transport.ssl.enabled: false",
            "xpack.license.self_generated.type: basic",
            # A nearly full disk must not turn the test indices read-only, nor hold back their
            # merges: from 8.19 a merge waits while less than 5 % of the disk is free (the
            # build's force-merge then never ends); 0s turns that check off.
            "cluster.routing.allocation.disk.threshold_enabled: false",
            "indices.merge.disk.check_interval: 0s",
            "",
        ]
    )


def as_node_user(work: Path) -> list[str]:
    """The command prefix that runs the node's processes: Elasticsearch refuses root, so as root
    they run as ``nobody``, who then owns the node's directory."""
    if os.geteuid() != 0:
        return []
    for path in [work, *work.rglob("*")]:
        os.chown(path, 65534, 65534)
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def request(url: str, password: str, timeout: float = 5.0) -> dict:
    token = base64.b64encode(f"{USER}:{password}".encode()).decode()
    call = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
    with urllib.request.urlopen(call, timeout=timeout) as answer:
        return json.loads(answer.read())


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: it exists and is not a zombie (a zombie has exited; only its
    parent's wait, or a container's init that never reaps, keeps its entry)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):  # no /proc: the signal's answer is all there is
        return True
    return state != "Z"


# The JIT's first tier only: a JVM starts on about half the CPU (measured here: a node 27 -> 14
# CPU-s, the keystore and launcher tools 16 -> 10), and its code runs slower afterwards. Always
# for the short-lived tools; for the server only where a test asks (``start --quick``), since a
# node that indexes and searches many vectors wants the optimizing compiler.
FIRST_TIER_ONLY = "-XX:TieredStopAtLevel=1"


def node_env(work: Path, quick: bool = False) -> dict[str, str]:
    """The environment the node's processes run with (``quick``: see :data:`FIRST_TIER_ONLY`)."""
    server = f"-Xms{HEAP} -Xmx{HEAP}" + (f" {FIRST_TIER_ONLY}" if quick else "")
    return {
        **os.environ,
        "ES_JAVA_HOME": str(java_home()),
        "ES_PATH_CONF": str(work / "config"),
        "ES_JAVA_OPTS": server,
        "CLI_JAVA_OPTS": FIRST_TIER_ONLY,
        "ES_TMPDIR": str(work / "tmp"),
    }


def start(quick: bool = False) -> dict[str, str]:
    """Start a node and wait until it is healthy; returns its settings (also kept in
    ``state_file()`` for ``stop``, ``kill`` and ``restart``, which starts it ``quick`` again)."""
    if state_file().is_file():
        pid = json.loads(state_file().read_text()).get("pid") or 0
        if pid and alive(int(pid)):
            raise NodeError(f"a test node is already running ({state_file()}): stop it first")
        stop()  # what a killed run left behind
    home = fetch()
    work = Path(tempfile.mkdtemp(prefix="feverous-es-node-"))
    work.chmod(0o755)
    conf = work / "config"
    shutil.copytree(home / "config", conf)
    (work / "data").mkdir()
    (work / "logs").mkdir()
    (work / "tmp").mkdir()
    http_port, transport_port = free_port(), free_port()
    (conf / "elasticsearch.yml").write_text(node_config(work, http_port, transport_port))
    env = node_env(work)
    password = secrets.token_urlsafe(18)
    keystore = [*as_node_user(work), str(home / "bin" / "elasticsearch-keystore")]
    # bootstrap.password becomes the elastic user's password on the first start.
    for args, given in ((["create"], ""), (["add", "-x", "bootstrap.password"], password)):
        done = subprocess.run(
            [*keystore, *args], input=given, text=True, env=env, capture_output=True
        )
        if done.returncode:
            shutil.rmtree(work, ignore_errors=True)
            raise NodeError(f"elasticsearch-keystore {args[0]} failed: {done.stderr.strip()}")
    url = f"http://127.0.0.1:{http_port}"
    node = {"url": url, "user": USER, "password": password, "dir": str(work), "pid": "",
            "quick": "1" if quick else ""}  # fmt: skip
    say(f"starting Elasticsearch {VERSION} on 127.0.0.1:{http_port} ({work})")
    try:
        launch(node)
    except NodeError:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return node


def launch(node: dict[str, str]) -> None:
    """Run the node of ``node`` (its directory already set up), record its pid in
    ``state_file()`` and wait until it is healthy."""
    work = Path(node["dir"])
    pid_file = work / "logs" / "node.pid"
    pid_file.unlink(missing_ok=True)
    started = subprocess.run(
        [*as_node_user(work), str(fetch() / "bin" / "elasticsearch"), "-d", "-p", str(pid_file)],
        env=node_env(work, quick=bool(node.get("quick"))),
        capture_output=True,
        text=True,
    )
    if started.returncode:
        log = work / "logs" / "feverous-es-test.log"
        tail = log.read_text(errors="replace")[-2000:] if log.is_file() else started.stderr
        raise NodeError(f"Elasticsearch did not start:\n{tail}")
    node["pid"] = pid_file.read_text().strip()
    state_file().parent.mkdir(parents=True, exist_ok=True)
    state_file().write_text(json.dumps(node))
    state_file().chmod(0o600)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            url = f"{node['url']}/_cluster/health?wait_for_status=yellow&timeout=5s"
            if request(url, node["password"]).get("status") in ("green", "yellow"):
                break
        except (urllib.error.URLError, OSError, ValueError):
            pass
        if time.monotonic() > deadline or not alive(int(node["pid"])):
            stop()
            raise NodeError(f"Elasticsearch at {node['url']} did not become healthy")
        time.sleep(1)
    say(f"Elasticsearch {VERSION} is up at {node['url']}")


def running_node() -> dict[str, str]:
    if not state_file().is_file():
        raise NodeError(f"no test node is recorded in {state_file()}: start one first")
    node: dict[str, str] = json.loads(state_file().read_text())
    return node


def kill() -> None:
    """``kill -9`` the node, keeping its data and settings for ``restart`` (what losing a node
    looks like to its clients)."""
    node = running_node()
    pid = int(node["pid"] or 0)
    if not pid or not alive(pid):
        raise NodeError("the test node is not running")
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + STOP_TIMEOUT
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    say(f"killed the test node (pid {pid}); its data stays for restart")


def restart() -> None:
    """Start the recorded node again on the same data, ports and password."""
    node = running_node()
    if node["pid"] and alive(int(node["pid"])):
        raise NodeError("the test node is still running: kill or stop it first")
    say(f"restarting Elasticsearch {VERSION} on {node['url']} ({node['dir']})")
    launch(node)


def stop() -> bool:
    """Stop the node started by ``start`` (SIGTERM, then SIGKILL) and delete its directory once
    it is gone; False when none runs. A node that survives SIGKILL is a :class:`NodeError`."""
    if not state_file().is_file():
        return False
    node = json.loads(state_file().read_text())
    pid = int(node["pid"] or 0)
    if pid and alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + KILL_TIMEOUT
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
        if alive(pid):  # nothing is deleted: a node still running keeps its data and state
            raise NodeError(
                f"the test node (pid {pid}) is still running after SIGKILL; its data and state "
                f"({state_file()}) are kept: stop it by hand"
            )
    shutil.rmtree(node["dir"], ignore_errors=True)
    state_file().unlink()
    say("stopped the test node")
    return True


def test_env(node: dict[str, str]) -> dict[str, str]:
    """What the tests read; ``FEVEROUS_ES_TEST_CONFIG`` is the node's config directory, whose
    file realm (users, roles.yml) a test may extend: the node reloads those files by itself."""
    return {
        "FEVEROUS_ES_TEST_URL": node["url"],
        "FEVEROUS_ES_TEST_USER": node["user"],
        "FEVEROUS_ES_TEST_PASSWORD": node["password"],
        "FEVEROUS_ES_TEST_CONFIG": str(Path(node["dir"]) / "config"),
    }


def run(command: list[str]) -> int:
    """Start a node, run ``command`` with ``FEVEROUS_ES_TEST_*`` set, stop the node whatever
    happens; the command's exit status."""
    if not command:
        raise NodeError("run needs a command, e.g. `run -- pytest`")
    # A terminated run (a CI timeout) still stops the node: SystemExit runs the finally.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    node = start()
    try:
        return subprocess.run(command, env={**os.environ, **test_env(node)}).returncode
    except KeyboardInterrupt:
        return 130
    finally:
        stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="download (once) and unpack the pinned Elasticsearch")
    start_parser = commands.add_parser(
        "start", help="start a node; prints export lines for its settings"
    )
    start_parser.add_argument(
        "--quick", action="store_true",
        help="for a small test: the JIT's first tier only, half the CPU to start, slower code",
    )  # fmt: skip
    commands.add_parser("stop", help="stop the node and delete its data")
    commands.add_parser("kill", help="kill -9 the node, keeping its data for restart")
    commands.add_parser("restart", help="start the killed node again on the same data")
    run_parser = commands.add_parser("run", help="start a node, run a command, stop the node")
    run_parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            print(fetch())
        elif args.command == "start":
            for name, value in test_env(start(quick=args.quick)).items():
                print(f"export {name}={value}")
        elif args.command == "stop":
            if not stop():
                say("no test node was running")
        elif args.command == "kill":
            kill()
        elif args.command == "restart":
            restart()
        else:
            command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
            return run(command)
    except NodeError as error:
        say(str(error))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
