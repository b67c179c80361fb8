"""A serverless sweep: the `serverless` kind's hooks on the shared `base.Sweep`, and its loader
(docs/serverless.md).

A sweep file with a `serverless:` section (`spec.py`) is loaded here (`api.py` names `load`) into
a `ServerlessSweep`: the shared deploy / test / delete loop, cleanup, resume and progress lines, with
the kind's parts in the package's other modules. A serverless configuration is billed per use, so
its plan estimate is a ceiling: every MaxConcurrency slot busy for the whole test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from sm_locust.aws.clients import AwsClient
from sm_locust.errors import UsageError
from sm_locust.report.cloudwatch import make_client
from sm_locust.report.cost import load_prices
from sm_locust.sweep.base import Sweep, sagemaker_options, sweep_folder
from sm_locust.sweep.costing import Estimate, Price
from sm_locust.sweep.deployers import Deployer
from sm_locust.sweep.grid import Configuration, configuration_key, expand
from sm_locust.sweep.load import check_payload
from sm_locust.sweep.replicates import contenders
from sm_locust.sweep.rows import Row
from sm_locust.sweep.runner import RunOutcome, SweepRunner
from sm_locust.sweep.schema import SweepSpec
from sm_locust.sweep.serverless import render
from sm_locust.sweep.serverless.collect import Collector
from sm_locust.sweep.serverless.cost import ServerlessPrices, load_serverless_prices
from sm_locust.sweep.serverless.deploy import (
    LocalServerlessDeployer,
    SageMakerServerlessDeployer,
)
from sm_locust.sweep.serverless.plan import serverless_load_plan
from sm_locust.sweep.serverless.rank import (
    WARM_KEYS,
    ServerlessCandidate,
    criteria,
    disqualification,
    rank,
    recommend,
    replicated,
)
from sm_locust.sweep.serverless.rows import ServerlessFigures, ServerlessRow
from sm_locust.sweep.serverless.runner import ServerlessRunner
from sm_locust.sweep.serverless.spec import PREFIX, CompareInstance, ServerlessSpec


@dataclass
class ServerlessSweep(Sweep):
    """A checked serverless sweep (its spec's `section` holds the tests, multipliers, comparison)."""

    serverless_prices: ServerlessPrices = field(default_factory=ServerlessPrices)
    compare: CompareInstance | None = None
    cloudwatch: AwsClient = None  # injected CloudWatch client (tests); default: made when first needed, on AWS

    runner_class: ClassVar[type[SweepRunner]] = ServerlessRunner
    judges_client: ClassVar[bool] = False  # its result is its own tests' (results.json), not one run's verdict
    confirms: ClassVar[bool] = True

    @property
    def serverless(self) -> ServerlessSpec:
        assert isinstance(self.spec.section, ServerlessSpec)
        return self.spec.section

    def base_row(self, c: Configuration) -> ServerlessRow:
        return ServerlessRow(**self.row_fields(c), memory_size_mb=int(c.settings[f"{PREFIX}memory_size_mb"]),
                             max_concurrency=int(c.settings[f"{PREFIX}max_concurrency"]))

    def estimate(self) -> None:
        """The shared estimates, then the $ of each: billed per use, at most every slot busy for the whole test."""
        super().estimate()
        for i, e in list(self.estimates.items()):
            settings = self.configuration(i).settings
            ceiling = (int(settings[f"{PREFIX}max_concurrency"])
                       * self.serverless_prices.per_second(int(settings[f"{PREFIX}memory_size_mb"])) * e.test_s)
            self.estimates[i] = Estimate(e.deploy_s, e.test_s, e.delete_s, e.wait_s, 0.0, ceiling)

    def measure_row(self, index: int, run_dir: Path, row: Row) -> None:
        assert isinstance(row, ServerlessRow)
        collector = Collector(self.spec.deploy, self.serverless_prices, self.compare, self.cloudwatch_client)
        row.figures = collector.figures(run_dir, row.memory_size_mb)

    def cloudwatch_client(self) -> AwsClient:
        if self.cloudwatch is None:
            region = self.spec.region or self.deployer.client.meta.region_name  # type: ignore[attr-defined]
            self.cloudwatch = make_client(region, self.spec.aws_profile)
        return self.cloudwatch

    def configuration_line(self, index: int, total: int, row: Row) -> str:
        assert isinstance(row, ServerlessRow)
        return render.configuration_line(index, total, row)

    # -- results -------------------------------------------------------------------------------------
    def candidate(self, row: ServerlessRow) -> ServerlessCandidate:
        """What the ranking needs of a row."""
        f = row.figures or ServerlessFigures()
        return ServerlessCandidate(
            index=row.index, label=row.label, memory_mb=row.memory_size_mb, max_concurrency=row.max_concurrency,
            status=row.status, reason=row.reason, warm_ms={p: getattr(f, key) for p, key in WARM_KEYS.items()},
            throttle_at_1=f.throttle_at_max_concurrency, capacity_rps=f.capacity_rps, cold_start_p50_ms=f.cold.p50_ms,
            cost_per_1m=f.cost.cost_per_1m, break_even_rps=f.cost.break_even_rps,
            break_even_requests_per_month=f.cost.break_even_requests_per_month,
            warm_ci95={p: f.warm_ci95(key) for p, key in WARM_KEYS.items()}, capacity_ci95=f.capacity_rps_ci95,
            cold_start_p50_ci95=f.cold.p50_ms_ci95, cost_per_1m_ci95=f.cost.cost_per_1m_ci95)

    def candidates(self, ordered: list[Row]) -> tuple[list[ServerlessCandidate],
                                                      dict[int, tuple[ServerlessCandidate, ServerlessCandidate]]]:
        """Each row's candidate, one measured twice standing for both replicates, and the replicate pairs."""
        pairs = self.replicate_pairs(ordered, self.candidate)
        out = [replicated(*pairs[r.index]) if r.index in pairs else self.candidate(r)
               for r in ordered if isinstance(r, ServerlessRow)]
        return out, pairs

    def contenders(self, rows: Mapping[int, Row]) -> list[int]:
        candidates, _ = self.candidates(self.ordered_rows(rows))
        finished = [c for c in candidates if c.status == "ok"]
        return [c.index for c in contenders(rank(finished, self.spec.objective), criteria(self.spec.objective))]

    def document(self, rows: Mapping[int, Row], outcome: RunOutcome | None = None) -> dict[str, Any]:
        objective = self.spec.objective
        ordered = self.ordered_rows(rows)
        candidates, pairs = self.candidates(ordered)
        finished = [c for c in candidates if c.status not in ("pending", "running")]
        rec = recommend(finished, objective, self.compare)
        tail = self.confirmation_tail(rec.ranked, pairs, criteria(objective))
        self.mark_rows(candidates, ordered, rec.lost, disqualification)
        compare = None
        if self.compare is not None:
            compare = {"instance_type": self.compare.instance_type, "price_per_hour": self.compare.price_per_hour,
                       "price_source": self.compare.price_source, "capacity_rps": self.compare.capacity_rps}
        return {
            **self.document_head(render.SCHEMA, outcome, kind="serverless"),
            "serverless": self.serverless.as_dict(),
            "compare_instance": compare,
            "prices": {"serverless": self.serverless_prices.label(), "sources": self.serverless_prices.sources,
                       "usd_per_second_by_memory_mb": {str(k): v for k,
                                                       v in self.serverless_prices.usd_per_second_by_memory_mb.items()},
                       "usd_per_gb_processed": self.serverless_prices.usd_per_gb_processed},
            "configurations": [r.as_dict() for r in ordered],
            "recommendation": self.recommendation(rec, (), tail),
            "why_not": self.why_not(rec),
        }

    def write_outputs(self, document: dict[str, Any], html_too: bool = True) -> dict[str, Path]:
        return render.write_all(self.out_dir, document, html_too)


def priced_compare(spec: SweepSpec, compare: CompareInstance | None) -> CompareInstance | None:
    """`compare_instance` with its price: given, or the bundled table's for its instance type."""
    if compare is None or compare.price_per_hour is not None:
        return compare
    check = spec.check
    try:
        table = load_prices(spec.prices)
    except UsageError as exc:
        raise check.prefixed("prices", exc) from None
    priced = table.lookup(compare.instance_type)
    if priced is None:
        raise check.error("compare_instance.instance_type", f"{compare.instance_type} is not in the price table "
                          f"({', '.join(table.sources)}); give compare_instance.price_per_hour")
    return replace(compare, price_per_hour=priced.usd_per_hour,
                   price_source=f"{priced.source} (approximate {table.region} on-demand price as of {table.as_of})")


def load(spec: SweepSpec, *, out: str | Path | None = None, client: AwsClient = None, poll_s: float | None = None,
         cloudwatch: AwsClient = None) -> ServerlessSweep:
    """A serverless sweep file, checked (UsageError naming the key), planned, nothing deployed."""
    assert isinstance(spec.section, ServerlessSpec)
    sls = spec.section
    check = spec.check
    plan = serverless_load_plan(spec)
    deployer: Deployer
    if spec.deploy == "sagemaker":
        options = sagemaker_options(spec, client, poll_s)
        deployer = SageMakerServerlessDeployer(options.pop("client"), plan=plan, **options)
    else:
        deployer = LocalServerlessDeployer(plan)
    configurations = expand(spec.shared_settings(), spec.grid, spec.configurations)
    for c in configurations:
        deployer.check(c.settings, spec.where(c))
    check_payload(plan)
    try:
        prices = load_serverless_prices(sls.prices_file)
        for memory in sls.memory_sizes:
            prices.per_second(memory)
    except UsageError as exc:
        raise check.prefixed("serverless_prices", exc) from None
    compare = priced_compare(spec, sls.compare)
    keys = {c.index: configuration_key("serverless", spec.deploy, c.settings, plan.given, list(sls.tests),
                                       sls.multipliers,
                                       sls.cold_start.rounds, sls.cold_start.gap_s, sls.cold_start.concurrency)
            for c in configurations}
    sweep = ServerlessSweep(spec, deployer, plan, configurations, keys,
                            {c.index: Price(None, None, None) for c in configurations},
                            sweep_folder(spec, out), serverless_prices=prices, compare=compare, cloudwatch=cloudwatch)
    sweep.estimate()
    return sweep
