"""How the shell blocks README.md and docs/*.md mark runnable (`<!-- runnable -->` on the line
before the fence) are run: as written, one after another in one fresh clone, offline, as a newcomer
pastes them (README.md first, then the docs in the order README.md links them: `ORDER`); no block
leaves a process running, and `git status` of the clone is clean at the end (`check_documents`
over `documents_in_order()`).

Every HTML page the blocks wrote under reports/ (report.html, sweep.html, compare.html) is then
opened in headless Chromium at 1400 px, with every request that is not the file itself refused (the
pages work offline, self-contained), and kept as a screenshot in test-artifacts/pages/ (skipped with
a reason when Chromium or Playwright is missing); `cli_screenshot` takes one with the plain
`chromium --headless --screenshot` and checks it is a PNG of the window's size, not blank.

A fresh clone is made of the work tree's files (tracked and new, not ignored) in a git repository of
its own; the blocks run there in order, each as one bash script (a heredoc is one command:
`commands`), against the local endpoint the blocks start themselves (`sm-locust serve ... &`). Only
durations are shortened and the set-up line's install left out (`SHORTER`, and the `SM_LOCUST_*`
variables the commands leave unset), and port 8080 becomes a free one: the commands are otherwise
the documents' own. Each command's exit code is checked: 0, or 0 or 1 in a block marked `<!--
runnable: gates -->` (gates that may fail on a busy machine, a report that names a gap: exit 1 is a
verdict, not a broken command); the block stops at the first other one. A sweep may also exit 1 when
its last lines say a configuration was INCONCLUSIVE because the load generator was the bottleneck in
both measurements (`STARVED`): that is the tool's documented answer on a machine too busy to measure
(a CI runner beside a CPU hog: an autoscaling example's client fell 2 s behind, 240 emulated seconds
at x120), never a broken command; every other exit 1 of a sweep fails. A block stops what it starts:
a process it started still running 10 s after it ended (a `moto_server &` never killed), found in
the process tree even when it left the shell's process group (tests/docs/reaper.py), fails it,
named.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from sm_locust.sweep.runner import FIRST_SUFFIX, REPLICATE_SUFFIX
from sm_locust.util.ports import free_port
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


HEREDOC = re.compile(r"(?<!<)<<(?P<strip>-?)\s*(?P<quote>['\"]?)(?P<word>\w+)(?P=quote)")


def commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, blank and comment lines left out; a command
    with a heredoc (`python - <<'PY'`) keeps its lines up to the delimiter's, as written."""
    found: list[str] = []
    lines = iter(block.splitlines())
    for line in lines:
        while line.endswith("\\"):
            line = line[:-1] + " " + next(lines, "")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        heredoc = HEREDOC.search(line.split(" #", 1)[0])
        if heredoc:
            body = [line]
            for inner in lines:
                body.append(inner)
                if (inner.lstrip("\t") if heredoc["strip"] else inner) == heredoc["word"]:
                    break
            line = "\n".join(body)
        found.append(line)
    return found


def background(command: str) -> bool:
    """Whether the command runs in the background (`... &`, a comment after it allowed)."""
    return bool(re.search(r"&\s*(#.*)?$", command.splitlines()[0]))


STARVED = "INCONCLUSIVE: the load generator, not the endpoint, was the bottleneck in both measurements"
SWEEP = re.compile(r"^\s*sm-locust sweep (?!.*--plan)")


def checked_script(block: str, highest: int) -> str:
    """The block as a script that prints `::rc N` after each command in the foreground and stops at
    an exit code above `highest` (a sweep's exit 1 passes when the block's log, `$BLOCK_LOG`, ends
    saying `STARVED`: module doc)."""
    lines = []
    for command in commands(block):
        lines.append(command)
        if not background(command):
            starved = (f' || {{ [ "$__rc" -eq 1 ] && tail -n 3 "$BLOCK_LOG" | grep -qF "{STARVED}"; }}'
                       if SWEEP.match(command) else "")
            lines.append(f'__rc=$?; echo "::rc $__rc"; {{ [ "$__rc" -le {highest} ]{starved}; }} || exit "$__rc"')
    return "\n".join(lines) + "\n"


