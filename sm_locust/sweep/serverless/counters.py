"""The local endpoint's own counters (cold starts, ModelSetupTime, ModelLatency, throttles), read
over HTTP while a serverless configuration is tested.

The counters are cumulative, so `CounterPoller` samples them every half second during the load
run and `counters_between` gives their growth over one phase (the stability test's ModelLatency
is the duration serverless bills). On SageMaker the same figures come from CloudWatch instead
(`serverless/collect.py`); `endpoint_counters` answers None for any endpoint that is not local.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from sm_locust.aws.clients import is_loopback

STATS_PATH = "/_sm_locust/stats"


def endpoint_counters(url: str) -> dict[str, float] | None:
    """The local endpoint's own counters (cold starts, ModelSetupTime sum), or None elsewhere."""
    if not url or not is_loopback(url):
        return None
    try:
        with urllib.request.urlopen(url.rstrip("/") + STATS_PATH, timeout=5) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError):
        return None


class CounterPoller:
    """Samples the local endpoint's counters every `every_s` while the load run goes on, so a phase's
    own ModelLatency and cold starts can be read (the counters are cumulative)."""

    FIELDS = ("successes", "model_latency_us_sum", "cold_starts", "ThrottlingException")

    def __init__(self, url: str, every_s: float = 0.5):
        self.url = url
        self.every_s = every_s
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sm-locust-endpoint-counters", daemon=True)

    def __enter__(self) -> Self:
        if endpoint_counters(self.url) is not None:  # a local endpoint: worth sampling
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            counters = endpoint_counters(self.url)
            if counters is not None:
                self.samples.append({"t": round(time.time(), 3), **{k: counters.get(k, 0) for k in self.FIELDS}})

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


@dataclass(frozen=True)
class CounterGrowth:
    """The counters' growth over a phase, in `CounterPoller.FIELDS`' order."""

    successes: float
    model_latency_us_sum: float
    cold_starts: float
    throttles: float  # ThrottlingException


def counters_between(samples: list[Mapping[str, float]], start: float, end: float) -> CounterGrowth | None:
    """The counters' growth from the last sample at or before `start` to the last at or before `end`."""
    before = [s for s in samples if s["t"] <= start]
    until = [s for s in samples if s["t"] <= end]
    if not until:
        return None
    first = before[-1] if before else {k: 0 for k in CounterPoller.FIELDS}
    last = until[-1]
    return CounterGrowth(*(last.get(k, 0) - first.get(k, 0) for k in CounterPoller.FIELDS))


