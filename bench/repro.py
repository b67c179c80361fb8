"""Does the same command give the same answer? Run it N times and compare the verdicts.

    python bench/repro.py --runs 10 --serve "--max-concurrency 4 --service-time-ms 20" -- \\
        sm-locust run --endpoint-name e --endpoint-url {url} --payload examples/body.json \\
        --shape plateau --latency-slo-ms 100 --out {out}
    python bench/repro.py --runs 10 --hogs 6 --serve "..." -- sm-locust run ... --out {out}

`{out}` is a fresh run folder per run (summary.json is read from it); `{url}` the local endpoint
`--serve` starts once (`sm-locust serve` with those arguments, on a free port) for all runs.
`--hogs K` pins the command (the load generator and every process it starts) to CPU 0 beside K
`python -c 'while 1: pass'` hogs, and the local endpoint alone on CPU 1 (taskset); `--hogs 0`
pins without hogs. It prints, per run and in total:

- the verdict (summary.json `verdict.status`: ok / inconclusive, and why), the knee load, the
  capacity (or, for an LLM run, output tokens/s) with its 95 % interval, a sweep's recommendation;
- how often the verdicts agreed: the same knee load (within one granule: summary.json
  `plateau.knee_granule`, the resolution the search placed that knee to), every pair of
  capacity intervals overlapping, the same recommendation; INCONCLUSIVE runs are counted apart;
- the capacity interval's coverage of what the local endpoint itself counted (its
  `/_sm_locust/stats` successes) over the capacity step's steady window, and the endpoint's own
  mean latency there beside the client's p50 (the gap is the client's; `run<i>.endpoint.jsonl` keeps
  the samples);
- with `--reference RPS` (the endpoint's capacity measured apart, e.g. `--hogs 0`): how many runs
  found the capacity within 5 % of it, ended INCONCLUSIVE naming the load generator, or neither;
- the INCONCLUSIVE rate, the time each run took, and the load average (the machine may be shared).

A run is cut after `--timeout-s` (30 min); a sweep cut before its end (its sweep.json a progress
write) left no verdict: what it had ranked so far is not its recommendation.

Figures are printed, not asserted (tests hold relations; timings and rates belong here).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIENT_CPU, ENDPOINT_CPU = "0", "1"
KNEE_GRANULE = 1.0  # the knee's resolution when summary.json does not record it (`plateau.knee_granule`)
CONCLUSIVE = ("ok", "below-lowest-load")  # verdict.status values that answer (the second: no load met the SLOs)


def _env() -> dict:
    env = dict(os.environ)
    env.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true", "PYTHONUNBUFFERED": "1"})
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"):
        env.pop(name, None)
    return env


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(children.get(current, []))
    return out


def autogroup_nice(pid: int | str, nice: int) -> str:
    """Set the autogroup (session) nice of `pid`: with `kernel.sched_autogroup_enabled` a CPU is shared
    between sessions first and a process's own nice counts only inside its session (sched(7)), so
    the other sessions' `nice -n 15` does not yield the core to a measurement. What was done, in words."""
    path = Path(f"/proc/{pid}/autogroup")
    try:
        path.write_text(f"{nice}\n")
        return path.read_text().strip()
    except OSError as exc:
        return f"not set ({exc.strerror or exc})"


def pin(pid: int, cpu: str) -> None:
    """Every thread of `pid` and of its descendants onto `cpu` (children started later inherit it)."""
    for each in descendants(pid):
        subprocess.run(["taskset", "-a", "-p", "-c", cpu, str(each)], capture_output=True, check=False)