def exit_codes(output: str) -> list[int]:
    """The `::rc N` lines `checked_script` printed, also one that follows output without a newline
    (`curl -s` of a JSON body)."""
    return [int(code) for code in re.findall(r"::rc (\d+)$", output, re.M)]


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
REAPER = Path(__file__).with_name("reaper.py")


def run_block(clone: Path, script: str, env: dict, log: Path,
              grace_s: float = LEFT_GRACE_S) -> tuple[subprocess.CompletedProcess, list[str]]:
    """The script under bash, in a session of its own, under tests/docs/reaper.py: every process the
    block started, also one that left its process group (`setsid`, a daemon), is its descendant
    there; the command lines of those still running `grace_s` after the block ended are returned
    (and they are killed). Output goes into `log` (a background job left running would hold a pipe
    open)."""
    left_file = log.with_suffix(".left.json")
    left_file.unlink(missing_ok=True)
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(REAPER), str(left_file), str(grace_s), "bash", "-c", script],
                                cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=600 + grace_s + 20)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # a block that timed out: its whole group
            except ProcessLookupError:
                pass
            proc.wait()
    left = json.loads(left_file.read_text()) if left_file.is_file() else ["(the block did not end in 600 s)"]
    return subprocess.CompletedProcess(proc.args, proc.returncode, log.read_text(errors="replace"), ""), left


def linked_order(readme: str) -> list[str]:
    """README.md, then the docs/*.md in the order README.md first links them (a newcomer's path
    through the pages), then those it does not link, alphabetically."""
    linked = list(dict.fromkeys(re.findall(r"\bdocs/([\w.-]+\.md)\b", readme)))
    rest = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name not in linked)
    return ["README.md", *(f"docs/{name}" for name in [*linked, *rest] if (ROOT / "docs" / name).is_file())]


ORDER = linked_order((ROOT / "README.md").read_text())
def documents_in_order(order: list[str] = ORDER) -> list[str]:
    """The documents with runnable blocks, in the newcomer's `order` (README.md first)."""
    return [d for d in order if runnable_blocks((ROOT / d).read_text())]


def written_folders(block: str) -> list[str]:
    """The folders under reports/ a block's commands write (`--out`, `--sm-out`)."""
    return re.findall(r"--(?:sm-)?out[= ]+(reports/[\w./-]+)", block)


