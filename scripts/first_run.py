"""The newcomer's path, as written, on installs with nothing else in them (run by .ci/run
before the full install; only the standard library here).

1. The README's first ```bash block, read from the README itself (so the two cannot drift),
   runs in a throwaway copy of the checkout with no virtual environment active and an empty
   model cache, as on a fresh machine; what it prints must hold the README's shown output: the
   ``claim:`` line and a verdict line with the label shown.
2. On that base install (no extras): ``--help`` of every command; ``serve`` ends with one line
   naming ``pip install 'feverous-es[serve]'`` and exit status 1; ``train`` and ``export`` the
   same, naming the ``export`` extra.
3. The Docker image's install where it installs fewer extras than CI: docker/Dockerfile's
   ``COPY`` and ``pip install`` lines replayed into a fresh virtual environment (no Docker
   engine is needed), then the image's command (ENTRYPOINT + CMD) and the README's claim on
   the sample dump through that install.

    python scripts/first_run.py [--keep]    # exit 1, naming the step, when one fails
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The extras CI installs (.ci/run): an image that installs fewer is checked on its own.
CI_EXTRAS = {"export", "dev", "serve"}
VERDICT_LINE = re.compile(r"^(SUPPORTS|REFUTES|NOT ENOUGH INFO)  \(probability \d\.\d\d\)$")
SERVE_HINT = "pip install 'feverous-es[serve]'"
EXPORT_HINT = "pip install 'feverous-es[export]'"
INSTALL_TIMEOUT = 30 * 60
# Walks the command line's groups: every command's words, the top one first.
COMMANDS = """
import json, click
from feverous_es.cli import main
def walk(command, words):
    yield words
    for name, sub in getattr(command, "commands", {}).items():
        yield from walk(sub, [*words, name])
print(json.dumps(list(walk(main, []))))
"""


class StepFailed(Exception):
    """A step's check failed: the message says which and what was seen."""


def readme_blocks() -> tuple[str, list[str]]:
    """The README's first ```bash block and the lines of the fenced block right after it (the
    output the README shows)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.search(r"```bash\n(.*?)```\s*```\w*\n(.*?)```", text, re.DOTALL)
    if found is None:
        raise StepFailed("README.md has no ```bash block followed by the output it prints")
    return found.group(1).strip(), found.group(2).splitlines()


def check_shown_output(shown: list[str], printed: str) -> str:
    """The verdict line of ``printed`` when it holds the README's claim line and a verdict line
    of the label the README shows; else StepFailed."""
    claim_line = shown[0].strip()
    label = shown[1].split("  ")[0].strip()
    lines = [line.rstrip() for line in printed.splitlines()]
    if claim_line not in lines:
        raise StepFailed(f"the output has no line {claim_line!r}")
    verdicts = [line for line in lines if VERDICT_LINE.match(line)]
    if not verdicts:
        raise StepFailed("the output has no verdict line (LABEL  (probability 0.NN))")
    if not verdicts[0].startswith(label + "  "):
        raise StepFailed(f"the README shows {label}, the command printed {verdicts[0]!r}")
    return verdicts[0]


def fresh_env(cache: Path) -> dict[str, str]:
    """This environment without any virtual environment (none active, none on PATH) and with
    an empty model cache: what a new machine's shell gives."""
    dropped = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "FEVEROUS_ES_CONFIG")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    path = [p for p in env.get("PATH", "").split(os.pathsep)
            if p and not (Path(p).parent / "pyvenv.cfg").is_file()]  # fmt: skip
    env["PATH"] = os.pathsep.join(path)
    env["FEVEROUS_ES_CACHE"] = str(cache)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def copy_checkout(out: Path) -> Path:
    """The checkout's files as a new clone would hold them (tracked, and untracked ones git
    does not ignore), copied into ``out``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the working tree is not copied
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out / name)
    return out


def run(
    command: list[str] | str, *, cwd: Path, env: dict[str, str], what: str,
    timeout: float = INSTALL_TIMEOUT, check: bool = True,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``command`` run to its end (a string: by bash, stopping at the first failure); with
    ``check``, StepFailed (its last lines) unless it exits 0."""
    argv = ["bash", "-e", "-o", "pipefail", "-c", command] if isinstance(command, str) else command
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    print(f"  {what}: exit {done.returncode} in {time.perf_counter() - started:.0f} s", flush=True)
    if check and done.returncode:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise StepFailed(f"{what} exited {done.returncode}:\n    " + "\n    ".join(tail))
    return done


def expect_one_line_naming(done: subprocess.CompletedProcess[str], hint: str, what: str) -> None:
    """``done`` printed one line, an error naming ``hint``, and ended with exit status 1."""
    lines = (done.stdout + done.stderr).splitlines()
    if done.returncode != 1 or len(lines) != 1 or hint not in lines[0]:
        raise StepFailed(f"{what}: expected exit 1 and one line naming {hint!r}, got exit "
                         f"{done.returncode}: {lines[-4:]}")  # fmt: skip


