"""How many streams one sm-locust process reads before its ITL p95 drifts from the server's.

For each stream count N: a local LLM emulation (one worker, a batch of N sequences, so no queue:
`--llm-step-ms` + N x `--llm-step-ms-per-seq` a token) logs the gaps between the tokens it wrote
to the socket (`--llm-request-log`), and `sm-locust run -u N --stream true` reads them in one
process. Printed per N: the client's ITL p50 / p95 (summary.json llm, its completed streams), the
server's p50 / p95 over the same kind of answers (every completed stream's written gaps), and the
p95's drift in %. Figures are printed, not asserted (a busy machine moves them).

    python bench/itl_tail.py [--streams 16,64,128] [--seconds 30] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from sm_locust.endpoint.llm import LlmConfig
from sm_locust.endpoint.server import LocalEndpoint


def nearest_rank(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def measure(streams: int, seconds: int, tokens: int, folder: Path) -> dict:
    log = folder / f"server-{streams}.jsonl"
    config = LlmConfig(max_sequences=streams, step_ms=25.0, step_ms_per_seq=0.1, prefill_ms_per_token=0.0,
                       request_log=str(log))
    with LocalEndpoint(llm=config, workers=1, log_path=folder / f"endpoint-{streams}.log") as ep:
        out = folder / f"run-{streams}"
        result = subprocess.run(
            [sys.executable, "-m", "sm_locust", "run", "--endpoint-name", "llm", "--endpoint-url", ep.url,
             "--prompts", "synthetic:16", "--max-new-tokens", str(tokens), "--stream", "true",
             "-u", str(streams), "-r", str(streams), "-t", f"{seconds}s", "--out", str(out), "-q"],
            capture_output=True, text=True, timeout=seconds + 120)
        if result.returncode != 0:
            raise SystemExit(result.stdout + result.stderr)
    llm = json.loads((out / "summary.json").read_text())["llm"]
    gaps = [g for line in log.read_bytes().splitlines() if b'"answer"' in line
            for g in json.loads(line)["written_itl_ms"]]
    server_p95 = nearest_rank(gaps, 95)
    return {"streams": streams, "client_p50": llm["itl_p50_ms"], "client_p95": llm["itl_p95_ms"],
            "server_p50": nearest_rank(gaps, 50), "server_p95": server_p95,
            "drift_pct": 100.0 * (llm["itl_p95_ms"] - server_p95) / server_p95, "answers": llm["requests"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="16,64,128")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()
    print("streams  client ITL p50 / p95 ms  server ITL p50 / p95 ms  p95 drift  answers")
    with tempfile.TemporaryDirectory() as tmp:
        for streams in (int(s) for s in args.streams.split(",")):
            r = measure(streams, args.seconds, args.tokens, Path(tmp))
            print(f"{r['streams']:>7}  {r['client_p50']:>10.1f} / {r['client_p95']:<10.1f}  "
                  f"{r['server_p50']:>10.1f} / {r['server_p95']:<10.1f}  {r['drift_pct']:>+8.1f} %  {r['answers']:>7}",
                  flush=True)


if __name__ == "__main__":
    main()
