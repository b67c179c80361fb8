"""Trace replay locustfile: `-f locustfiles/sagemaker.py,locustfiles/trace_shape.py --trace trace.jsonl`
(`sm-locust run --trace FILE` adds it). One Locust process replays the trace: `--processes` and
distributed runs are refused."""

from __future__ import annotations

import sys
from typing import Any

from locust import events
from locust.runners import MasterRunner, WorkerRunner

from sm_locust.record.llm import accounting_for
from sm_locust.shapes.trace import TraceShape
from sm_locust.users.trace import TraceReplayUser

__all__ = ["TraceReplayUser", "TraceShape", "TraceUser"]
ONE_PROCESS = "--trace replays from one Locust process (its sends keep the trace's times); drop --processes"


class TraceUser(TraceReplayUser):
    """The trace's sender, with token accounting (TTFT, ITL, tokens/s) as the default locustfile's users."""

    def make_call(self, options: Any):
        return accounting_for(super().make_call(options), self.environment, options)


@events.init.add_listener
def _one_process(environment, **_kw) -> None:
    if isinstance(environment.runner, (MasterRunner, WorkerRunner)):
        print(f"sm-locust: error: {ONE_PROCESS}", file=sys.stderr, flush=True)
        environment.process_exit_code = 2
        raise SystemExit(2)
