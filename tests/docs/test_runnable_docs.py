"""The shell blocks README.md and docs/*.md mark runnable (`<!-- runnable -->` on the line before the
fence) run as written on a fresh clone, offline, and leave `git status` clean.

A fresh clone is made of the work tree's files (tracked and new, not ignored) in a git repository of
its own; each document's blocks run there in order, with bash, against the local endpoint the
blocks start themselves (`sm-locust serve ... &`). Only durations are shortened (`SHORTER`, and the
`SM_LOCUST_*` variables the commands leave unset), and port 8080 becomes a free one: the commands
are otherwise the documents' own. `<!-- runnable: gates -->` marks a block whose gates may fail
on a busy machine (exit 1 is a verdict, not a broken command); any other exit code fails.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sm_locust.endpoint.server import free_port
from tests.conftest import ROOT

MARK = re.compile(r"^<!-- runnable(?::\s*(?P<tag>[\w-]+))?\s*-->\s*\n```(?P<lang>\w*)\n(?P<body>.*?)^```", re.M | re.S)
DOCUMENTS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
# (pattern, replacement): the same commands, shorter
SHORTER = [
    (re.compile(r"(?<=\s)-t \d+[smhd]?\b"), "-t 3s"),
    (re.compile(r"\bsm-locust demo\b"), "sm-locust demo --step-seconds 1"),
    (re.compile(r"(sm-locust sweep examples/sweeps/batching\.yaml)(?!\s+--plan)"),
     r"\1 --set load.step_seconds=2 --set load.max_users=8 --set grid.max_concurrency=[1,4]"),
    (re.compile(r"(sm-locust sweep examples/sweeps/autoscaling\.yaml)(?!\s+--plan)"),
     r"\1 --set autoscaling.time_scale=240"),
]
SHORT_ENV = {"SM_LOCUST_MAX_DURATION": "8", "SM_LOCUST_STEP_SECONDS": "2", "SM_LOCUST_MIN_STEP_SECONDS": "1"}


def runnable_blocks(text: str) -> list[tuple[str, str]]:
    """(tag, shell text) of every block marked runnable, in document order."""
    return [(m["tag"] or "", m["body"]) for m in MARK.finditer(text)]


def shortened(block: str, port: int) -> str:
    for pattern, replacement in SHORTER:
        block = pattern.sub(replacement, block)
    return block.replace("8080", str(port))


def test_marked_blocks_are_shell_and_name_files_that_exist():
    found = 0
    for document in DOCUMENTS:
        text = (ROOT / document).read_text()
        for match in MARK.finditer(text):
            found += 1
            assert match["lang"] in ("bash", "sh"), f"{document}: a runnable block must be a shell block"
            for path in re.findall(r"(?:examples|sm_locust)/[\w./-]+\.\w+", match["body"]):
                assert (ROOT / path).is_file(), f"{document}: {path} does not exist"
    assert found >= 8  # README's examples at least


def test_shortening_keeps_the_commands():
    block = "sm-locust run -u 8 -t 1m --payload examples/body.json --endpoint-url http://127.0.0.1:8080\n"
    assert shortened(block, 1234) == ("sm-locust run -u 8 -t 3s --payload examples/body.json "
                                      "--endpoint-url http://127.0.0.1:1234\n")
    assert "--set" not in shortened("sm-locust sweep examples/sweeps/batching.yaml --plan", 1)


def fresh_clone(tmp_path: Path) -> Path:
    """The work tree's files (what `git status` would commit) in a repository of their own."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    clone = tmp_path / "clone"
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            target = clone / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    git = ["git", "-c", "user.name=docs-test", "-c", "user.email=docs-test@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "fresh clone"]):
        subprocess.run(git + args, cwd=clone, check=True, capture_output=True)
    return clone


def run_block(clone: Path, block: str, env: dict) -> subprocess.CompletedProcess:
    """The block under bash -e in a session of its own; whatever it left running is ended after it."""
    proc = subprocess.Popen(["bash", "-e", "-c", block], cwd=clone, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=600)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # a `serve ... &` the block did not stop
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, output, "")


@pytest.mark.e2e
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("document", [d for d in DOCUMENTS if runnable_blocks((ROOT / d).read_text())])
def test_runnable_blocks_run_and_leave_git_status_clean(document, tmp_path):
    clone = fresh_clone(tmp_path)
    env = {**os.environ, **SHORT_ENV, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for tag, block in runnable_blocks((ROOT / document).read_text()):
        command = shortened(block, free_port())
        result = run_block(clone, command, env)
        allowed = (0, 1) if tag == "gates" else (0,)
        assert result.returncode in allowed, f"{document}:\n{command}\n---\n{result.stdout[-4000:]}"
        assert "Traceback" not in result.stdout, result.stdout[-4000:]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert status.stdout == "", f"{document}'s examples left files git sees:\n{status.stdout}"