class Counter:
    """The endpoint's own `successes`, sampled every `period_s` with epoch timestamps (summary.json's clock)."""

    def __init__(self, endpoint, period_s: float = 0.25):
        self.endpoint, self.period_s = endpoint, period_s
        self.samples: list[tuple[float, float]] = []
        self.latency: list[tuple[float, float, float]] = []  # (epoch, successes, its latency sum in us)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                stats = self.endpoint.stats()
                self.samples.append((time.time(), float(stats["successes"])))
                self.latency.append((time.time(), float(stats["successes"]),
                                     float(stats.get("model_latency_us_sum") or 0.0)
                                     + float(stats.get("overhead_latency_us_sum") or 0.0)))
            except (OSError, KeyError, ValueError):
                pass
            self._stop.wait(self.period_s)

    def __enter__(self) -> Counter:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def rate(self, start: float, end: float) -> float | None:
        def at(t: float) -> float | None:
            before = [(ts, n) for ts, n in self.samples if ts <= t]
            after = [(ts, n) for ts, n in self.samples if ts >= t]
            if not before or not after:
                return None
            (t0, n0), (t1, n1) = before[-1], after[0]
            return n0 if t1 == t0 else n0 + (n1 - n0) * (t - t0) / (t1 - t0)

        a, b = at(start), at(end)
        return None if a is None or b is None or end <= start else (b - a) / (end - start)

    def mean_latency_ms(self, start: float, end: float) -> float | None:
        """The endpoint's own mean latency (ModelLatency + OverheadLatency) over the calls it completed
        between two sampling instants nearest `start` and `end`: what a response took inside it."""
        inside = [row for row in self.latency if start <= row[0] <= end]
        if len(inside) < 2 or inside[-1][1] <= inside[0][1]:
            return None
        return (inside[-1][2] - inside[0][2]) / (inside[-1][1] - inside[0][1]) / 1000.0

    def write(self, path: Path) -> None:
        """The samples, one JSON line each (epoch, successes, latency sum us): per-step comparisons later."""
        path.write_text("".join(json.dumps(row) + "\n" for row in self.latency))


@dataclass
class Run:
    index: int
    seconds: float
    load_average: float
    exit_code: int | None
    status: str = "error"  # summary.json verdict.status: ok | inconclusive | below-lowest-load; error: no summary;
    # unfinished: a sweep cut before its end
    reason: str | None = None
    knee: float | None = None
    knee_loads: list[float] | None = None  # summary.json plateau.knee_loads: the knee's interval in loads
    knee_granule: float = KNEE_GRANULE  # summary.json plateau.knee_granule: the resolution the knee was placed to
    figure: float | None = None  # capacity req/s, or output tokens/s for an LLM run
    ci95: list[float] | None = None
    unit: str = "req/s"
    counted: float | None = None  # what the local endpoint counted over the capacity step's window
    endpoint_ms: float | None = None  # the endpoint's own mean latency over that window (ModelLatency + Overhead)
    client_ms: float | None = None  # the client's p50 at the capacity step
    recommendation: str | None = None
    tied: bool = False  # a sweep's recommendation says it ties with another configuration
    text: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def knee_uncertain(self) -> bool:
        """The verdict said its knee is uncertain (`knee_loads`' low end further below the knee than the
        search's resolution there, `knee_granule`)."""
        if self.knee_loads is None or self.knee is None:
            return False
        return self.knee - self.knee_loads[0] > self.knee_granule + 1e-9

    @property
    def covers(self) -> bool | None:
        if self.counted is None or self.ci95 is None:
            return None
        return self.ci95[0] <= self.counted <= self.ci95[1]


def read_run(run: Run, out: Path, counter: Counter | None) -> None:
    """Fill `run` from the run folder: summary.json (a run) or sweep.json (a sweep)."""
    sweep = out / "sweep.json"
    if sweep.is_file():
        doc = json.loads(sweep.read_text())
        if doc.get("wall_s") is None or doc.get("interrupted"):
            # a progress write (the sweep was cut: --timeout-s, a signal) ranks only what it had measured,
            # before any confirmation: not the sweep's answer
            run.status = "unfinished"
            run.reason = "the sweep did not finish (sweep.json is a progress write, without its wall_s)"
            return
        rec = doc.get("recommendation") or {}
        run.status, run.recommendation = "ok", str(rec.get("index"))
        run.text = str(rec.get("reason") or "")
        run.tied = bool(rec.get("tied_with")) or " tie" in run.text.lower()
        return
    path = out / "summary.json"
    if not path.is_file():
        return
    summary = json.loads(path.read_text())
    verdict, plateau = summary.get("verdict") or {}, summary.get("plateau") or {}
    run.status, run.reason = verdict.get("status", "error"), verdict.get("reason")
    run.text = plateau.get("text") or ""
    run.knee = plateau.get("load", plateau.get("users"))
    loads = plateau.get("knee_loads")
    run.knee_loads = [float(x) for x in loads] if isinstance(loads, list) and len(loads) == 2 else None
    granule = plateau.get("knee_granule")
    if isinstance(granule, (int, float)) and not isinstance(granule, bool) and granule > 0:
        run.knee_granule = float(granule)
    if plateau.get("objective") == "output-tokens":
        run.unit = "output tokens/s"
        run.figure, run.ci95 = plateau.get("output_tokens_per_s"), plateau.get("output_tokens_per_s_ci95")
        return
    run.figure, run.ci95 = plateau.get("capacity_rps"), plateau.get("capacity_ci95")
    steps, index = summary.get("steps") or [], plateau.get("capacity_step")
    if counter is not None and isinstance(index, int) and index < len(steps):
        step = steps[index]
        end = datetime.fromisoformat(step["end"]).timestamp()
        run.counted = counter.rate(end - float(step.get("steady_s") or 0.0), end)
        run.endpoint_ms = counter.mean_latency_ms(end - float(step.get("steady_s") or 0.0), end)
        run.client_ms = step.get("p50_ms")


