"""How the shell blocks README.md and docs/*.md mark runnable (`<!-- runnable -->` on the line
before the fence) are run: as written on a fresh clone, offline, and leave `git status` clean.

Every HTML page the blocks wrote under reports/ (report.html, sweep.html, compare.html) is then
opened in headless Chromium at 1400 px, with every request that is not the file itself refused (the
pages work offline, self-contained), and kept as a screenshot in test-artifacts/pages/ (skipped with
a reason when Chromium or Playwright is missing).

A fresh clone is made of the work tree's files (tracked and new, not ignored) in a git repository of
its own; each document's blocks run there in order, with bash, against the local endpoint the blocks
start themselves (`sm-locust serve ... &`). Only durations are shortened and the set-up line's
install left out (`SHORTER`, and the `SM_LOCUST_*` variables the commands leave unset), and port
8080 becomes a free one: the commands are otherwise the documents' own. Each command's exit code is
checked: 0, or 0 or 1 in a block marked `<!-- runnable: gates -->` (gates that may fail on a busy
machine, a report that names a gap: exit 1 is a verdict, not a broken command); the block stops at
the first other one. A sweep may also exit 1 when its last lines say a configuration was
INCONCLUSIVE because the load generator was the bottleneck in both measurements (`STARVED`): that
is the tool's documented answer on a machine too busy to measure (a CI runner beside a CPU hog: an
autoscaling example's client fell 2 s behind, 240 emulated seconds at x120), never a broken command;
every other exit 1 of a sweep fails. A block stops what it starts: a process still in its shell's
process group 10 s after it ended (a `moto_server &` never killed) fails it, named.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sm_locust.endpoint.server import free_port
from tests.conftest import ROOT

MARK = re.compile(r"^<!-- runnable(?::\s*(?P<tag>[\w-]+))?\s*-->\s*\n```(?P<lang>\w*)\n(?P<body>.*?)^```", re.M | re.S)
DOCUMENTS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
# (pattern, replacement): the same commands, shorter
SHORTER = [
    # the set-up line's install: the blocks run in the suite's own installed environment, offline
    (re.compile(r"^python3 -m venv \.venv && \. \.venv/bin/activate && pip install -e '\.\[[\w,]+\]' && ", re.M), ""),
    (re.compile(r"(?<=\s)-t \d+[smhd]?\b"), "-t 3s"),
    (re.compile(r"\bsm-locust demo\b"), "sm-locust demo --step-seconds 1"),
    # steps run until their goodput is known to +-5 % (the search's tolerance): 2-s steps never were
    (re.compile(r"(sm-locust sweep examples/sweeps/batching\.yaml)(?!\s+--plan)"),
     r"\1 --set load.step_seconds=8 --set load.max_users=8 --set grid.max_concurrency=[1,4]"),
    (re.compile(r"(sm-locust sweep examples/sweeps/autoscaling\.yaml)(?!\s+--plan)"),
     r"\1 --set autoscaling.time_scale=120"),  # x240 made a 0.1-s client stall 24 emulated s
]
ARTIFACTS = ROOT / "test-artifacts" / "pages"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHORT_ENV = {"SM_LOCUST_MAX_DURATION": "8", "SM_LOCUST_STEP_SECONDS": "2", "SM_LOCUST_MIN_STEP_SECONDS": "1"}


def runnable_blocks(text: str) -> list[tuple[str, str]]:
    """(tag, shell text) of every block marked runnable, in document order."""
    return [(m["tag"] or "", m["body"]) for m in MARK.finditer(text)]


def shortened(block: str, ports: dict[str, int]) -> str:
    for pattern, replacement in SHORTER:
        block = pattern.sub(replacement, block)
    for documented, free in ports.items():
        block = block.replace(documented, str(free))
    return block


def commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, blank and comment lines left out."""
    joined = re.sub(r"\\\n", " ", block)
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


STARVED = "INCONCLUSIVE: the load generator, not the endpoint, was the bottleneck in both measurements"
SWEEP = re.compile(r"^\s*sm-locust sweep (?!.*--plan)")