def check_documents(documents: list[str], tmp_path: Path) -> list[Path]:
    """Run the runnable blocks of `documents`, in their order, one after another in ONE fresh clone
    (module doc), as a newcomer pastes them; fail on the first that breaks or leaves a process
    running, and at the end when `git status` of the clone is not clean. Returns the HTML pages the
    blocks wrote under reports/ (each block's output is kept in tmp_path/blocks/)."""
    clone = fresh_clone(tmp_path)
    logs = tmp_path / "blocks"
    logs.mkdir()
    env = {**os.environ, **SHORT_ENV, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    n = 0
    for document in documents:
        for tag, block in runnable_blocks((ROOT / document).read_text()):
            n += 1
            where = f"{document}, block {n} of the sequence"
            script = checked_script(shortened(block, {"8080": free_port(), "5000": free_port()}),
                                    highest=1 if tag == "gates" else 0)
            log = logs / f"{n:02d}-{Path(document).stem}.log"
            result, left = run_block(clone, script, {**env, "BLOCK_LOG": str(log)}, log)
            codes = exit_codes(result.stdout)
            assert result.returncode == 0 and len(codes) == script.count("::rc"), \
                f"{where}:\n{script}\n---\n{result.stdout[-4000:]}"
            assert "Traceback" not in result.stdout, f"{where}:\n{result.stdout[-4000:]}"
            assert not left, f"{where} left these running (stop what it starts):\n{script}\n---\n{left}"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert status.stdout == "", f"the blocks of {documents} left files git sees:\n{status.stdout}"
    return sorted((clone / "reports").rglob("*.html"))


def sweep_reports(folder: Path) -> list[Path]:
    """Each configuration's final run report, as the sweep folder's sweep.json records them, checked against
    the folder: every configuration has its report (`report`: `<run_dir>/report.html`, on disk), and every
    other run folder with a report is one sweep.json records as a configuration's earlier measurement,
    kept beside its own: `remeasured` (the first measurement, client-bound, `<run_dir>.client-bound`) or
    `replicate` (the first replicate of a confirmation, `<run_dir>.replicate-1`)."""
    configurations = json.loads((folder / "sweep.json").read_text())["configurations"]
    finals, kept = [], set()
    for c in configurations:
        assert c["report"] == f"{c['run_dir']}/report.html" and (folder / c["report"]).is_file(), c
        finals.append(folder / c["report"])
        for key, suffix in (("remeasured", FIRST_SUFFIX), ("replicate", REPLICATE_SUFFIX)):
            if c.get(key):
                assert c[key]["first_run_dir"] == c["run_dir"] + suffix, c
                kept.add(c[key]["first_run_dir"])
    others = {p.parent.name for p in folder.glob("*/report.html")} - {c["run_dir"] for c in configurations}
    assert others <= kept, f"run folders sweep.json does not record: {sorted(others - kept)}"
    return finals


SHOT_SIZE = (1400, 2400)  # the window of a command-line screenshot: 1400 px wide, as a laptop shows a page


def png_pixels(data: bytes) -> tuple[int, int, np.ndarray]:
    """(width, height, rows of pixels) of an 8-bit, non-interlaced PNG (what Chromium writes), each
    row unfiltered: an array [height, width, channels]."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    chunks, at = {}, 8
    idat = b""
    while at < len(data):
        length = int.from_bytes(data[at:at + 4], "big")
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        if kind == b"IDAT":
            idat += body
        chunks.setdefault(kind, body)
        at += 12 + length
    header = chunks[b"IHDR"]
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    depth, colour, interlace = header[8], header[9], header[12]
    assert depth == 8 and interlace == 0 and colour in (0, 2, 4, 6), f"PNG kind not read here: {header.hex()}"
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[colour]
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, width * channels + 1)
    rows = np.zeros((height, width * channels), np.uint8)
    previous = np.zeros(width * channels, np.uint8)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:]
        if kind == 0:
            rows[y] = line
        elif kind == 1:  # Sub: a running sum along the row, per channel
            rows[y] = (line.reshape(width, channels).cumsum(axis=0, dtype=np.uint64) % 256).ravel()
        elif kind == 2:  # Up
            rows[y] = line + previous
        else:  # Average, Paeth: byte by byte (Chromium writes few such rows)
            out, up = [0] * len(line), previous.tolist()
            for x, value in enumerate(line.tolist()):
                left = out[x - channels] if x >= channels else 0
                corner = up[x - channels] if x >= channels else 0
                if kind == 3:
                    out[x] = (value + (left + up[x]) // 2) & 0xFF
                else:
                    p = left + up[x] - corner
                    pa, pb, pc = abs(p - left), abs(p - up[x]), abs(p - corner)
                    out[x] = (value + (left if pa <= pb and pa <= pc else up[x] if pb <= pc else corner)) & 0xFF
            rows[y] = out
        previous = rows[y]
    return width, height, rows.reshape(height, width, channels)


def drawn_share(data: bytes) -> tuple[int, int, float]:
    """(width, height, share of the pixels not the background's colour) of a PNG: a blank page is 0."""
    width, height, pixels = png_pixels(data)
    flat = pixels.reshape(width * height, -1)
    _, counts = np.unique(flat.view(np.dtype((np.void, flat.shape[1]))), return_counts=True)
    return width, height, 1 - counts.max() / (width * height)


def cli_screenshot(page: Path, png: Path, profile: Path, size: tuple[int, int] = SHOT_SIZE) -> float:
    """`chromium --headless --screenshot` of `page` in a `size` window into `png`; checks it is a PNG
    of that size with something drawn, and returns the share of pixels drawn (skips the test with a
    reason when Chromium is missing)."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium): pages not screenshotted")
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    shot = subprocess.run([CHROMIUM, "--headless", *CHROMIUM_FLAGS, "--hide-scrollbars", f"--user-data-dir={profile}",
                           f"--window-size={size[0]},{size[1]}", "--virtual-time-budget=5000",
                           f"--screenshot={png}", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0 and png.is_file(), f"{page}: chromium failed:\n{shot.stderr[-2000:]}"
    width, height, drawn = drawn_share(png.read_bytes())
    assert (width, height) == size, f"{png}: {width}x{height}, not {size[0]}x{size[1]}"
    assert drawn > 0.005, f"{png}: blank ({drawn:.2%} of the pixels drawn)"
    return drawn


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
