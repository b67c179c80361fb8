"""Runs one serverless configuration's tests: the shared runner with the serverless tests in place
of the plateau search.

The stability and concurrency phases are one normal Locust run into the configuration's run
folder (`core.child.execute`, exactly what `sm-locust run` does, with the phases as a PHASES pattern
and the search's stop conditions off), the local endpoint's counters sampled meanwhile; then the
cold-start test, timed here request by request. What was run goes to `serverless.json` beside the
run (the phases, the counters, every cold-start request), which `serverless/collect.py` reads back.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from pathlib import Path

from sm_locust.config.options import Options
from sm_locust.config.preflight import preflight
from sm_locust.core.child import LoadSettings, execute
from sm_locust.payloads.options import prepare_payloads
from sm_locust.sweep.deployers import Deployment
from sm_locust.sweep.progress import PREFIX, StepEcho
from sm_locust.sweep.runner import SweepRunner
from sm_locust.sweep.serverless.coldstart import fire_round, runtime_client
from sm_locust.sweep.serverless.counters import CounterPoller, endpoint_counters
from sm_locust.sweep.serverless.plan import RESULTS, ServerlessLoadPlan
from sm_locust.sweep.serverless.spec import PREFIX as KEY_PREFIX
from sm_locust.util.outputs import write_atomic

SEARCH_OPTIONS_OFF = {"latency_slo_ms": None, "max_error_rate": None, "max_duration": None, "max_invocations": None}


class ServerlessRunner(SweepRunner):
    """The sweep's runner with the serverless tests in place of the plateau search."""

    result_file = RESULTS  # also when only the cold-start test ran (no Locust run, no summary.json)

    def run_configuration(self, i: int, d: Deployment, run_dir: Path) -> None:
        sweep = self.sweep
        plan: ServerlessLoadPlan = sweep.plan
        c = sweep.configuration(i)
        mc = int(c.settings[f"{KEY_PREFIX}max_concurrency"])
        region = d.region or self.spec.region
        phases = plan.phases(mc)
        results: dict[str, object] = {"phases": [vars(p) for p in phases], "max_concurrency": mc,
                                   "memory_size_mb": int(c.settings[f"{KEY_PREFIX}memory_size_mb"])}
        options = plan.run_options(d.endpoint_name, d.endpoint_url, region, **SEARCH_OPTIONS_OFF)
        settings = plan.settings(d.endpoint_name, d.endpoint_url, region)
        with contextlib.redirect_stdout(StepEcho(self.printer, f"{'':>4}[{i}/{self.total}] ")):
            extra_env = preflight(settings)
            if phases:
                load = LoadSettings(users=None, spawn_rate=None, run_time=None, shape="phases",
                                    processes=plan.load.processes,
                                    quiet=True, progress_every_s=0.0, locust_args=plan.load.locust_args)
                results["load_started"] = time.time()
                with CounterPoller(d.endpoint_url) as poller:  # local endpoint: ModelLatency and cold starts per phase
                    execute(settings, load, run_dir, extra_env,
                            options=options.replace(traffic_pattern=plan.traffic_pattern(phases)))
                results["load_ended"] = time.time()
                results["endpoint_counters"] = poller.samples
        if "cold_start" in plan.serverless.tests:
            run_dir.mkdir(parents=True, exist_ok=True)
            results["cold_start"] = self.cold_start_test(i, d, c.settings, settings, options, extra_env, mc)
        write_atomic(run_dir / RESULTS, json.dumps(results, indent=1))

    def cold_start_test(self, i: int, d: Deployment, config_settings: Mapping[str, object], settings,
                        options: Options, extra_env: Mapping[str, str], mc: int) -> dict[str, object]:
        plan: ServerlessLoadPlan = self.sweep.plan
        cold = plan.serverless.cold_start
        gap = plan.gap_s(config_settings)
        n = cold.concurrency_for(mc)
        invocations = list(prepare_payloads(settings, options).pool.invocations)
        client = runtime_client(d.endpoint_url, d.region or self.spec.region, self.spec.aws_profile, extra_env, n)
        before = endpoint_counters(d.endpoint_url)
        requests: list[dict[str, object]] = []
        start = time.time()
        for round_no in range(1, cold.rounds + 1):
            self.printer(f"{PREFIX} {'':>4}[{i}/{self.total}] cold start {round_no}/{cold.rounds}: {gap:g} s idle, "
                         f"then {n} first request{'s' if n != 1 else ''} together")
            time.sleep(gap)
            requests.extend(fire_round(client, d.endpoint_name, invocations, n, round_no))
        out: dict[str, object] = {"gap_s": gap, "rounds": cold.rounds, "concurrency": n, "start": start,
                               "end": time.time(),
                               "requests": requests}
        after = endpoint_counters(d.endpoint_url)
        if before is not None and after is not None:
            count = after.get("cold_starts", 0) - before.get("cold_starts", 0)
            setup_us = after.get("model_setup_time_us_sum", 0.0) - before.get("model_setup_time_us_sum", 0.0)
            out["model_setup_time"] = {"source": "the local endpoint's counters (its CloudWatch ModelSetupTime)",
                                       "count": int(count), "average_ms": setup_us / count / 1000.0 if count else None}
        return out
