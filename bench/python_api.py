"""Benchmark the Python API (`sm_locust.run`) against the CLI it wraps, on the local endpoint.

Prints, for N repetitions each (median, min, max):
- `import sm_locust` in a fresh interpreter (what a notebook pays up front) and which heavy modules
  it loads (none should be: Locust, gevent, pandas, plotly load on first use);
- the wall time of the same short run (2 users, `--run-time`, default 3 s) through `sm-locust run -q`
  and through `sm_locust.run(...)` in a fresh interpreter (import + run + RunResult), so the API's
  extra cost is the difference;
- how long a run takes to return after SIGINT to the caller's process group (a kernel's interrupt),
  with what it measured.

    python bench/python_api.py [--repeat 3] [--run-time 3s]

Figures are printed, not asserted; on a shared 2-core machine wall times follow the load.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from sm_locust.endpoint.server import LocalEndpoint

PAYLOAD = Path(__file__).resolve().parents[1] / "sm_locust" / "data" / "ranking_10rows.json"

IMPORT = textwrap.dedent("""
    import sys, time, json
    t0 = time.perf_counter()
    import sm_locust
    took = time.perf_counter() - t0
    print(json.dumps({"s": took, "heavy": [m for m in ("locust", "gevent", "pandas", "plotly", "boto3")
                                           if m in sys.modules]}))
""")

API_RUN = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    import sm_locust
    url, out, run_time, payload = sys.argv[1:5]
    result = sm_locust.run("ep", endpoint_url=url, payload=payload, users=2, spawn_rate=100, run_time=run_time,
                           out=out, progress=False)
    print(json.dumps({"s": time.perf_counter() - t0, "requests": result.summary["totals"]["requests"],
                      "interrupted": result.interrupted}))
""")


def spread(values: list[float], unit: str = "s") -> str:
    k = 1000.0 if unit == "ms" else 1.0
    return (f"median {statistics.median(values) * k:.2f} {unit} (min {min(values) * k:.2f}, max {max(values) * k:.2f}, "
            f"n={len(values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--run-time", default="3s")
    args = parser.parse_args()
    imports, heavy = [], set()
    for _ in range(args.repeat):
        report = json.loads(subprocess.run([sys.executable, "-c", IMPORT], capture_output=True, text=True,
                                           check=True).stdout)
        imports.append(report["s"])
        heavy.update(report["heavy"])
    print(f"import sm_locust: {spread(imports, 'ms')}; heavy modules loaded: {sorted(heavy) or 'none'}")

    with LocalEndpoint(max_concurrency=4, service_time_ms=20) as ep, tempfile.TemporaryDirectory() as tmp:
        cli, api = [], []
        for i in range(args.repeat):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "sm_locust", "run", "--endpoint-name", "ep", "--endpoint-url", ep.url,
                            "--payload", str(PAYLOAD), "-u", "2", "-r", "100", "-t", args.run_time, "-q",
                            "--out", f"{tmp}/cli{i}"], capture_output=True, check=True)
            cli.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", API_RUN, ep.url, f"{tmp}/api{i}", args.run_time, str(PAYLOAD)],
                           capture_output=True, check=True)
            api.append(time.perf_counter() - t0)
        print(f"run -t {args.run_time}, 2 users: sm-locust run -q {spread(cli)}; sm_locust.run {spread(api)}; "
              f"difference of medians {statistics.median(api) - statistics.median(cli):+.2f} s")

        stops = []
        for i in range(args.repeat):
            out = Path(tmp) / f"stop{i}"
            proc = subprocess.Popen([sys.executable, "-c", API_RUN, ep.url, str(out), "120s", str(PAYLOAD)],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                    start_new_session=True)
            while not (out / "timeline.jsonl").is_file():
                time.sleep(0.1)
            time.sleep(3)
            t0 = time.perf_counter()
            os.killpg(proc.pid, signal.SIGINT)  # as jupyter_client interrupts a kernel
            report = json.loads(proc.communicate(timeout=60)[0])
            stops.append(time.perf_counter() - t0)
            assert report["interrupted"] and report["requests"] > 0, report
        print(f"SIGINT to the caller -> run() returned with what was measured: {spread(stops)}")


if __name__ == "__main__":
    main()
