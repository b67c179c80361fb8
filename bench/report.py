"""Benchmark `sm-locust report` on a long run: 1 s Locust history + timeline + CloudWatch minutes.

Synthesizes a run folder (`--hours` of seconds, default 24 (86,400 s; 168 = a week), one-hour
steps, a request-name row plus the Aggregated row per second as Locust's --csv-full-history writes
them, the recorder's timeline.jsonl with a 40-bucket histogram per second and summary.json with
its steps and hours) and an in-process fake CloudWatch client answering GetMetricData, then runs
the whole pipeline in this process (read -> merge -> steps, hours -> cost -> HTML/CSVs/summary.json),
and then `sm-locust report --no-cloudwatch` on the same folder as a child process, as a user
would: wall time, CPU time and max RSS of each. Targets (issue 17): all outputs of a 168-h run in
<= 10 s and <= 1 GB max RSS through the CLI. Figures are printed, not asserted; on a machine shared
with other work, wall time follows the load (the CPU time does not).

    python bench/report.py [--hours 24] [--keep DIR] [--no-cli]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import psutil

from sm_locust.record.summary import iso
from sm_locust.record.timeline import TIMELINE_JSONL, encode_hist

BASE = 1704067200  # 2024-01-01T00:00:00Z
PCTS = ["50%", "66%", "75%", "80%", "90%", "95%", "98%", "99%", "99.9%", "99.99%", "100%"]


def synthesize(run: Path, hours: int) -> None:
    n = hours * 3600
    rng = np.random.default_rng(7)
    t = BASE + np.arange(1, n + 1)
    users = (np.arange(n) // 3600) + 1
    capacity = 400.0
    rps = np.minimum(users * 40.0, capacity) * (1 + rng.normal(0, 0.02, n))
    per_s = np.maximum(rps, 0).round()
    total = np.cumsum(per_s).astype("int64")
    fails = np.cumsum(rng.random(n) < 0.01).astype("int64")
    base_lat = 20 + np.maximum(0, users * 40.0 - capacity) / capacity * 25
    p50 = (base_lat * (1 + rng.normal(0, 0.03, n))).round()
    cols = {"Timestamp": t, "User Count": users, "Type": "POST", "Name": "invoke", "Requests/s": rps.round(2),
            "Failures/s": 0.0}
    for i, p in enumerate(PCTS):
        cols[p] = (p50 * (1 + 0.15 * i)).round()
    cols.update({"Total Request Count": total, "Total Failure Count": fails, "Total Median Response Time": p50,
                 "Total Average Response Time": (p50 * 1.1).round(3), "Total Min Response Time": 5,
                 "Total Max Response Time": 900, "Total Average Content Size": 120})
    named = pd.DataFrame(cols)
    agg = named.copy()
    agg["Type"], agg["Name"] = "", "Aggregated"
    hist = pd.concat([named, agg]).sort_values("Timestamp", kind="stable")
    hist.to_csv(run / "locust_stats_history.csv", index=False)  # as before issue 17, so figures compare
    del hist, named, agg
    write_timeline(run / TIMELINE_JSONL, t, users, per_s.astype("int64"), np.diff(fails, prepend=0), p50)
    steps = []
    for h in range(hours):
        a, b = h * 3600, (h + 1) * 3600
        req = int(per_s[a:b].sum())
        steps.append({"users": h + 1, "start": iso(BASE + a, "seconds"), "end": iso(BASE + b, "seconds"),
                      "requests": req,
                      "failures": int(fails[b - 1] - (fails[a - 1] if a else 0)), "rps": req / 3600,
                      "p50_ms": float(np.median(p50[a:b])), "p95_ms": float(np.median(p50[a:b]) * 1.75),
                      "p99_ms": float(np.median(p50[a:b]) * 2.05)})
    knee = steps[min(9, hours - 1)]  # the 10th hour's step, or the last one of a shorter run
    hourly = [{"hour": h + 1, "start": s["start"], "end": s["end"], "duration_s": 3600.0, "users": s["users"],
               "requests": s["requests"], "failures": s["failures"], "successes": s["requests"] - s["failures"],
               "rps": s["rps"], "goodput_rps": (s["requests"] - s["failures"]) / 3600,
               "error_rate": s["failures"] / s["requests"] if s["requests"] else 0.0, "p50_ms": s["p50_ms"],
               "p95_ms": s["p95_ms"], "p99_ms": s["p99_ms"], "client_cpu_pct": 30.0,
               "errors": {"ModelError": s["failures"]} if s["failures"] else {}} for h, s in enumerate(steps)]
    summary = {"schema": 1, "endpoint": "bench-ep", "started_at": iso(BASE, "seconds"),
               "ended_at": iso(BASE + n, "seconds"), "complete": True,
               "totals": {"requests": int(total[-1]), "failures": int(fails[-1]), "rps": float(total[-1] / n),
                          "p50_ms": 25, "p95_ms": 45, "p99_ms": 60, "errors": {"ModelError": int(fails[-1])}},
               "steps": steps, "hours": hourly,
               "plateau": {"users": knee["users"], "rps": knee["rps"], "p50_ms": knee["p50_ms"],
                           "p95_ms": knee["p95_ms"], "p99_ms": knee["p99_ms"],
                           "reason": "gain < 5% over 4 steps", "stable": True}}
    (run / "summary.json").write_text(json.dumps(summary, indent=2))
    (run / "options.json").write_text(json.dumps({"sm_locust": {"endpoint_name": "bench-ep", "region": "us-east-1"}}))
    (run / "locust_stats.csv").write_text(
        "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Min Response Time,"
        "Max Response Time,Average Content Size,Requests/s,Failures/s," + ",".join(PCTS) + "\n"
        f",Aggregated,{total[-1]},{fails[-1]},25,27,5,900,120,{total[-1] / n:.2f},0.01," + ",".join(["30"] * 11) + "\n")
    (run / "locust_failures.csv").write_text(f"Method,Name,Error,Occurrences\nPOST,invoke,ModelError,{fails[-1]}\n")


def write_timeline(path: Path, t, users, requests, failures, p50) -> None:
    """timeline.jsonl as the recorder writes it: one line per second, a 40-bucket histogram each."""
    pool = [encode_hist({int(b + k): 1 + (k * 7 + j) % 19 for k in range(40)}) for j, b in enumerate(range(10, 74))]
    with open(path, "wb") as fh:
        chunk = []
        for i in range(len(t)):
            chunk.append(orjson.dumps({
                "t": float(t[i]), "users": int(users[i]), "spawning": False, "requests": int(requests[i]),
                "failures": int(failures[i]), "hist": pool[int(p50[i]) % len(pool)], "interval": 1.0,
                "client_cpu_pct": 30.0, "target_rate": None, "sent": None, "late": None, "dropped": None,
                "backoffs": 0}))
            if len(chunk) == 65536:
                fh.write(b"\n".join(chunk) + b"\n")
                chunk = []
        if chunk:
            fh.write(b"\n".join(chunk) + b"\n")


class FakeCloudWatch:
    """GetMetricData for every query: one value per minute, in CloudWatch units."""

    def __init__(self):
        self.calls = 0

    def get_metric_data(self, MetricDataQueries, StartTime, EndTime, **_):
        self.calls += 1
        start, end = int(StartTime.timestamp()), int(EndTime.timestamp())
        stamps = [datetime.fromtimestamp(s, UTC) for s in range(start, end, 60)]
        minutes = np.arange(len(stamps))
        out = []
        for q in MetricDataQueries:
            name = q["MetricStat"]["Metric"]["MetricName"]
            scale = {"ModelLatency": 15000.0, "OverheadLatency": 2000.0, "Invocations": 12000.0,
                     "InvocationsPerInstance": 12000.0, "CPUUtilization": 200.0}.get(name, 40.0)
            values = (scale * (1 + 0.2 * np.sin(minutes / 60.0))).tolist()
            out.append({"Id": q["Id"], "Timestamps": stamps, "Values": values, "StatusCode": "Complete"})
        return {"MetricDataResults": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--keep", help="write the run folder here and keep it")
    ap.add_argument("--no-cli", action="store_true", help="skip the `sm-locust report` child process")
    ap.add_argument("--synthesize-only", metavar="RUN_DIR", help=argparse.SUPPRESS)  # the child that writes the run
    args = ap.parse_args(argv)
    if args.hours < 1:
        ap.error("--hours must be at least 1")
    if args.synthesize_only:
        synthesize(Path(args.synthesize_only), args.hours)
        return 0
    from sm_locust.report.pipeline import ReportOptions, build_report

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(args.keep or tmp) / "bench-run"
        run.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        # in a child process, so that this one's max RSS is the report's own
        subprocess.run([sys.executable, __file__, "--hours", str(args.hours), "--synthesize-only", str(run)],
                       check=True)
        t1 = time.perf_counter()
        print(f"synthesized {args.hours} h run in {t1 - t0:.1f} s: {run}")
        fake = FakeCloudWatch()
        t2, c2 = time.perf_counter(), time.process_time()
        result = build_report(run, ReportOptions(cloudwatch=True, instance_type="ml.c5.xlarge", target_rps=2000),
                              cloudwatch=fake, progress=lambda m: print(f"  {m}"))
        wall, cpu = time.perf_counter() - t2, time.process_time() - c2
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        for key, path in result.outputs.items():
            print(f"  {key}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
        print(f"GetMetricData calls: {fake.calls}; steps: {len(result.steps)}; gaps: {len(result.gaps)}")
        print(f"in process, with CloudWatch: {wall:.2f} s wall, {cpu:.2f} s CPU (target <= 10 s); max RSS "
              f"{peak_mb:.0f} MB (target <= 1024 MB)")
        if not args.no_cli:
            cli(run)
    return 0


def cli(run: Path) -> None:
    """`sm-locust report RUN --no-cloudwatch` as a child process: its wall time, CPU time and max RSS.

    The child's max RSS is taken by GNU time (/usr/bin/time): Linux counts in a child's ru_maxrss the
    memory of the process it was forked from, here this one with the synthesized run in it. Without
    GNU time the child's RSS is sampled every 20 ms (a lower bound)."""
    cmd = [sys.executable, "-m", "sm_locust", "report", str(run), "--no-cloudwatch", "--instance-type", "ml.c5.xlarge"]
    gnu_time = Path("/usr/bin/time")
    if gnu_time.is_file():
        cmd = [str(gnu_time), "-f", "SM_LOCUST_BENCH %e %U %S %M", *cmd]
    with tempfile.TemporaryFile() as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        sampled = 0
        child = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                sampled = max(sampled, child.memory_info().rss)
            except psutil.Error:
                pass
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        log.seek(0)
        output = log.read().decode(errors="replace")
    figures = [line.split()[1:] for line in output.splitlines() if line.startswith("SM_LOCUST_BENCH ")]
    if figures:
        wall_s, user_s, sys_s, rss_kb = (float(x) for x in figures[-1])
        cpu, rss, how = user_s + sys_s, rss_kb / 1024, "GNU time"
    else:
        cpu, rss, how = float("nan"), sampled / 2**20, "sampled every 20 ms"
    print(f"through the CLI (sm-locust report --no-cloudwatch, exit {proc.returncode}): {wall:.2f} s wall, "
          f"{cpu:.2f} s CPU (target <= 10 s); max RSS {rss:.0f} MB ({how}; target <= 1024 MB)")
    if proc.returncode not in (0, 1):
        print(output[-2000:])


if __name__ == "__main__":
    sys.exit(main())
