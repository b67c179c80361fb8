"""The report options (`sm-locust report`, the Python API's `result.report(...)`) and the compare
options (`sm-locust compare`, `sm_locust.compare`, which share the report's cost options), declared
once as OptionSpecs: flag, default, type and range.

`sm-locust report`'s command line, its `SM_LOCUST_REPORT_*` variables and the API's keywords all go
through `OptionSpec.parse`, so a range written here is refused alike wherever the value came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sm_locust.config.options import OptionSpec, parse_specs
from sm_locust.errors import UsageError
from sm_locust.report.cost import DEFAULT_SAFETY_FACTOR
from sm_locust.util.numbers import check_number

PERIOD_STEP_S = 60  # CloudWatch standard resolution


def _period(text: str) -> int:
    period = int(check_number(text, "--period", int))
    if period <= 0 or period % PERIOD_STEP_S:
        raise UsageError(f"--period {period} must be a multiple of {PERIOD_STEP_S} (CloudWatch standard resolution)")
    return period


def _spec(flag: str, help: str, default: Any = None, type: Any = None, **rest: Any) -> OptionSpec:
    env_var = "SM_LOCUST_REPORT_" + flag.lstrip("-").replace("-", "_").upper()
    return OptionSpec(flag, env_var, default, help, type=type, web_ui=False, forward=False, **rest)


OPTIONS: tuple[OptionSpec, ...] = (
    _spec("--endpoint-name", "endpoint name (default: from summary.json / options.json)"),
    _spec("--variant-name", "production variant (default: the run's target variant, else AllTraffic)"),
    _spec("--inference-component", "InferenceComponentName dimension instead of EndpointName+VariantName"),
    _spec("--region", "AWS region (default: the run's, else the boto3 chain)"),
    _spec("--profile", "AWS profile (default: the run's, else the boto3 chain)"),
    _spec("--period", "CloudWatch period in seconds, a multiple of 60", 60, convert=_period),
    _spec("--wait", "poll CloudWatch until metrics for the whole run have arrived (they lag a few minutes)", False,
          bool, const=True),
    _spec("--wait-timeout", "seconds to wait with --wait", 900.0, float, above=0),
    _spec("--instance-type", "e.g. ml.c5.xlarge, for the price and vCPU count"),
    _spec("--instance-count", "instances behind the variant during the run (default 1)", None, int, above=0),
    _spec("--price-per-hour", "USD per instance-hour (overrides the price table)", None, float, above=0),
    _spec("--prices", "JSON price table overriding the bundled one entry by entry (same shape as prices.json)",
          name="prices_file", metavar="FILE"),
    _spec("--target-rps", "traffic to size for: instances needed", None, float, above=0),
    _spec("--safety-factor", "headroom for sizing and the autoscaling target", DEFAULT_SAFETY_FACTOR, float, above=0,
          maximum=1),
    _spec("--serverless-memory-mb", "also estimate serverless cost at this memory size (1024-6144)", None, int,
          above=0),
    _spec("--out", "write outputs here instead of RUN_DIR", name="out_dir", metavar="DIR"),
)

BY_DEST = {spec.dest: spec for spec in OPTIONS}

COMPARE_OUT = "reports/compare"
COMPARE_SHARED = ("prices_file", "target_rps", "safety_factor")  # the report's cost options, declared above


def compare_options() -> tuple[OptionSpec, ...]:
    """`sm-locust compare`'s options: its --out, then the report's cost options (one declaration each)."""
    by_dest = {spec.dest: spec for spec in OPTIONS}
    out = OptionSpec("--out", "SM_LOCUST_COMPARE_OUT", COMPARE_OUT, "output folder (beside the runs)", metavar="DIR",
                     web_ui=False, forward=False)
    return (out, *(by_dest[dest] for dest in COMPARE_SHARED))


@dataclass(frozen=True)
class CompareSettings:
    """What `sm-locust compare` / `sm_locust.compare` was asked, parsed once by the specs."""

    out: str | None = COMPARE_OUT
    prices_file: str | None = None
    target_rps: float | None = None
    safety_factor: float = DEFAULT_SAFETY_FACTOR

    @classmethod
    def parse(cls, source: Mapping[str, object]) -> CompareSettings:
        """From a mapping (a command's `vars(args)`, keywords), each option by its spec."""
        options = parse_specs(compare_options(), source)
        return cls(**{dest: options[dest] for dest in ("out", *COMPARE_SHARED)})
