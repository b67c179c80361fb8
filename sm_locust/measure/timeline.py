"""Per-second samples of a running test, taken from Locust's cumulative statistics.

Locust keeps cumulative counters and a response-time histogram (`StatsEntry.response_times`,
bucketed to ~2 significant digits) per entry, on the local runner and on the master (where worker
reports are merged as they arrive, every second with sm-locust's workers). Sampling the total entry
once a second and keeping the difference gives a timeline that works the same in local and
distributed runs, from which per-step figures are computed over exactly the step's own requests
(not Locust's cumulative or 10-s windows).

`Second` is plain data and lives here, beside the pure code that measures steps from it
(`steady.py`, the searches, `synthetic.py`), so that `sm_locust.plateau` depends on nothing above
it; `sm_locust.record.recorder.RunRecorder` is the thin Locust adapter that fills a list of them
and writes it to `timeline.json`. In open loop (`sm_locust.users.openloop`) a second also counts the
sends the generator made (`sent`), made more than 10 ms after their intended time (`late`), or
skipped because `--max-in-flight` requests were outstanding (`dropped`): a generator that fell
behind (late) is then told apart from a saturated endpoint (completions flat, sends on time). They
are None in closed loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sm_locust.measure.looplag import LagCounts
from sm_locust.measure.workercpu import WorkerCpu, workers_from_json, workers_json


@dataclass
class Second:
    """What happened during one sampling interval (normally one second)."""

    t: float  # epoch seconds at the end of the interval
    users: int  # user count at the end of the interval
    spawning: bool  # the runner was ramping users during the interval
    requests: int  # invocations completed in the interval (successes + failures; sm_locust.invocation.is_invocation)
    failures: int
    hist: dict[int, int] = field(default_factory=dict)  # response time (ms bucket) -> count
    interval: float = 1.0
    client_cpu_pct: float | None = None  # load-generator CPU, when measured (master: the judged worker's, below)
    client_wait_pct: float | None = None  # % of the interval the generator waited for a CPU (Linux schedstat)
    target_rate: float | None = None  # open-loop target arrival rate, when used
    sent: int | None = None  # open loop: sends made in the interval
    late: int | None = None  # open loop: of those, sent more than the late tolerance after their intended time
    dropped: int | None = None  # open loop: intended sends skipped (max in-flight requests outstanding)
    backoffs: int | None = None  # closed loop: back-offs users took after connection errors (users/backoff.py)
    loop_lag: LagCounts | None = None  # the generator's event-loop lag and CPU throttling (measure/looplag.py)
    async_backlog: int | None = None  # --async-result: calls accepted, result not seen yet, at the interval's end
    target_users: int | None = None  # the users the shape asked for (open loop: its rate tokens), when it said
    client_workers: tuple[WorkerCpu, ...] | None = None  # master: each worker's own CPU and wait (measure/workercpu.py)

    @property
    def successes(self) -> int:
        """Invocations that succeeded in the interval (requests and failures count logical invocations)."""
        return self.requests - self.failures

    def as_dict(self) -> dict:
        record = {
            "t": self.t,
            "users": self.users,
            "spawning": self.spawning,
            "requests": self.requests,
            "failures": self.failures,
            "hist": {str(k): v for k, v in self.hist.items()},
            "interval": self.interval,
            "client_cpu_pct": self.client_cpu_pct,
            "client_wait_pct": self.client_wait_pct,
            "target_rate": self.target_rate,
            "sent": self.sent,
            "late": self.late,
            "dropped": self.dropped,
            "backoffs": self.backoffs,
        }
        if self.loop_lag is not None:  # absent where nothing sampled it (old lines, synthetic seconds)
            record["loop_lag"] = self.loop_lag.to_json()
        if self.async_backlog is not None:  # only when calls waited for their async results
            record["async_backlog"] = self.async_backlog
        if self.target_users is not None:  # only when a shape said what it asked for
            record["target_users"] = self.target_users
        if self.client_workers is not None:  # only on a master whose workers shipped their CPU pairs
            record["client_workers"] = workers_json(self.client_workers)
        return record

    @classmethod
    def from_dict(cls, data: dict) -> Second:
        return cls(
            t=float(data["t"]),
            users=int(data["users"]),
            spawning=bool(data["spawning"]),
            requests=int(data["requests"]),
            failures=int(data["failures"]),
            hist={int(k): int(v) for k, v in data.get("hist", {}).items()},
            interval=float(data.get("interval", 1.0)),
            client_cpu_pct=data.get("client_cpu_pct"),
            client_wait_pct=data.get("client_wait_pct"),
            target_rate=data.get("target_rate"),
            sent=data.get("sent"),
            late=data.get("late"),
            dropped=data.get("dropped"),
            backoffs=data.get("backoffs"),
            loop_lag=LagCounts.from_json(data["loop_lag"]) if isinstance(data.get("loop_lag"), dict) else None,
            async_backlog=None if data.get("async_backlog") is None else int(data["async_backlog"]),
            target_users=None if data.get("target_users") is None else int(data["target_users"]),
            client_workers=workers_from_json(data.get("client_workers")),
        )
