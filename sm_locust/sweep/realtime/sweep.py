"""A real-time sweep: the `realtime` kind's hooks on the shared `base.Sweep`, and its loader.

`load(spec)` builds the checked sweep from a parsed file: the deployer the file names
(`deployers/`), each configuration's settings checked by it, the `load:` section, each
configuration's price (`costing.py`, the report's table) and key, and the plan's estimates.
`RealtimeSweep` says what a row holds (`realtime.rows`: its price, then the figures
`realtime.measure` reads back from summary.json plus the endpoint's CPU and memory at the knee,
then $ per 1M and the fleet for the target), how the rows are ranked (`realtime.rank`, the Pareto front) and written
(`realtime.render`). The test itself is the shared runner's: one normal run per configuration.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from sm_locust.aws.clients import AwsClient
from sm_locust.errors import UsageError
from sm_locust.record.model import Summary
from sm_locust.sweep.base import Sweep, configuration_prices, sagemaker_options, sweep_folder
from sm_locust.sweep.costing import cost_intervals, figures
from sm_locust.sweep.deployers import create_deployer
from sm_locust.sweep.grid import Configuration, configuration_key, expand
from sm_locust.sweep.load import check_payload, parse_load
from sm_locust.sweep.objective import pareto_front
from sm_locust.sweep.realtime import render
from sm_locust.sweep.realtime.measure import (
    measure,
    repeat_figures,
    usage_from_steps_csv,
    usage_in_window,
    widened,
)
from sm_locust.sweep.realtime.mix import (
    configuration_mix,
    cost_per_model_month,
    deployer_settings,
    mix_figures,
    mix_size,
    models_loaded,
    models_loaded_from_steps,
)
from sm_locust.sweep.realtime.rank import (
    REPLICATE_FIELDS,
    Candidate,
    criteria,
    disqualification,
    rank,
    ranking_mode,
    recommend,
)
from sm_locust.sweep.realtime.rows import RealtimeFigures, RealtimeRow
from sm_locust.sweep.replicates import contenders, merged
from sm_locust.sweep.rows import Row
from sm_locust.sweep.runner import RunOutcome
from sm_locust.sweep.schema import SweepSpec
from sm_locust.util.yamlsafe import load_json

PRICING_ONLY = {"local": ("instance_type", "price_per_hour")}  # settings that price a configuration without changing it
USAGE_FILE = "endpoint_usage.csv"  # the local deployer's CPU and memory samples
STEPS_FILE = "steps.csv"  # the report's per-step table (CloudWatch CPU and memory on SageMaker)


@dataclass
class RealtimeSweep(Sweep):
    """A checked real-time sweep."""

    mixes: dict[int, str | None] = field(default_factory=dict)  # each configuration's --target-models (realtime.mix)

    confirms: ClassVar[bool] = True

    def deployer_settings(self, c: Configuration) -> dict[str, Any]:
        return deployer_settings(c.settings, self.deployer.known_keys)

    def run_options(self, index: int) -> dict[str, Any]:
        mix = self.mixes.get(index)
        return {"target_models": mix} if mix else {}

    def mix_of(self, index: int) -> str | None:
        """The configuration's model mix: its own, else the `load:` section's (None: no model mix)."""
        return self.mixes.get(index) or self.plan.given.get("target_models")

    def base_row(self, c: Configuration) -> RealtimeRow:
        return RealtimeRow(**self.row_fields(c), price=self.prices[c.index])

    def measure_row(self, index: int, run_dir: Path, row: Row) -> None:
        objective = self.spec.objective
        quoted = self.quoted_dir(run_dir)  # with `repeat:`, the median run's folder
        try:
            summary = Summary.of(load_json((quoted / "summary.json").read_text()))
        except (OSError, ValueError) as exc:
            row.fail("failed", f"cannot read {quoted / 'summary.json'}: {exc}")
            return
        m = measure(summary, objective.percentile, objective.max_error_rate)
        repeat = repeat_figures(self.repeat_document(run_dir), quoted.name)
        if repeat is not None:
            m.capacity_ci95 = widened(m.capacity_ci95, repeat.get("capacity_ci95"))
        cpu, memory, loaded = None, None, None
        usage_file = run_dir / USAGE_FILE
        steps_file = quoted / STEPS_FILE
        if usage_file.exists():
            with open(usage_file, newline="") as f:
                samples = list(csv.DictReader(f))
            cpu, memory = usage_in_window(samples, m.knee_start, m.knee_end)
            loaded = models_loaded(samples, m.knee_start, m.knee_end)
        if (cpu is None or loaded is None) and steps_file.exists():
            with open(steps_file, newline="") as f:
                rows = list(csv.DictReader(f))
            if cpu is None:
                cpu, memory = usage_from_steps_csv(rows, m.knee_users)
            if loaded is None:
                loaded = models_loaded_from_steps(rows, m.knee_users)
        cost = figures(m.capacity_rps, self.prices[index], objective)
        bounds = cost_intervals(m.capacity_ci95, self.prices[index], objective)
        price = self.prices[index]
        fleet = cost.get("cost_per_hour_at_target")
        if fleet is None and price.usd_per_hour is not None:
            fleet = price.usd_per_hour * price.instance_count
        mix, cache = self.mix_of(index), mix_figures(summary)
        row.figures = RealtimeFigures(
            **vars(m), cpu_pct=None if cpu is None else round(cpu, 1),
            memory_pct=None if memory is None else round(memory, 2), **cost,
            **bounds, cache_hit_rate=cache["cache_hit_rate"],
            cache_hit_rate_ci95=cache["cache_hit_rate_ci95"],
            cold_p95_ms=cache["cold_p95_ms"], models_loaded=loaded,
            cost_per_model_month=cost_per_model_month(fleet, mix_size(mix)) if m.capacity_rps else None,
            repeat=repeat)

    def configuration_line(self, index: int, total: int, row: Row) -> str:
        assert isinstance(row, RealtimeRow)
        return render.configuration_line(index, total, row, self.spec.objective.percentile_label)

    def candidate(self, row: RealtimeRow) -> Candidate:
        """What the ranking needs of a row."""
        f = row.figures or RealtimeFigures()
        price = row.price
        return Candidate(index=row.index, label=row.label, status=row.status, reason=row.reason,
                         capacity_rps=f.capacity_rps, knee_rps=f.knee_rps, knee_users=f.knee_users,
                         knee_rps_ci95=f.knee_rps_ci95,
                         latency_ms=f.latency_ms,
                         error_rate=f.error_rate, cost_per_1m=f.cost_per_1m, instances_needed=f.instances_needed,
                         cost_per_hour_at_target=f.cost_per_hour_at_target, no_capacity_reason=f.no_capacity_reason,
                         capacity_ci95=f.capacity_ci95, latency_ci95=f.latency_ci95,
                         cost_per_1m_ci95=f.cost_per_1m_ci95, instances_needed_ci95=f.instances_needed_ci95,
                         cost_per_hour_at_target_ci95=f.cost_per_hour_at_target_ci95,
                         price_per_hour=(price.usd_per_hour * price.instance_count
                                         if price.usd_per_hour is not None else None))

    def candidates(self, ordered: list[Row]) -> tuple[list[Candidate], dict[int, tuple[Candidate, Candidate]]]:
        """Each row's candidate, one measured twice standing for both replicates (`replicates.merged`),
        and the replicate pairs."""
        pairs = self.replicate_pairs(ordered, self.candidate)
        out = [merged(*pairs[r.index], REPLICATE_FIELDS) if r.index in pairs else self.candidate(r)
               for r in ordered if isinstance(r, RealtimeRow)]
        return out, pairs

    def contenders(self, rows: Mapping[int, Row]) -> list[int]:
        candidates, _ = self.candidates(self.ordered_rows(rows))
        finished = [c for c in candidates if c.status == "ok"]
        order = criteria(ranking_mode(finished, self.spec.objective), self.spec.objective)
        return [c.index for c in contenders(rank(finished, self.spec.objective), order)]

    def document(self, rows: Mapping[int, Row], outcome: RunOutcome | None = None) -> dict[str, Any]:
        """sweep.json's content for the rows so far (docs/sweep.md)."""
        objective = self.spec.objective
        ordered = self.ordered_rows(rows)
        candidates, pairs = self.candidates(ordered)
        finished = [c for c in candidates if c.status not in ("pending", "running")]
        rec = recommend(finished, objective)
        tail = self.confirmation_tail(rec.ranked, pairs, criteria(ranking_mode(finished, objective), objective))
        front = pareto_front([(c.index, c.cost_per_1m, c.latency_ms) for c in finished
                              if c.status == "ok" and c.cost_per_1m is not None and c.latency_ms is not None])
        self.mark_rows(candidates, ordered, rec.lost, disqualification, front)
        return {
            **self.document_head(render.SCHEMA, outcome),
            "configurations": [r.as_dict() for r in ordered],
            "recommendation": self.recommendation(rec, ordered, tail),
            "pareto": front,
            "why_not": self.why_not(rec),
        }

    def write_outputs(self, document: dict[str, Any], html_too: bool = True) -> dict[str, Path]:
        return render.write_all(self.out_dir, document, html_too)