def _run_command(argv: list[str], log, timeout_s: float, nice: int | None) -> int | None:
    """Run `argv` to its end (None: killed at `timeout_s`); with `nice`, every session it starts (sm-locust
    starts Locust in a session of its own) gets that autogroup nice as soon as it appears."""
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT)
    started = time.monotonic()
    deadline, done, next_scan = started + timeout_s, set(), started
    while process.poll() is None:
        now = time.monotonic()
        if now > deadline:
            process.kill()
            process.wait()
            return None
        if nice is not None and now >= next_scan:  # /proc walked often while Locust starts, then seldom
            for pid in descendants(process.pid):
                if pid not in done:
                    autogroup_nice(pid, nice)
                    done.add(pid)
            next_scan = now + (0.1 if now - started < 5.0 else 2.0)
        time.sleep(0.1)
    return process.returncode


def one_run(index: int, command: list[str], base: Path, endpoint, pinned: bool, timeout_s: float,
            nice: int | None = None) -> Run:
    out = base / f"run{index}"
    if out.exists():
        shutil.rmtree(out)
    url = endpoint.url if endpoint is not None else ""
    argv = [a.replace("{out}", str(out)).replace("{url}", url) for a in command]
    if argv and argv[0] == "sm-locust":
        argv = [sys.executable, "-m", "sm_locust", *argv[1:]]
    if pinned:
        argv = ["taskset", "-c", CLIENT_CPU, *argv]
    started = time.monotonic()
    counter = Counter(endpoint) if endpoint is not None else None
    code: int | None = None
    log = (base / f"run{index}.log").open("w")
    try:
        if counter is not None:
            counter.__enter__()
        code = _run_command(argv, log, timeout_s, nice)
    finally:
        if counter is not None:
            counter.__exit__()
            counter.write(base / f"run{index}.endpoint.jsonl")
        log.close()
    run = Run(index, time.monotonic() - started, os.getloadavg()[0], code)
    read_run(run, out, counter)
    if code is None:
        run.notes.append(f"no answer within {timeout_s:g} s")
    return run


def against_reference(runs: list[Run], reference: float, tolerance: float = 0.05) -> str:
    """The issue's test of a starved client: each run finds the capacity within `tolerance` of what the
    endpoint serves (`reference`, measured apart), or ends INCONCLUSIVE naming the load generator."""
    right = [r for r in runs if r.status in CONCLUSIVE and r.figure is not None
             and abs(r.figure - reference) <= tolerance * reference]
    named = [r for r in runs if r.status == "inconclusive" and "load generator" in (r.reason or "")]
    other = [r for r in runs if r.status == "inconclusive" and r not in named]
    wrong = [r for r in runs if r.status in CONCLUSIVE and r not in right]
    return (f"{len(right)} within {tolerance * 100:g} % of {reference:g}, {len(named)} INCONCLUSIVE naming the "
            f"load generator, {len(other)} INCONCLUSIVE on other grounds, {len(wrong)} a wrong capacity "
            f"without that warning (runs {', '.join(str(r.index) for r in wrong) or '-'})")


