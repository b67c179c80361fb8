"""An autoscaling sweep: the `autoscaling` kind's hooks on the shared `base.Sweep`, and its loader
(docs/autoscaling.md).

A sweep file with an `autoscaling:` section (`spec.py`) is loaded here (`api.py` names `load`) into
an `AutoscalingSweep`: the same deploy / test / delete loop, `--plan`, `--yes`, resume,
`max_cost_usd`, cleanup on every exit and sweep.json / csv / html as every sweep, with the kind's
parts in one module each:

    spec.py       the section (every list a grid axis) and `traffic:`, checked
    plan.py       the `load:` section with the traffic as the load
    deploy.py     the local fleet emulation with the configuration's policy, as a deployer
    sagemaker.py  the policy applied to a SageMaker variant and restored (autoscale-aws)
    runner.py     one configuration's run: the traffic, the instance counts polled, the figures
    rows.py       the typed row: what the traffic did to the policy
    rank.py       which configuration to recommend, and why the others lost (pure)
    render.py     sweep.json's CSV and page, the line printed per configuration

The figures themselves are `scaling.figures` (one arithmetic for both deploy targets); the model's
answer for the same traffic is `scaling.simulate`, kept beside the measured one on the local emulation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from sm_locust.aws.clients import AwsClient
from sm_locust.record.model import DEFAULT_SLO_PERCENTILE, ScaleEvent, Summary
from sm_locust.scaling.figures import breach_cause
from sm_locust.scaling.simulate import simulate
from sm_locust.scaling.timeline import InstanceSample, RunClock
from sm_locust.scaling.watch import FleetLog
from sm_locust.sweep.autoscaling import render
from sm_locust.sweep.autoscaling.deploy import LocalFleetDeployer
from sm_locust.sweep.autoscaling.plan import AutoscalingLoadPlan, autoscaling_load_plan
from sm_locust.sweep.autoscaling.rank import ScalingCandidate, disqualification, recommend
from sm_locust.sweep.autoscaling.rows import AutoscalingFigures, AutoscalingRow
from sm_locust.sweep.autoscaling.runner import FLEET_LOG, AutoscalingRunner
from sm_locust.sweep.autoscaling.sagemaker import SageMakerScalingDeployer
from sm_locust.sweep.autoscaling.spec import PREFIX, AutoscalingSpec, is_async, policy_of
from sm_locust.sweep.base import Sweep, configuration_prices, sagemaker_options, sweep_folder
from sm_locust.sweep.costing import Estimate
from sm_locust.sweep.deployers import Deployer
from sm_locust.sweep.grid import Configuration, configuration_key, expand
from sm_locust.sweep.load import check_payload
from sm_locust.sweep.rows import Row
from sm_locust.sweep.runner import RunOutcome, SweepRunner
from sm_locust.sweep.schema import SweepSpec
from sm_locust.sweep.trust import client_bound_reason
from sm_locust.util.yamlsafe import load_json


@dataclass
class AutoscalingSweep(Sweep):
    """A checked autoscaling sweep (its spec's `section` holds the axes, shared settings and traffic)."""

    runner_class: ClassVar[type[SweepRunner]] = AutoscalingRunner
    every_step_decides: ClassVar[bool] = True  # every second of the traffic counts toward its seconds over the SLO

    @property
    def autoscaling(self) -> AutoscalingSpec:
        assert isinstance(self.spec.section, AutoscalingSpec)
        return self.spec.section

    def client_bound(self, run_dir: Path) -> str | None:
        """Any client-bound step, or seconds over the SLO the client caused that decide the verdict
        (sweep/trust.py, with the objective's `max_breach_s`)."""
        try:
            summary = load_json((run_dir / "summary.json").read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(summary, dict):
            return None
        return client_bound_reason(summary, every_step=True, max_breach_s=self.spec.objective.max_breach_s)

    def base_row(self, c: Configuration) -> AutoscalingRow:
        price = self.prices[c.index]
        return AutoscalingRow(**self.row_fields(c), policy=policy_of(c.settings).as_dict(),
                              price_per_hour=price.usd_per_hour, price_source=price.source)

    def estimate(self) -> None:
        """The shared estimates, with the fleet at its maximum for the whole test (a ceiling)."""
        super().estimate()
        for i, e in list(self.estimates.items()):
            price = self.prices[i]
            if price.usd_per_hour is None or e.usd is None:
                continue
            most = policy_of(self.configuration(i).settings).max_instances
            self.estimates[i] = Estimate(e.deploy_s, e.test_s, e.delete_s, e.wait_s, e.instance_hours * most,
                                         e.usd * most)

    def measure_row(self, index: int, run_dir: Path, row: Row) -> None:
        assert isinstance(row, AutoscalingRow)
        summary = Summary.of(load_json((run_dir / "summary.json").read_text()))
        scaling = summary.autoscaling
        if scaling is None:
            raise KeyError("summary.json has no autoscaling figures (the instance counts were not watched)")
        totals = summary.totals
        pct = self.spec.objective.percentile  # totals record p50, p95, p99
        figures = AutoscalingFigures(scaling=scaling, requests=totals.requests if totals.has("requests") else None,
                                     failures=totals.failures if totals.has("failures") else None,
                                     latency_ms=totals.percentile(pct if pct in (50.0, 95.0, 99.0)
                                                                  else DEFAULT_SLO_PERCENTILE))
        settings = self.configuration(index).settings
        waited = summary.async_
        if waited is not None:  # an async variant: its cold start from zero, and the calls never answered
            figures.first_time_to_result_ms = waited.first_time_to_result_ms
            figures.awaited = waited.awaited_at_stop
            figures.requests = waited.accepted
        if self.spec.deploy == "local" and is_async(settings):
            figures.emulator_instances = emulator_instances(run_dir, summary)
        if self.spec.deploy == "local" and not is_async(settings):
            policy = policy_of(settings)
            start = float(settings.get(f"{PREFIX}instance_start_s") or 0.0)
            model = simulate(policy, self.autoscaling.traffic, instance_start_s=start)
            figures.model_events = tuple(ScaleEvent.make(t_s=d.t_s, direction=d.direction, from_=d.from_count,
                                                         to=d.to_count, reaction_s=d.reaction_s,
                                                         ready_s=d.ready_s - d.alarm_start_s)
                                         for d in model.decisions)
            figures.emulator_instances = emulator_instances(run_dir, summary)
        row.figures = figures

    def configuration_line(self, index: int, total: int, row: Row) -> str:
        assert isinstance(row, AutoscalingRow)
        return render.configuration_line(index, total, row)

    # -- results -------------------------------------------------------------------------------------
    def candidate(self, row: AutoscalingRow) -> ScalingCandidate:
        f = row.figures or AutoscalingFigures()
        return ScalingCandidate(
            index=row.index, label=row.label, status=row.status, reason=row.reason, cost_usd=f.scaling.cost_usd,
            instance_hours=f.scaling.instance_hours, peak_instances=f.scaling.peak_instances,
            slo_breach_s=f.scaling.slo_breach_s,
            breach_cause=breach_cause(f.scaling.to_json()) if f.scaling.keys else None,
            error_rate=f.error_rate, flaps=f.scaling.flaps or 0, reaction_s=f.reaction_s, ready_s=f.ready_s,
            awaited=int(f.awaited or 0),
            scaled_out=any(e.direction == "out" for e in f.scaling.scale_events),
            first_result_ms=f.first_time_to_result_ms)

    def document(self, rows: Mapping[int, Row], outcome: RunOutcome | None = None) -> dict[str, Any]:
        ordered = self.ordered_rows(rows)
        candidates = [self.candidate(r) for r in ordered if isinstance(r, AutoscalingRow)]
        finished = [c for c in candidates if c.status not in ("pending", "running")]
        rec = recommend(finished, self.spec.objective)
        self.mark_rows(candidates, ordered, rec.lost, disqualification)
        return {
            **self.document_head(render.SCHEMA, outcome, kind="autoscaling"),
            "autoscaling": self.autoscaling.as_dict(),
            "traffic": self.autoscaling.traffic.as_list(),
            "configurations": [r.as_dict() for r in ordered],
            "recommendation": self.recommendation(rec, ordered),
            "why_not": self.why_not(rec),
        }

    def write_outputs(self, document: dict[str, Any], html_too: bool = True) -> dict[str, Path]:
        return render.write_all(self.out_dir, document, html_too)


def emulator_instances(run_dir: Path, summary: Summary) -> list[dict[str, float | int]] | None:
    """The emulator's own log of instance counts (fleet_log.json), moved to the run's seconds: its
    emulated second 0 is the endpoint's start, the run's is summary.json's started_at."""
    path = run_dir / FLEET_LOG
    if not path.exists() or not summary.started_at:
        return None

    log = FleetLog.of(load_json(path.read_text()))
    if log.started_at is None:  # not the emulation's log: nothing to place in the run's seconds
        return None
    started = datetime.fromisoformat(summary.started_at.replace("Z", "+00:00")).timestamp()
    offset = RunClock(started, float(log.time_scale or 1.0)).run_s(float(log.started_at))
    out: list[dict[str, float | int]] = []
    for item in log.instances or []:
        sample = InstanceSample.from_dict(item)
        t_s = sample.t_s + offset
        if t_s <= 0 and out and out[-1]["t_s"] == 0.0:
            out[-1] = {**sample.as_dict(), "t_s": 0.0}
        else:
            out.append({**sample.as_dict(), "t_s": max(0.0, round(t_s, 3))})
    return out


def load(spec: SweepSpec, *, out: str | Path | None = None, client: AwsClient = None,
         poll_s: float | None = None) -> AutoscalingSweep:
    """An autoscaling sweep file, checked (UsageError naming the key), priced and planned; nothing deployed."""
    assert isinstance(spec.section, AutoscalingSpec)
    plan: AutoscalingLoadPlan = autoscaling_load_plan(spec)
    deployer: Deployer
    if spec.deploy == "sagemaker":
        deployer = SageMakerScalingDeployer(plan=plan, **sagemaker_options(spec, client, poll_s))
        spec.max_parallel_endpoints = 1 if spec.endpoint.get("endpoint_name") else spec.max_parallel_endpoints
    else:
        deployer = LocalFleetDeployer()
    configurations = expand(spec.shared_settings(), spec.grid, spec.configurations)
    for c in configurations:
        deployer.check(c.settings, spec.where(c))
    check_payload(plan)
    prices = configuration_prices(spec, configurations)
    keys = {c.index: configuration_key("autoscaling", spec.deploy, c.settings, plan.given, plan.traffic.as_list())
            for c in configurations}
    sweep = AutoscalingSweep(spec, deployer, plan, configurations, keys, prices, sweep_folder(spec, out))
    sweep.estimate()
    return sweep