def load(spec: SweepSpec, *, out: str | Path | None = None, client: AwsClient = None,
         poll_s: float | None = None) -> RealtimeSweep:
    """A real-time sweep file, checked (UsageError naming the key), priced and planned; nothing deployed."""
    check = spec.check
    try:
        deployer = create_deployer(spec.deploy, **sagemaker_options(spec, client, poll_s))
    except UsageError as exc:
        raise check.prefixed("deploy", exc) from None
    configurations = expand(spec.shared_settings(), spec.grid, spec.configurations)
    plan = parse_load(spec.load, spec.objective, source=spec.source, base_dir=spec.base_dir)
    mixes = {c.index: configuration_mix(c.settings, plan.given.get("target_models"), spec.where(c))
             for c in configurations}
    for c in configurations:
        deployer.check(deployer_settings(c.settings, deployer.known_keys), spec.where(c))
    check_payload(plan)
    prices = configuration_prices(spec, configurations)
    pricing_only = PRICING_ONLY.get(spec.deploy, ("price_per_hour",))
    keys = {c.index: configuration_key(spec.deploy, {k: v for k, v in c.settings.items() if k not in pricing_only},
                                       plan.given)
            for c in configurations}
    sweep = RealtimeSweep(spec, deployer, plan, configurations, keys, prices, sweep_folder(spec, out), mixes=mixes)
    sweep.estimate()
    return sweep
