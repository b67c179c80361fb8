"""Wall-clock figures that tests no longer assert: how fast things happen, as printed figures.

    python bench/timing.py [--repeat 3]

Why: a test asserts counts, order and relations (the run stopped on -t, not before; the signal, not
-t, ended it); a bound on seconds is what a busy machine breaks (tests/cli/test_bad_input.py failed
at 23 s against a 20-s bound beside other engineers' test runs). The figures those bounds guarded
are measured here instead, `--repeat` times each, printed as median and maximum with the load
average beside them:

- `PayloadPool.next()`: microseconds per call over 64 payloads, round-robin, random and weighted
  (20,000 calls each; was `test_next_stays_cheap`, bound 20 us);
- `Batcher`: the wait of a lone request with a 50-ms batching delay (was bound 40-500 ms);
- `sm-locust run -t 2s` (2 users) and `--target-rps 150 -t 3s` on a local endpoint: summary.json's
  `duration_s` and the command's wall time (were bound 1.9-3.0 s, 2-5.5 s and 33 s);
- plain `locust -f locustfiles/sagemaker.py` with a missing payload file: seconds until it exits 2
  (was bound 20 s for five side by side);
- `sm-locust run -t 1h` sent SIGTERM after a second of load: seconds from the signal to its exit
  (was bound 20 s).
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
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sm_locust.endpoint.batching import Batcher  # noqa: E402
from sm_locust.endpoint.server import LocalEndpoint  # noqa: E402
from sm_locust.invocation import Invocation  # noqa: E402
from sm_locust.payloads import PayloadPool  # noqa: E402

PAYLOAD = str(ROOT / "sm_locust" / "data" / "ranking_10rows.json")


def figure(label: str, unit: str, values: list[float]) -> None:
    print(f"| {label} | {statistics.median(values):.3g} | {max(values):.3g} | {unit} | {len(values)} |", flush=True)


def pool_next_us(selection: str) -> float:
    kw = {"weights": list(range(1, 65))} if selection == "weighted" else {}
    pool = PayloadPool([Invocation(body=bytes([i])) for i in range(64)], "bench", selection=selection, **kw)
    start = time.perf_counter()
    for _ in range(20_000):
        pool.next()
    return (time.perf_counter() - start) / 20_000 * 1e6


def lone_batch_wait_ms() -> float:
    batcher = Batcher(16, 0.05, lambda items: items)
    done: list[float] = []
    t0 = time.monotonic()
    worker = threading.Thread(target=lambda: (batcher.submit("alone"), done.append(time.monotonic() - t0)))
    worker.start()
    worker.join()
    return done[0] * 1000


def sm_locust(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sm_locust", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def timed_run(endpoint: LocalEndpoint, folder: Path, *args: str) -> tuple[float, float]:
    """(summary duration_s, the command's wall seconds) of one `sm-locust run`."""
    out = Path(tempfile.mkdtemp(dir=folder))
    t0 = time.monotonic()
    proc = sm_locust("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", PAYLOAD, *args,
                     "--out", str(out / "run"), "-q")
    _, err = proc.communicate(timeout=600)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"sm-locust run {' '.join(args)} exited {proc.returncode}: {err[-2000:]}")
    return json.loads((out / "run" / "summary.json").read_text())["duration_s"], wall


def bad_locust_exit_s(folder: Path) -> float:
    cwd = Path(tempfile.mkdtemp(dir=folder))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "sagemaker.py"),
                           "--headless", "-t", "1h", "--endpoint-name", "ep", "--payload", "nope.json"],
                          capture_output=True, text=True, cwd=cwd, timeout=600)
    if proc.returncode != 2:
        raise SystemExit(f"locust with a missing payload exited {proc.returncode}, not 2: {proc.stderr[-2000:]}")
    return time.monotonic() - t0


def sigterm_exit_s(endpoint: LocalEndpoint, folder: Path) -> float:
    out = Path(tempfile.mkdtemp(dir=folder)) / "run"
    proc = sm_locust("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", PAYLOAD, "-u", "2",
                     "-t", "1h", "--out", str(out), "-q")
    before = endpoint.stats()["requests"]
    deadline = time.monotonic() + 120
    while endpoint.stats()["requests"] - before < 20:  # under way
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"sm-locust run did not get under way: {proc.communicate()[1][-2000:]}")
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    proc.communicate(timeout=600)
    return time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="measurements per figure (default 3)")
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    print("| figure | median | max | unit | n |\n| --- | --- | --- | --- | --- |")
    n = max(1, args.repeat)
    for selection in ("round-robin", "random", "weighted"):
        figure(f"PayloadPool.next(), {selection}", "us per call", [pool_next_us(selection) for _ in range(n)])
    figure("lone request, 50-ms batching delay", "ms waited", [lone_batch_wait_ms() for _ in range(n * 5)])
    with tempfile.TemporaryDirectory() as tmp, LocalEndpoint(service_time_ms=2.0) as endpoint:
        folder = Path(tmp)
        cases: list[tuple[str, Callable[[], tuple[float, float]]]] = [
            ("sm-locust run -t 2s", lambda: timed_run(endpoint, folder, "-u", "2", "-r", "10", "-t", "2s")),
            ("sm-locust run --target-rps 150 -t 3s", lambda: timed_run(endpoint, folder, "--target-rps", "150",
                                                                       "-t", "3s")),
        ]
        for label, measure in cases:
            pairs = [measure() for _ in range(n)]
            figure(f"{label}: duration_s", "s", [d for d, _ in pairs])
            figure(f"{label}: command wall", "s", [w for _, w in pairs])
        figure("plain locust, missing payload: exit 2 after", "s", [bad_locust_exit_s(folder) for _ in range(n)])
        figure("sm-locust run -t 1h, SIGTERM: exit after", "s", [sigterm_exit_s(endpoint, folder) for _ in range(n)])
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
