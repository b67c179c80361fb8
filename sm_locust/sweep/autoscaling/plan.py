"""What an autoscaling configuration's test runs: the `load:` section of an autoscaling sweep, with the
file's `traffic:` as the load (pure).

Each configuration is one `sm-locust run --traffic` (the `traffic` shape: open-loop rate phases) with
the run's options from `load:`, watched as `--watch-scaling` watches (`scaling/watch.py`). `load:`
takes `sm-locust run`'s options except those the traffic decides (`LOAD_KEYS_REFUSED`; `users`, as
beside any shape that decides the load, by the run's own rule: `core.rules.check_users`). On the
local emulation a configuration's `autoscaling.time_scale` compresses the traffic's durations; the
open-loop tokens carry the rate that divides every phase (`Traffic.token_rate`) unless `load:` sets
`rate_per_user`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sm_locust.config.options import Options
from sm_locust.plateau.rates import Traffic
from sm_locust.sweep.autoscaling.spec import PREFIX, AutoscalingSpec
from sm_locust.sweep.load import LOCUST_OVERHEAD_S, LoadPlan, parse_load
from sm_locust.sweep.objective import Objective
from sm_locust.sweep.schema import SweepSpec

LOAD_KEYS_REFUSED = {
    "shape": "the traffic: phases decide the load",
    "spawn_rate": "the traffic: phases decide the load",
    "run_time": "the run lasts as long as the traffic: phases",
    "target_rps": "the traffic: phases decide the rates",
    "traffic_pattern": "the traffic: phases decide the load",
    "traffic": "give the phases as the sweep file's top-level traffic:",
    "repeat": ("not for an autoscaling sweep: each run needs a fresh fleet (one that scaled out would not scale "
               "again); a run the load generator bottlenecked is measured again by itself already"),
    "time_scale": "set autoscaling.time_scale (local emulation only)",
}


@dataclass
class AutoscalingLoadPlan(LoadPlan):
    """`load:` of an autoscaling sweep: the run options every configuration shares, and the traffic."""

    traffic: Traffic = None  # type: ignore[assignment]  # always given
    deploy: str = "local"
    given_settings: Mapping[str, Any] | None = None  # the section's shared settings (its time scale, for estimates)

    @property
    def traffic_text(self) -> str:
        """The phases as `--traffic` takes them inline."""
        return json.dumps(self.traffic.as_list())

    @staticmethod
    def time_scale(settings: Mapping[str, Any]) -> float:
        return float(settings.get(f"{PREFIX}time_scale") or 1.0)

    def scaling_run_options(self, endpoint_name: str, endpoint_url: str, region: str | None,
                            settings: Mapping[str, object]) -> Options:
        """The run's options for one configuration: the traffic, its time scale, the token rate."""
        scale = self.time_scale(settings)
        rate = self.options.rate_per_user if self.options.rate_per_user is not None else self.traffic.token_rate()
        return self.run_options(endpoint_name, endpoint_url, region, traffic=self.traffic_text,
                                time_scale=scale if scale != 1.0 else None, rate_per_user=rate)

    def expected_test_s(self) -> float:
        scales = [self.time_scale(self.given_settings)] if self.given_settings else [1.0]
        return self.traffic.duration_s / max(scales) + LOCUST_OVERHEAD_S


def autoscaling_load_plan(spec: SweepSpec) -> AutoscalingLoadPlan:
    """The autoscaling file's `load:` section checked (the keys the traffic decides refused) and planned."""
    assert isinstance(spec.section, AutoscalingSpec)
    check = spec.check
    for key, why in LOAD_KEYS_REFUSED.items():
        if key in spec.load:
            raise check.error(f"load.{key}", f"{why}; leave it out")
    traffic = spec.section.traffic
    base = parse_load({**spec.load, "shape": "traffic", "traffic": json.dumps(traffic.as_list())}, Objective(),
                      source=spec.source, base_dir=spec.base_dir)
    given = {k: v for k, v in base.given.items() if k not in ("shape", "traffic")}
    return AutoscalingLoadPlan(base.options, given, base.load, "traffic", base.shape_settings, spec.source,
                               traffic=traffic, deploy=spec.deploy, given_settings=dict(spec.section.shared))