def agreement(runs: list[Run]) -> dict[str, str]:
    """How often the conclusive runs agreed: the knee within one granule of the most common one (the
    resolution the search recorded for that knee, `knee_granule`), intervals overlapping, recommendation."""
    ok = [r for r in runs if r.status in CONCLUSIVE]
    out: dict[str, str] = {}
    pairs = list(combinations(ok, 2))
    knees = [r.knee for r in ok if r.knee is not None]
    if knees:
        mode = max(set(knees), key=knees.count)
        granule = max(r.knee_granule for r in ok if r.knee == mode)
        same = sum(1 for k in knees if abs(k - mode) <= granule + 1e-9)
        said = sum(1 for r in ok if r.knee is not None and abs(r.knee - mode) > granule + 1e-9 and r.knee_uncertain)
        out["knee"] = (f"{same} of {len(ok)} conclusive runs within one granule ({granule:g}) of {mode:g}"
                       + (f"; {said} more said their knee uncertain (knee_loads reaching further below it)"
                          if said else ""))
    with_ci = [(a.ci95, b.ci95) for a, b in pairs if a.ci95 and b.ci95]
    if with_ci:
        overlap = sum(1 for a, b in with_ci if a[0] <= b[1] and b[0] <= a[1])
        out["intervals"] = f"{overlap} of {len(with_ci)} pairs of intervals overlap"
    recs = [r.recommendation for r in ok if r.recommendation is not None]
    if recs:
        mode_rec = max(set(recs), key=recs.count)
        out["recommendation"] = f"{recs.count(mode_rec)} of {len(recs)} recommend configuration {mode_rec}"
        differ = [r for r in ok if r.recommendation is not None and r.recommendation != mode_rec]
        out["ties"] = (f"{sum(r.tied for r in ok)} of {len(recs)} say a tie; of the {len(differ)} that recommend "
                       f"another configuration, {sum(r.tied for r in differ)} say a tie")
    covered = [r.covers for r in runs if r.covers is not None]
    if covered:
        out["coverage"] = (f"{sum(covered)} of {len(covered)} capacity intervals hold what the endpoint counted "
                           "over the capacity step")
    out["inconclusive"] = f"{sum(r.status == 'inconclusive' for r in runs)} of {len(runs)} runs INCONCLUSIVE"
    below = sum(r.status == "below-lowest-load" for r in runs)
    if below:
        out["below"] = f"{below} of {len(runs)} runs: the capacity within the SLOs is below the lowest load measured"
    errors = sum(r.status not in (*CONCLUSIVE, "inconclusive") for r in runs)
    if errors:
        out["errors"] = f"{errors} of {len(runs)} runs left no verdict (see run*.log)"
    return out


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("repro: give the command after --, e.g. bench/repro.py --runs 3 -- sm-locust run ... --out {out}",
              file=sys.stderr)
        return 2
    cut = argv.index("--")
    command = argv[cut + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--hogs", type=int, default=None, help="pin the command to CPU 0 beside K CPU hogs, "
                    "the endpoint alone on CPU 1")
    ap.add_argument("--serve", default=None, help="start `sm-locust serve` with these arguments once: {url}")
    ap.add_argument("--timeout-s", type=float, default=1800.0, help="cut a run after this long "
                    "(a batching sweep with its confirmation takes 10-13 min on 2 busy cores)")
    ap.add_argument("--keep", default=None, help="keep the run folders here")
    ap.add_argument("--reference", type=float, default=None, help="the endpoint's capacity measured apart "
                    "(req/s): count the runs within 5 %% of it, INCONCLUSIVE naming the load generator, or wrong")
    ap.add_argument("--autogroup-nice", type=int, default=None, help="set the autogroup nice of every session "
                    "the measurement starts (the command's, each hog's, the endpoint's; e.g. -10): other sessions' "
                    "work then yields the two cores to it")
    args = ap.parse_args(argv[:cut])
    if not command or args.runs < 1 or (args.hogs is not None and args.hogs < 0):
        print("repro: --runs must be >= 1, --hogs >= 0, and a command must follow --", file=sys.stderr)
        return 2
    pinned = args.hogs is not None
    if pinned and (os.cpu_count() or 1) < 2:
        print("repro: --hogs needs 2 CPUs (the client on one, the endpoint on the other)", file=sys.stderr)
        return 2
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sm-locust-repro-"))
    base.mkdir(parents=True, exist_ok=True)
    # each hog in a session of its own: where the kernel shares a CPU between sessions first (autogroup),
    # 6 hogs in one session weigh as one
    hogs = [subprocess.Popen(["taskset", "-c", CLIENT_CPU, sys.executable, "-c", "while 1: pass"],
                             start_new_session=True) for _ in range(args.hogs or 0)]
    if args.autogroup_nice is not None and hogs:
        print(f"  the hogs' sessions: {'; '.join(autogroup_nice(h.pid, args.autogroup_nice) for h in hogs)}",
              flush=True)
    endpoint = None
    runs: list[Run] = []
    print(f"repro: {args.runs} runs of: {shlex.join(command)}", flush=True)
    where = (f"client pinned to CPU 0 beside {args.hogs} CPU hogs, endpoint alone on CPU 1; " if pinned else "")
    print(f"  {os.cpu_count()} CPUs; {where}load average {os.getloadavg()[0]:.1f}", flush=True)
    own_nice = None  # this session's autogroup nice before (a terminal's: given back at the end)
    if args.autogroup_nice is not None:
        try:
            own_nice = int(Path("/proc/self/autogroup").read_text().split()[-1])
        except (OSError, ValueError, IndexError):
            own_nice = None
        print(f"  this session (the command's first process): {autogroup_nice('self', args.autogroup_nice)}",
              flush=True)
    try:
        if args.serve is not None:
            sys.path.insert(0, str(ROOT))
            from sm_locust.endpoint.server import LocalEndpoint  # lazy: after argument parsing

            settings = _serve_settings(shlex.split(args.serve))
            endpoint = LocalEndpoint(log_path=base / "endpoint.log", **settings).start()
            if pinned and endpoint.process is not None:
                pin(endpoint.process.pid, ENDPOINT_CPU)
            if args.autogroup_nice is not None and endpoint.process is not None:
                print(f"  the endpoint's session: {autogroup_nice(endpoint.process.pid, args.autogroup_nice)}",
                      flush=True)
            print(f"  endpoint {endpoint.url}: {args.serve}", flush=True)
        for i in range(1, args.runs + 1):
            run = one_run(i, command, base, endpoint, pinned, args.timeout_s, args.autogroup_nice)
            runs.append(run)
            figure = f"{_f(run.figure)} {run.unit} {run.ci95 or ''}".strip()
            counted = f"; the endpoint counted {_f(run.counted)} req/s (held: {run.covers})" if run.counted else ""
            if run.endpoint_ms is not None:
                held = (run.counted or 0.0) * run.endpoint_ms / 1000.0  # Little's law inside the endpoint
                counted += (f", its own latency {_f(run.endpoint_ms)} ms (client p50 {_f(run.client_ms)} ms), "
                            f"{held:.1f} requests inside it on average")
            why = f" ({run.reason})" if run.reason else ""
            loads = f" {run.knee_loads}" if run.knee_loads else ""
            if run.recommendation is not None:
                print(f"  run {i}: recommends {run.recommendation}{' (a tie, said so)' if run.tied else ''}: "
                      f"{run.text}", flush=True)
            print(f"  run {i}: {run.status}{why}; knee {run.knee}{loads}; {figure}{counted}; "
                  f"{run.seconds:.0f} s; load average {run.load_average:.1f}"
                  f"{'; ' + '; '.join(run.notes) if run.notes else ''}", flush=True)
    finally:
        if endpoint is not None:
            endpoint.stop()
        for hog in hogs:
            hog.terminate()
            hog.wait(timeout=5)
        if own_nice is not None:
            autogroup_nice("self", own_nice)
    print()
    for name, line in agreement(runs).items():
        print(f"  {name}: {line}")
    if args.reference is not None:
        print(f"  against the reference: {against_reference(runs, args.reference)}")
    times = [r.seconds for r in runs]
    print(f"  time per run: {', '.join(f'{t:.0f}' for t in times)} s; load average now {os.getloadavg()[0]:.1f}")
    print(f"  run folders and logs: {base}")
    return 0


def _serve_settings(words: list[str]) -> dict:
    """`--max-concurrency 4 --service-time-ms 20` -> LocalEndpoint settings (flag names as attributes);
    a bare `--llm` is the LLM emulation with its defaults (`sm-locust serve --llm`)."""
    settings: dict = {}
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("--"):
            raise SystemExit(f"repro: --serve takes `--flag value` pairs, got {word!r}")
        key = word[2:].replace("-", "_")
        if key == "llm":
            from sm_locust.endpoint.llm import LlmConfig

            settings["llm"] = LlmConfig()
            i += 1
            continue
        if i + 1 >= len(words):
            raise SystemExit(f"repro: --serve {word} needs a value")
        value = words[i + 1]
        i += 2
        try:
            settings[key] = int(value)
        except ValueError:
            try:
                settings[key] = float(value)
            except ValueError:
                settings[key] = value
    return settings


if __name__ == "__main__":
    sys.exit(main())