def checked_script(block: str, highest: int) -> str:
    """The block as a script that prints `::rc N` after each command in the foreground and stops at
    an exit code above `highest` (a sweep's exit 1 passes when the block's log, `$BLOCK_LOG`, ends
    saying `STARVED`: module doc)."""
    lines = []
    for command in commands(block):
        lines.append(command)
        if not re.search(r"&\s*(#.*)?$", command):
            starved = (f' || {{ [ "$__rc" -eq 1 ] && tail -n 3 "$BLOCK_LOG" | grep -qF "{STARVED}"; }}'
                       if SWEEP.match(command) else "")
            lines.append(f'__rc=$?; echo "::rc $__rc"; {{ [ "$__rc" -le {highest} ]{starved}; }} || exit "$__rc"')
    return "\n".join(lines) + "\n"


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


LEFT_GRACE_S = 10.0  # a `kill %1` without `wait`: the process may take this long to go


def left_running(group: int, grace_s: float = LEFT_GRACE_S) -> list[str]:
    """The command lines of the processes still in process group `group` (a block's background jobs
    share its shell's group) once `grace_s` has passed without them all ending."""
    import psutil

    deadline = time.monotonic() + grace_s
    while True:
        left = []
        for process in psutil.process_iter(["pid", "cmdline"]):
            try:
                if os.getpgid(process.pid) == group and process.status() != psutil.STATUS_ZOMBIE:
                    left.append(" ".join(process.info["cmdline"] or [])[:200])
            except (ProcessLookupError, psutil.Error):
                continue
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)


def run_block(clone: Path, script: str, env: dict, log: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """The script under bash in a session of its own, its output into `log` (a background job it
    leaves running would hold a pipe open); what it left running (`left_running`) is named, then
    ended."""
    left: list[str] = []
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "-c", script], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=600)
            left = left_running(proc.pid)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # a `serve ... &` the block did not stop
            except ProcessLookupError:
                pass
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, log.read_text(errors="replace"), ""), left




def check_document(document: str, tmp_path: Path) -> None:
    """Run `document`'s runnable blocks in a fresh clone (module doc); fail on the first that breaks."""
    clone = fresh_clone(tmp_path)
    env = {**os.environ, **SHORT_ENV, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for tag, block in runnable_blocks((ROOT / document).read_text()):
        script = checked_script(shortened(block, {"8080": free_port(), "5000": free_port()}),
                                highest=1 if tag == "gates" else 0)
        result, left = run_block(clone, script, {**env, "BLOCK_LOG": str(tmp_path / "block.log")},
                                 tmp_path / "block.log")
        codes = [int(code) for code in re.findall(r"^::rc (\d+)$", result.stdout, re.M)]
        assert result.returncode == 0 and len(codes) == script.count("::rc"), \
            f"{document}:\n{script}\n---\n{result.stdout[-4000:]}"
        assert "Traceback" not in result.stdout, result.stdout[-4000:]
        assert not left, f"{document}: a block left these running (stop what it starts):\n{script}\n---\n{left}"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert status.stdout == "", f"{document}'s examples left files git sees:\n{status.stdout}"
    pages = sorted((clone / "reports").rglob("*.html"))
    screenshots(pages, clone / "reports", ARTIFACTS / Path(document).stem)



def screenshots(pages: list[Path], root: Path, folder: Path) -> None:
    """Each page in headless Chromium at 1400 px, offline: no request but the page itself, no script
    error; a full-page screenshot per page in `folder` (test-artifacts: look at them)."""
    pages = [page for page in pages if page.name != "locust_report.html"]  # Locust's own
    if not pages:
        return
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium): pages not screenshotted")
    sync_playwright = pytest.importorskip("playwright.sync_api", reason="playwright (the test extra)").sync_playwright
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        for page_path in pages:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            refused: list[str] = []
            errors: list[str] = []
            own = page_path.as_uri()
            page.on("pageerror", lambda error, errors=errors: errors.append(str(error)))

            def offline(route, refused=refused, own=own):
                if route.request.url == own:
                    route.continue_()
                else:
                    refused.append(route.request.url)
                    route.abort()

            page.route("**/*", offline)
            page.goto(own, wait_until="load")
            page.wait_for_timeout(500)
            name = "-".join(page_path.relative_to(root).with_suffix(".png").parts)
            page.screenshot(path=str(folder / name), full_page=True)
            assert not errors, f"{page_path}: {errors}"
            assert not refused, f"{page_path} asked for {refused} (a report must work offline)"
            page.close()
        browser.close()
