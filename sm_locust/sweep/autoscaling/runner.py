"""Runs one autoscaling configuration: the traffic against the endpoint its deployer set up, watched.

Between the shared runner's deploy and teardown: one normal Locust run (`core.child.execute`) while the
instance counts are polled (`scaling.watch`), the figures into summary.json's `autoscaling`. On the
local emulation the emulator's own log is saved beside it (`fleet_log.json`, emulated seconds).
Progress: one line per traffic phase and per scale event.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.preflight import preflight
from sm_locust.core.child import execute
from sm_locust.scaling.watch import local_fleet, start_watch
from sm_locust.sweep.autoscaling.plan import AutoscalingLoadPlan
from sm_locust.sweep.deployers import Deployment
from sm_locust.sweep.progress import StepEcho
from sm_locust.sweep.runner import SweepRunner
from sm_locust.util.outputs import write_atomic

FLEET_LOG = "fleet_log.json"  # the local emulation's own log (GET /_sm_locust/scaling), in the run folder
ECHOED = ("sm-locust: phase ", "sm-locust: scale ", "sm-locust: autoscaling: ")


class ScalingEcho(StepEcho):
    """The run's stdout: its phase and scale-event lines, indented under the configuration."""

    def write(self, text: str) -> int:
        self._buffer += text
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            if line.startswith(ECHOED):
                self.printer(f"{self.prefix}{line[len('sm-locust: '):]}")
        return len(text)


class AutoscalingRunner(SweepRunner):
    """The sweep's runner with the traffic, watched, in place of the plateau search."""

    def run_configuration(self, i: int, d: Deployment, run_dir: Path) -> None:
        sweep = self.sweep
        plan: AutoscalingLoadPlan = sweep.plan
        c = sweep.configuration(i)
        region = d.region or self.spec.region
        options = plan.scaling_run_options(d.endpoint_name, d.endpoint_url, region, c.settings)
        variant = c.settings.get("variant_name")
        if variant and not options.target_variant:
            options = options.replace(target_variant=variant)  # the traffic and the watch on the variant under test
        settings = SageMakerSettings.from_options(options).validate()
        objective = self.spec.objective
        price = sweep.prices[i]
        echo = ScalingEcho(self.printer, f"{'':>4}[{i}/{self.total}] ")
        with contextlib.redirect_stdout(echo):
            extra_env = preflight(settings)
            watch = start_watch(settings, say=lambda text: print(f"sm-locust: {text}", flush=True))
            if price.usd_per_hour is not None:
                watch.price_per_hour = price.usd_per_hour * price.instance_count
            try:
                execute(settings, plan.load, run_dir, extra_env, options=options)
            finally:
                watch.finish(run_dir, slo_ms=objective.slo_ms, percentile=objective.percentile,
                             say=lambda text: print(f"sm-locust: {text}", flush=True))
                if d.endpoint_url and self.spec.deploy == "local":
                    log = local_fleet(d.endpoint_url)
                    if log is not None:
                        run_dir.mkdir(parents=True, exist_ok=True)
                        write_atomic(run_dir / FLEET_LOG, json.dumps(log, indent=1))
