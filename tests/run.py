"""The whole test suite, in parallel pytest processes: `python tests/run.py [-j N] [pytest options]`.

README's test command and what `.ci/run` runs. The inner loop is plain `python -m pytest -m "not e2e"`.

Why: the suite mostly waits (local endpoints, Locust runs, subprocesses of the tool): one pytest
process used about half a core over 16 minutes. pytest-xdist cannot spread it: tests/conftest.py
imports locust first, which monkey-patches threading with gevent, and the channel threads of
xdist's workers (execnet) then block on the gevent hub ("This operation would block forever").
So this starts ordinary `pytest` processes, each a fresh interpreter as in a serial run:

- one runs the fast tier, `-m "not e2e"` (the inner loop, CPU-bound: in it, tests/conftest.py fails
  a test that starts a process or a server without the e2e marker);
- the files that hold e2e tests (asked of pytest with `--collect-only -m e2e`, while the fast tier
  runs) are dealt to `-j` processes, `-m e2e` each, longest first onto the least loaded, by the
  seconds stored in tests/durations.json (a file it does not know counts as the median). A whole
  file goes to one process, so its module-scoped fixtures start once.

Each process writes its output to a file, shown when it ends. The closing line adds them up, and the
exit code is pytest's: 0 when every process passed, 5 when none ran a test, else the first failing
process's code. `--store-durations` rewrites tests/durations.json from this run's e2e processes.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DURATIONS = ROOT / "tests" / "durations.json"
NO_TESTS = 5  # pytest.ExitCode.NO_TESTS_COLLECTED
DEFAULT_JOBS = 5  # e2e processes: they wait on servers and children (the suite used ~70 % of 2 cores at 4)
UNKNOWN_FILE_S = 10.0  # a file durations.json does not know yet, when it knows none


@dataclass
class Shard:
    """One pytest process: its name, its arguments, where its output and JUnit XML go."""

    name: str
    args: list[str]
    folder: Path
    files: list[str] = field(default_factory=list)
    process: subprocess.Popen | None = None
    started: float = 0.0
    seconds: float = 0.0

    @property
    def log(self) -> Path:
        return self.folder / f"{self.name}.log"

    @property
    def xml(self) -> Path:
        return self.folder / f"{self.name}.xml"

    def start(self) -> None:
        command = [sys.executable, "-m", "pytest", "-q", f"--junitxml={self.xml}",
                   f"--basetemp={self.folder / self.name}",  # its own tmp_path root: none cleans up another's
                   *self.args, *self.files]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        self.started = time.monotonic()
        print(f"tests/run.py: {self.name}: started, {len(self.files) or 'all'} files: "
              f"{shlex.join(['pytest', *self.args])}", flush=True)

    def finished(self) -> int | None:
        code = self.process.poll() if self.process else None
        if code is not None and not self.seconds:
            self.seconds = time.monotonic() - self.started
        return code


def deal(files: list[str], known: dict[str, float], jobs: int) -> list[list[str]]:
    """`files` dealt to at most `jobs` groups of about equal stored seconds: longest first, each onto
    the group with the fewest seconds so far (ties: the lower index). Empty groups are dropped."""
    stored = sorted(known.values())
    default = stored[len(stored) // 2] if stored else UNKNOWN_FILE_S
    weight = {f: known.get(f, default) for f in files}
    groups: list[list[str]] = [[] for _ in range(max(1, jobs))]
    loads = [0.0] * len(groups)
    for f in sorted(files, key=lambda f: (-weight[f], f)):
        i = loads.index(min(loads))
        groups[i].append(f)
        loads[i] += weight[f]
    return [sorted(g) for g in groups if g]


def collected_files(output: str) -> list[str]:
    """The test files named by `pytest --collect-only -q` output (`path::test` lines), in order."""
    files: dict[str, None] = {}
    for line in output.splitlines():
        if "::" in line and not line.startswith(" "):
            files[line.split("::", 1)[0]] = None
    return list(files)


def counts(xml: Path) -> dict[str, int]:
    """passed / failed / skipped from a pytest JUnit XML file (errors count as failed)."""
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if not xml.exists():
        return {"passed": 0, "failed": 0, "skipped": 0}
    for suite in ET.parse(xml).getroot().iter("testsuite"):
        for key in total:
            total[key] += int(suite.get(key, 0))
    failed = total["failures"] + total["errors"]
    return {"passed": total["tests"] - failed - total["skipped"], "failed": failed, "skipped": total["skipped"]}


def file_seconds(xml: Path) -> dict[str, float]:
    """Seconds per test file (setup + call + teardown of its tests) from a JUnit XML file."""
    seconds: dict[str, float] = {}
    if not xml.exists():
        return seconds
    for case in ET.parse(xml).getroot().iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        for end in range(len(parts), 0, -1):  # tests.cli.test_cli[.TestClass] -> tests/cli/test_cli.py
            path = "/".join(parts[:end]) + ".py"
            if (ROOT / path).is_file():
                seconds[path] = seconds.get(path, 0.0) + float(case.get("time") or 0)
                break
    return seconds


def overall_code(codes: list[int]) -> int:
    """0 when every process passed; NO_TESTS when none ran a test; else the first other code."""
    failing = [c for c in codes if c not in (0, NO_TESTS)]
    if failing:
        return failing[0]
    return NO_TESTS if all(c == NO_TESTS for c in codes) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tests/run.py", description=__doc__.split("\n\n")[0],
        epilog="Other options go to every pytest process (e.g. -x, -k EXPR, --timeout 60); to run "
               "some files or one tier, call pytest itself.")
    parser.add_argument("-j", "--jobs", type=int, default=int(os.environ.get("SM_LOCUST_TEST_JOBS", DEFAULT_JOBS)),
                        help=f"pytest processes for the e2e tier (default {DEFAULT_JOBS}, or $SM_LOCUST_TEST_JOBS)")
    parser.add_argument("--store-durations", action="store_true",
                        help="rewrite tests/durations.json from this run's e2e processes")
    options, pytest_args = parser.parse_known_args(argv)
    if options.jobs < 1:
        parser.error("--jobs: must be 1 or more")
    if any(not a.startswith("-") and (ROOT / a.split("::")[0]).exists() for a in pytest_args):
        parser.error("test paths are not taken: run pytest itself on some files")

    began = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="sm-locust-tests-"))
    fast = Shard("fast", ["-m", "not e2e", *pytest_args], folder)
    shards = [fast]
    stopping: list[int] = []

    def forward(signum, _frame):  # Ctrl+C reaches the whole group by itself; a SIGTERM to this process is passed on
        stopping.append(signum)
        for s in shards:
            if signum != signal.SIGINT and s.process and s.process.poll() is None:
                s.process.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    fast.start()

    collect = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-m", "e2e", *pytest_args],
                             cwd=ROOT, capture_output=True, text=True)
    if collect.returncode not in (0, NO_TESTS):
        print(collect.stdout + collect.stderr, flush=True)
        print(f"tests/run.py: collecting the e2e tests failed (exit {collect.returncode})", file=sys.stderr)
        forward(signal.SIGTERM, None)
        fast.process.wait()
        return collect.returncode
    known = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    groups = deal(collected_files(collect.stdout), known, options.jobs) if not stopping else []
    for i, files in enumerate(groups, 1):
        shard = Shard(f"e2e-{i}", ["-m", "e2e", *pytest_args], folder, files)
        shards.append(shard)
        shard.start()

    codes: dict[str, int] = {}
    while len(codes) < len(shards):
        for s in shards:
            if s.name not in codes and (code := s.finished()) is not None:
                codes[s.name] = code
                print(s.log.read_text(errors="replace").rstrip(), flush=True)
                print(f"tests/run.py: {s.name}: exit {code} after {s.seconds:.0f} s\n", flush=True)
        time.sleep(0.2)

    total = {"passed": 0, "failed": 0, "skipped": 0}
    for s in shards:
        for key, value in counts(s.xml).items():
            total[key] += value
    if options.store_durations and not stopping:  # a failing test's seconds count as much as a passing one's
        seconds = {f: t for f, t in known.items() if (ROOT / f).is_file()}  # kept for a file that did not run
        for s in shards[1:]:
            seconds.update(file_seconds(s.xml))
        DURATIONS.write_text(json.dumps({f: round(t, 1) for f, t in sorted(seconds.items())}, indent=1) + "\n")
        print(f"tests/run.py: stored the seconds of {len(seconds)} files in {DURATIONS.relative_to(ROOT)}")
    code = overall_code([codes[s.name] for s in shards])
    if stopping and code == 0:
        code = 128 + stopping[0]
    wall = time.monotonic() - began
    if code == 0:  # every log is printed above; a passing run's ~1 GB of tmp_paths would pile up run after run
        shutil.rmtree(folder, ignore_errors=True)
        where = "outputs removed (all passed)"
    else:
        where = f"outputs kept in {folder}"
    print(f"tests/run.py: {len(shards)} pytest processes in {wall:.0f} s ({wall / 60:.1f} min), exit {code}; {where}")
    print(f"tests: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
    return code


if __name__ == "__main__":
    sys.exit(main())