def every_help(venv: Path, cwd: Path, env: dict[str, str]) -> int:
    """``--help`` of every command of the install in ``venv``; the number checked."""
    listed = run([str(venv / "bin" / "python"), "-c", COMMANDS], cwd=cwd, env=env,
                 what="listing the commands")  # fmt: skip
    commands = json.loads(listed.stdout)
    for words in commands:
        done = subprocess.run([str(venv / "bin" / "feverous-es"), *words, "--help"], cwd=cwd,
                              env=env, capture_output=True, text=True)  # fmt: skip
        if done.returncode or not done.stdout.startswith("Usage:"):
            raise StepFailed(f"`feverous-es {' '.join(words)} --help` exited {done.returncode}: "
                             f"{(done.stdout + done.stderr).strip()[-400:]}")  # fmt: skip
    print(f"  --help of {len(commands)} commands: each printed its usage", flush=True)
    return len(commands)


def readme_first_block(work: Path) -> None:
    """Steps 1 and 2 (the module)."""
    block, shown = readme_blocks()
    checkout = copy_checkout(work / "checkout")
    env = fresh_env(work / "cache")
    print(f"the README's first block, in a copy of the checkout:\n  $ {block}", flush=True)
    done = run(block, cwd=checkout, env=env, what="the README's first block")
    verdict = check_shown_output(shown, done.stdout)
    print(f"  it printed the README's claim line and {verdict!r}", flush=True)
    venv = checkout / ".venv"
    every_help(venv, checkout, env)
    command = venv / "bin" / "feverous-es"
    done = run([str(command), "serve", "--index", "sample-index"], cwd=checkout, env=env,
               what="serve without its extra", timeout=300, check=False)  # fmt: skip
    expect_one_line_naming(done, SERVE_HINT, "serve without its extra")
    done = run([str(command), "export", "feverous_es/models/verdict", "-o", str(work / "onnx")],
               cwd=checkout, env=env, what="export without torch", timeout=300,
               check=False)  # fmt: skip
    expect_one_line_naming(done, EXPORT_HINT, "export without torch")
    done = run([str(command), "train", "verdict", "--claims", "sample/claims.jsonl", "--out",
                str(work / "trained"), "--index", "sample-index"], cwd=checkout, env=env,
               what="train without torch", timeout=300, check=False)  # fmt: skip
    expect_one_line_naming(done, EXPORT_HINT, "train without torch")


def docker_install(work: Path) -> None:
    """Step 3 (the module), when the Dockerfile installs fewer extras than CI."""
    dockerfile = (REPO / "docker" / "Dockerfile").read_text(encoding="utf-8")
    install = re.search(r"^RUN (pip install .*)$", dockerfile, re.MULTILINE)
    if install is None:
        raise StepFailed("docker/Dockerfile has no `RUN pip install` line")
    named = re.search(r"\[([\w,-]+)\]", install.group(1))
    extras = set(named.group(1).split(",")) if named else set()
    if extras >= CI_EXTRAS:
        print("the Docker image installs what CI installs: not checked apart", flush=True)
        return
    app = work / "app"
    app.mkdir()
    for sources, target in re.findall(r"^COPY (.+) (\S+)$", dockerfile, re.MULTILINE):
        for source in sources.split():
            path = REPO / source
            dest = app / target / path.name if target.endswith("/") else app / target
            if path.is_dir():
                shutil.copytree(path, dest, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, dest)
    env = fresh_env(work / "docker-cache")
    venv = work / "docker-venv"
    print(f"the Docker image's install, extras {sorted(extras) or 'none'}:\n"
          f"  $ {install.group(1)}", flush=True)  # fmt: skip
    run([sys.executable, "-m", "venv", str(venv)], cwd=app, env=env, what="a fresh venv")
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    run(install.group(1), cwd=app, env=env, what="the image's pip install")
    entry = json.loads(re.search(r"^ENTRYPOINT (.+)$", dockerfile, re.MULTILINE).group(1))
    cmd = json.loads(re.search(r"^CMD (.+)$", dockerfile, re.MULTILINE).group(1))
    outside = work / "docker-run"  # not the app directory: the installed package is run
    outside.mkdir()
    what = f"the image's command ({shlex.join([*entry, *cmd])})"
    run([*entry, *cmd], cwd=outside, env=env, what=what, timeout=300)
    every_help(venv, outside, env)
    block, shown = readme_blocks()
    claim = re.search(r'feverous-es verify "([^"]+)"', block).group(1)  # type: ignore[union-attr]
    index = outside / "index"
    run([*entry, "index", str(REPO / "sample" / "wiki.db"), "--out", str(index)], cwd=outside,
        env=env, what="index on the image's install")  # fmt: skip
    done = run([*entry, "verify", claim, "--index", str(index)], cwd=outside, env=env,
               what="verify on the image's install", timeout=600)  # fmt: skip
    print(f"  it printed {check_shown_output(shown, done.stdout)!r}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--step",
        choices=("readme", "docker"),
        action="append",
        help="run only this step (repeat for more; default: every step)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="feverous-es-first-run-"))
    try:
        for name, step in (("readme", readme_first_block), ("docker", docker_install)):
            if args.step is None or name in args.step:
                step(work)
    except (StepFailed, subprocess.TimeoutExpired) as error:
        print(f"error: the newcomer's path failed: {error}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print("the newcomer's path works as the README writes it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
