"""How many streams one sm-locust process reads before its ITL p95 drifts from the server's, and its CPU.

For each stream count N: a local LLM emulation (one worker, a batch of N sequences, so no queue:
`--llm-step-ms` + N x `--llm-step-ms-per-seq` a token) logs the gaps between the tokens it wrote
to the socket (`--llm-request-log`), and `sm-locust run -u N --stream true` reads them in one
process. Printed per N: the client's ITL p50 / p95 (summary.json llm, its completed streams), the
server's p50 / p95 over the same kind of answers (every completed stream's written gaps), and the
p95's drift in %; and the client's CPU seconds per 1,000 output tokens: the run's processes' CPU time
(user + system, /proc/PID/stat of the run and its children) between `--settle` seconds after the
start and 3 s before the end, over the output tokens/s of its steady window (summary.json
steps[0].llm) x that span. The load average is printed before and after. Figures are printed, not
asserted (a busy machine moves them).

    python bench/itl_tail.py [--streams 64,256] [--seconds 30] [--tokens 64] [--settle 10]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from sm_locust.endpoint.llm import LlmConfig
from sm_locust.endpoint.server import LocalEndpoint


def nearest_rank(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) used so far by process `root` and its descendants (Linux /proc)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = (int(fields[11]) + int(fields[12])) / TICKS
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(times.get(pid, 0.0) for pid in tree)


def cpu_between(pid: int, start_s: float, end_s: float, out: dict) -> None:
    """Sample the process tree's CPU time at `start_s` and `end_s` after now into `out` (a thread)."""
    began = time.monotonic()
    time.sleep(start_s)
    first, at = tree_cpu_s(pid), time.monotonic()
    time.sleep(max(0.0, began + end_s - time.monotonic()))
    out["cpu_s"], out["span_s"] = tree_cpu_s(pid) - first, time.monotonic() - at


def measure(streams: int, seconds: int, tokens: int, folder: Path, settle: float = 10.0) -> dict:
    log = folder / f"server-{streams}.jsonl"
    config = LlmConfig(max_sequences=streams, step_ms=25.0, step_ms_per_seq=0.1, prefill_ms_per_token=0.0,
                       request_log=str(log))
    with LocalEndpoint(llm=config, workers=1, log_path=folder / f"endpoint-{streams}.log") as ep:
        out = folder / f"run-{streams}"
        run = subprocess.Popen(
            [sys.executable, "-m", "sm_locust", "run", "--endpoint-name", "llm", "--endpoint-url", ep.url,
             "--prompts", "synthetic:16", "--max-new-tokens", str(tokens), "--stream", "true",
             "-u", str(streams), "-r", str(streams), "-t", f"{seconds}s", "--out", str(out), "-q"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        cpu: dict = {}
        sampler = threading.Thread(target=cpu_between, args=(run.pid, settle, seconds - 3.0, cpu), daemon=True)
        sampler.start()
        output, _ = run.communicate(timeout=seconds + 120)
        sampler.join()
        if run.returncode != 0:
            raise SystemExit(output)
    summary = json.loads((out / "summary.json").read_text())
    llm = summary["llm"]
    steady = (summary.get("steps") or [{}])[0].get("llm") or llm
    rate = steady["output_tokens_per_s"]
    gaps = [g for line in log.read_bytes().splitlines() if b'"answer"' in line
            for g in json.loads(line)["written_itl_ms"]]
    server_p95 = nearest_rank(gaps, 95)
    return {"streams": streams, "client_p50": llm["itl_p50_ms"], "client_p95": llm["itl_p95_ms"],
            "server_p50": nearest_rank(gaps, 50), "server_p95": server_p95,
            "drift_pct": 100.0 * (llm["itl_p95_ms"] - server_p95) / server_p95, "answers": llm["requests"],
            "tokens_per_s": rate, "cpu_pct": 100.0 * cpu["cpu_s"] / cpu["span_s"],
            "cpu_s_per_1k": 1000.0 * cpu["cpu_s"] / (rate * cpu["span_s"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="64,256")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--settle", type=float, default=10.0, help="seconds after the start before CPU is counted")
    args = ap.parse_args()
    if args.seconds < args.settle + 8:
        raise SystemExit(f"--seconds must be at least --settle + 8 ({args.settle + 8:g})")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    print("streams  client ITL p50 / p95 ms  server ITL p50 / p95 ms  p95 drift  answers  output tokens/s  "
          "client CPU  CPU s / 1k tokens")
    with tempfile.TemporaryDirectory() as tmp:
        for streams in (int(s) for s in args.streams.split(",")):
            r = measure(streams, args.seconds, args.tokens, Path(tmp), args.settle)
            print(f"{r['streams']:>7}  {r['client_p50']:>10.1f} / {r['client_p95']:<10.1f}  "
                  f"{r['server_p50']:>10.1f} / {r['server_p95']:<10.1f}  {r['drift_pct']:>+8.1f} %  {r['answers']:>7}"
                  f"  {r['tokens_per_s']:>15.0f}  {r['cpu_pct']:>8.0f} %  {r['cpu_s_per_1k']:>17.3f}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
