"""An async sweep: the `async` kind's hooks on the shared `base.Sweep`, and its loader (docs/async.md,
"Sweeping instances and workers").

A sweep file with an `async:` section is loaded here (`api.py` names `load`) into an `AsyncSweep`: the
shared deploy / test / delete loop, `--plan`, `--yes`, resume, `max_cost_usd`, cleanup on every exit,
a client-bound run measured again then INCONCLUSIVE, and sweep.json / csv / html, with the kind's parts
in one module each:

    spec.py      the section: instance_count x max_concurrent_invocations_per_instance, checked
    plan.py      the `load:` section as the async search against the objective's time-to-result SLO
    deploy.py    the local async endpoint (fixed instances) and the SageMaker AsyncInferenceConfig
    measure.py   summary.json -> the capacity with its bracket, the time to result, instance-hours (pure)
    rows.py      the typed row
    rank.py      which configuration to recommend, and why the others lost (pure)
    render.py    sweep.json's CSV and page, the line printed per configuration

The test is the shared runner's: one normal `sm-locust run --shape async` per configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sm_locust.aws.clients import AwsClient
from sm_locust.record.model import Summary
from sm_locust.sweep.asynchronous import render
from sm_locust.sweep.asynchronous.deploy import LocalAsyncDeployer, SageMakerAsyncDeployer
from sm_locust.sweep.asynchronous.measure import measure, priced
from sm_locust.sweep.asynchronous.plan import async_load_plan
from sm_locust.sweep.asynchronous.rank import AsyncCandidate, disqualification, recommend
from sm_locust.sweep.asynchronous.rows import AsyncFigures, AsyncRow
from sm_locust.sweep.asynchronous.spec import INSTANCES_SETTING, WORKERS_SETTING, AsyncSpec
from sm_locust.sweep.base import Sweep, configuration_prices, sagemaker_options, sweep_folder
from sm_locust.sweep.deployers import Deployer
from sm_locust.sweep.grid import Configuration, configuration_key, expand
from sm_locust.sweep.load import check_payload
from sm_locust.sweep.rows import Row
from sm_locust.sweep.runner import RunOutcome
from sm_locust.sweep.schema import SweepSpec
from sm_locust.sweep.trust import lost_worker_reason
from sm_locust.util.yamlsafe import load_json

PRICING_ONLY = ("instance_type", "price_per_hour")  # locally they price a configuration without changing it


@dataclass
class AsyncSweep(Sweep):
    """A checked async sweep (its spec's `section` holds the two axes)."""

    @property
    def section(self) -> AsyncSpec:
        assert isinstance(self.spec.section, AsyncSpec)
        return self.spec.section

    def base_row(self, c: Configuration) -> AsyncRow:
        return AsyncRow(**self.row_fields(c), instance_count=int(c.settings[INSTANCES_SETTING]),
                        max_concurrent_invocations_per_instance=int(c.settings[WORKERS_SETTING]),
                        price=self.prices[c.index])

    def measure_row(self, index: int, run_dir: Path, row: Row) -> None:
        assert isinstance(row, AsyncRow)
        summary = Summary.of(load_json((run_dir / "summary.json").read_text()))
        m = measure(summary)
        cost = priced(m.capacity_rps, m.capacity_ci95, row.instance_count, row.price.usd_per_hour)
        row.figures = AsyncFigures(**vars(m), **vars(cost))
        # its figures are kept, its status says it was not decided (exit code 1); a search that lost a Locust
        # worker is measured again first (the runner reads `trust.lost_worker_reason`): the loss may be its doubt
        if m.inconclusive and lost_worker_reason(summary) is None:
            row.fail("inconclusive", f"its search could not decide: {m.inconclusive_reason}")

    def configuration_line(self, index: int, total: int, row: Row) -> str:
        assert isinstance(row, AsyncRow)
        return render.configuration_line(index, total, row, self.spec.objective.percentile_label)

    def candidate(self, row: AsyncRow) -> AsyncCandidate:
        f = row.figures or AsyncFigures()
        return AsyncCandidate(
            index=row.index, label=row.label, status=row.status, reason=row.reason, instance_count=row.instance_count,
            workers=row.max_concurrent_invocations_per_instance, capacity_rps=f.capacity_rps,
            capacity_ci95=f.capacity_ci95, time_to_result_ms=f.time_to_result_ms,
            time_to_result_ci95=f.time_to_result_ci95, instance_hours_per_1m=f.instance_hours_per_1m,
            instance_hours_per_1m_ci95=f.instance_hours_per_1m_ci95, cost_per_1m=f.cost_per_1m,
            cost_per_1m_ci95=f.cost_per_1m_ci95, fleet_per_hour=row.fleet_per_hour, error_rate=f.error_rate,
            inconclusive=f.inconclusive, inconclusive_reason=f.inconclusive_reason,
            no_capacity_reason=f.no_capacity_reason)

    def document(self, rows: Mapping[int, Row], outcome: RunOutcome | None = None) -> dict[str, object]:
        ordered = self.ordered_rows(rows)
        candidates = [self.candidate(r) for r in ordered if isinstance(r, AsyncRow)]
        finished = [c for c in candidates if c.status not in ("pending", "running")]
        rec = recommend(finished, self.spec.objective)
        self.mark_rows(candidates, ordered, rec.lost, disqualification)
        searched = {c.index for c in finished if c.inconclusive}  # the search's own doubt: rank.recommend words it
        document = self.recommendation(rec, [r for r in ordered if r.index not in searched])
        earlier = document.get("inconclusive")  # client-bound in both measurements
        document["inconclusive"] = [*(earlier if isinstance(earlier, list) else []),
                                    *(c.label for c in finished if c.index in searched)]
        return {
            **self.document_head(render.SCHEMA, outcome, kind="async"),
            "async": self.section.as_dict(),
            "configurations": [r.as_dict() for r in ordered],
            "recommendation": document,
            "why_not": self.why_not(rec),
        }

    def write_outputs(self, document: dict[str, object], html_too: bool = True) -> dict[str, Path]:
        return render.write_all(self.out_dir, document, html_too)


def load(spec: SweepSpec, *, out: str | Path | None = None, client: AwsClient = None,
         poll_s: float | None = None) -> AsyncSweep:
    """An async sweep file, checked (UsageError naming the key), priced and planned; nothing deployed."""
    assert isinstance(spec.section, AsyncSpec)
    plan = async_load_plan(spec)
    deployer: Deployer
    if spec.deploy == "sagemaker":
        options = sagemaker_options(spec, client, poll_s)
        deployer = SageMakerAsyncDeployer(options.pop("client"), **options)
    else:
        deployer = LocalAsyncDeployer()
    configurations = expand(spec.shared_settings(), spec.grid, spec.configurations)
    for c in configurations:
        deployer.check(c.settings, spec.where(c))
    check_payload(plan)
    counted = [Configuration(c.index, {**c.settings, "instance_count": c.settings[INSTANCES_SETTING]}, c.varying,
                             c.label) for c in configurations]
    prices = configuration_prices(spec, counted)  # price x async.instance_count
    pricing_only = PRICING_ONLY if spec.deploy == "local" else ("price_per_hour",)
    keys = {c.index: configuration_key("async", spec.deploy, {k: v for k, v in c.settings.items()
                                                              if k not in pricing_only}, plan.given)
            for c in configurations}
    sweep = AsyncSweep(spec, deployer, plan, configurations, keys, prices, sweep_folder(spec, out))
    sweep.estimate()
    return sweep
