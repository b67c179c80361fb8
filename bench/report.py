"""Benchmark `sm-locust report` on a 24 h run: 1 s Locust history + CloudWatch minute metrics.

Synthesizes a run folder (86,400 seconds, 24 one-hour steps, a request-name row plus the
Aggregated row per second as Locust's --csv-full-history writes them) and an in-process fake
CloudWatch client answering GetMetricData for 1,440 minutes, then runs the whole pipeline
(read -> merge -> steps -> cost -> HTML/CSV/summary.json) and prints wall time and peak memory.
Targets: <= 10 s and <= 1 GB. Figures are printed, not asserted.

    /work/venv/bin/python bench/report.py [--hours 24] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from sm_locust.record.summary import iso

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
    hist.to_csv(run / "locust_stats_history.csv", index=False)
    steps = []
    for h in range(hours):
        a, b = h * 3600, (h + 1) * 3600
        req = int(per_s[a:b].sum())
        steps.append({"users": h + 1, "start": iso(BASE + a, "seconds"), "end": iso(BASE + b, "seconds"),
                      "requests": req,
                      "failures": int(fails[b - 1] - (fails[a - 1] if a else 0)), "rps": req / 3600,
                      "p50_ms": float(np.median(p50[a:b])), "p95_ms": float(np.median(p50[a:b]) * 1.75),
                      "p99_ms": float(np.median(p50[a:b]) * 2.05)})
    summary = {"schema": 1, "endpoint": "bench-ep", "started_at": iso(BASE, "seconds"),
               "ended_at": iso(BASE + n, "seconds"),
               "totals": {"requests": int(total[-1]), "failures": int(fails[-1]), "rps": float(total[-1] / n),
                          "p50_ms": 25, "p95_ms": 45, "p99_ms": 60, "errors": {"ModelError": int(fails[-1])}},
               "steps": steps, "plateau": {"users": 10, "rps": steps[9]["rps"], "p50_ms": steps[9]["p50_ms"],
                                           "p95_ms": steps[9]["p95_ms"], "p99_ms": steps[9]["p99_ms"],
                                           "reason": "gain < 5% over 4 steps", "stable": True}}
    (run / "summary.json").write_text(json.dumps(summary, indent=2))
    (run / "options.json").write_text(json.dumps({"sm_locust": {"endpoint_name": "bench-ep", "region": "us-east-1"}}))
    (run / "locust_stats.csv").write_text(
        "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Min Response Time,"
        "Max Response Time,Average Content Size,Requests/s,Failures/s," + ",".join(PCTS) + "\n"
        f",Aggregated,{total[-1]},{fails[-1]},25,27,5,900,120,{total[-1] / n:.2f},0.01," + ",".join(["30"] * 11) + "\n")
    (run / "locust_failures.csv").write_text(f"Method,Name,Error,Occurrences\nPOST,invoke,ModelError,{fails[-1]}\n")


class FakeCloudWatch:
    """GetMetricData for every query: one value per minute, in CloudWatch units."""

    def __init__(self):
        self.calls = 0

    def get_metric_data(self, MetricDataQueries, StartTime, EndTime, **_):
        self.calls += 1
        start, end = int(StartTime.timestamp()), int(EndTime.timestamp())
        stamps = [datetime.fromtimestamp(s, timezone.utc) for s in range(start, end, 60)]
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
    args = ap.parse_args(argv)
    from sm_locust.report.pipeline import ReportOptions, build_report

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(args.keep or tmp) / "bench-run"
        run.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        synthesize(run, args.hours)
        t1 = time.perf_counter()
        print(f"synthesized {args.hours} h run in {t1 - t0:.1f} s: {run}")
        fake = FakeCloudWatch()
        t2 = time.perf_counter()
        result = build_report(run, ReportOptions(cloudwatch=True, instance_type="ml.c5.xlarge", target_rps=2000),
                              cloudwatch=fake, progress=lambda m: print(f"  {m}"))
        wall = time.perf_counter() - t2
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        for key, path in result.outputs.items():
            print(f"  {key}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
        print(f"GetMetricData calls: {fake.calls}; steps: {len(result.steps)}; gaps: {len(result.gaps)}")
        print(f"report wall time: {wall:.2f} s (target <= 10 s)")
        print(f"peak memory (max RSS of this process, synthesis included): {peak_mb:.0f} MB (target <= 1024 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
