"""CloudWatch metric definitions for a SageMaker endpoint, as data.

Which metrics to fetch, in which namespace, with which statistics, and how to turn CloudWatch's
unit into the one the report shows (ModelLatency arrives in MICROseconds) are facts, not code: they
live in `METRICS` so that the fetcher, the merge and the renderer agree on one column name per
series, `cw_<Metric>_<stat>_<unit>` (e.g. `cw_ModelLatency_avg_ms`, `cw_CPUUtilization_max_pct`,
`cw_Invocations_sum_count`). Each metric also knows whether higher or lower is better (for
comparisons) and whether its absence is worth reporting as a gap (GPU metrics on a CPU instance,
or ModelSetupTime on a real-time endpoint, are normally absent).
"""

from __future__ import annotations

from dataclasses import dataclass

SAGEMAKER_NS = "AWS/SageMaker"
ENDPOINTS_NS = "/aws/sagemaker/Endpoints"
INFERENCE_COMPONENTS_NS = "/aws/sagemaker/InferenceComponents"

# CloudWatch statistic -> the short name used in column names.
STAT_ABBREV = {"Average": "avg", "Maximum": "max", "Minimum": "min", "Sum": "sum", "SampleCount": "samples"}


@dataclass(frozen=True)
class MetricDef:
    """One CloudWatch metric and how the report shows it."""

    name: str
    namespace: str
    stats: tuple[str, ...]
    unit: str  # unit of the report column: "ms", "pct", "count"
    scale: float = 1.0  # CloudWatch value x scale = report value (µs -> ms: 0.001)
    direction: str = "lower"  # "lower" or "higher" is better
    expected: bool = True  # absent data is a gap (True) or normal (False, e.g. GPU on CPU)
    gpu: bool = False  # only meaningful on GPU instances
    per_unit: str | None = None  # "vcpu"/"gpu": also report value / count (summed over cores)
    ic_name: str | None = None  # metric name under an inference component, if different
    description: str = ""
    endpoint_only: bool = False  # published with the EndpointName dimension alone (no VariantName)

    def column(self, stat: str) -> str:
        return column_name(self.name, stat, self.unit)

    def columns(self) -> list[str]:
        return [self.column(s) for s in self.stats]


def column_name(metric: str, stat: str, unit: str) -> str:
    """`cw_<Metric>_<stat>_<unit>`; stat is a CloudWatch statistic or its abbreviation."""
    return f"cw_{metric}_{STAT_ABBREV.get(stat, stat)}_{unit}"


def per_unit_column(metric: MetricDef, stat: str) -> str:
    """Column for a summed-over-cores percentage divided by the core (or GPU) count."""
    suffix = "PerVCPU" if metric.per_unit == "vcpu" else "PerGPU"
    return column_name(metric.name + suffix, stat, metric.unit)


_AVG_MAX = ("Average", "Maximum")

METRICS: tuple[MetricDef, ...] = (
    MetricDef("Invocations", SAGEMAKER_NS, ("Sum",), "count", direction="higher",
              description="requests the endpoint served (all variants' instances)"),
    MetricDef("InvocationsPerInstance", SAGEMAKER_NS, ("Sum",), "count", direction="higher",
              description="Invocations divided by the instance count (the autoscaling metric)"),
    MetricDef("ModelLatency", SAGEMAKER_NS, _AVG_MAX, "ms", scale=0.001,
              description="time the model container took, as seen by SageMaker (CloudWatch: µs)"),
    MetricDef("OverheadLatency", SAGEMAKER_NS, _AVG_MAX, "ms", scale=0.001,
              description="SageMaker's own time on top of ModelLatency (CloudWatch: µs)"),
    MetricDef("Invocation4XXErrors", SAGEMAKER_NS, ("Sum",), "count", expected=False,
              description="requests answered 4xx by SageMaker or the model"),
    MetricDef("Invocation5XXErrors", SAGEMAKER_NS, ("Sum",), "count", expected=False,
              description="requests answered 5xx by SageMaker or the model"),
    MetricDef("ModelSetupTime", SAGEMAKER_NS, _AVG_MAX, "ms", scale=0.001, expected=False,
              description="serverless cold-start time (CloudWatch: µs)"),
    MetricDef("CPUUtilization", ENDPOINTS_NS, _AVG_MAX, "pct", per_unit="vcpu",
              ic_name="CPUUtilizationNormalized",
              description="CPU percent summed over vCPUs (4 vCPUs: 0-400%)"),
    MetricDef("MemoryUtilization", ENDPOINTS_NS, _AVG_MAX, "pct", ic_name="CPUMemoryUtilizationNormalized",
              description="memory percent of the instance"),
    MetricDef("GPUUtilization", ENDPOINTS_NS, _AVG_MAX, "pct", expected=False, gpu=True, per_unit="gpu",
              ic_name="GPUUtilizationNormalized", description="GPU percent summed over GPUs"),
    MetricDef("GPUMemoryUtilization", ENDPOINTS_NS, _AVG_MAX, "pct", expected=False, gpu=True,
              per_unit="gpu", ic_name="GPUMemoryUtilizationNormalized",
              description="GPU memory percent summed over GPUs"),
    MetricDef("DiskUtilization", ENDPOINTS_NS, _AVG_MAX, "pct", expected=False,
              description="disk space used, percent"),
)

# A multi-model endpoint's metrics ("CloudWatch Metrics for Multi-Model Endpoint Deployments", docs/facts.md). Not
# in METRICS: a report asks for them only for a run against an MME. ModelCacheHit's Average is the hit ratio.
MULTI_MODEL_METRICS: tuple[MetricDef, ...] = (
    MetricDef("ModelCacheHit", SAGEMAKER_NS, ("Average",), "pct", scale=100.0, direction="higher", expected=False,
              description="requests whose model was already in memory, percent "
              "(CloudWatch: Average of 1 per hit, 0 per miss)"),
    MetricDef("ModelLoadingWaitTime", SAGEMAKER_NS, _AVG_MAX, "ms", scale=0.001, expected=False,
              description="time a request waited for its model's download and/or load (CloudWatch: µs)"),
    MetricDef("ModelDownloadingTime", SAGEMAKER_NS, _AVG_MAX, "ms", scale=0.001, expected=False,
              description="time to download a model from S3 (CloudWatch: µs)"),
    MetricDef("ModelLoadingTime", SAGEMAKER_NS, _AVG_MAX, "ms", scale=0.001, expected=False,
              description="time to load a model into the container (CloudWatch: µs)"),
    MetricDef("ModelUnloadingTime", SAGEMAKER_NS, ("SampleCount",), "count", expected=False,
              description="models unloaded from memory (SampleCount of the unload times)"),
    MetricDef("LoadedModelCount", ENDPOINTS_NS, _AVG_MAX, "count", expected=False,
              description="models loaded in memory, per instance"),
)

# An asynchronous endpoint's own metrics ("Asynchronous inference" in docs/facts.md: names, units and
# dimensions). Not in METRICS: a report asks for them only for a run that waited for async results. The
# backlog, its age and HasBacklogWithoutCapacity carry EndpointName alone.
ASYNC_METRICS: tuple[MetricDef, ...] = (
    MetricDef("ApproximateBacklogSize", SAGEMAKER_NS, ("Average", "Maximum"), "count", expected=False,
              endpoint_only=True, description="requests queued or being processed"),
    MetricDef("ApproximateBacklogSizePerInstance", SAGEMAKER_NS, ("Average", "Maximum"), "count", expected=False,
              endpoint_only=True, description="the backlog divided by the instances (the autoscaling metric)"),
    MetricDef("ApproximateAgeOfOldestRequest", SAGEMAKER_NS, ("Average", "Maximum"), "s", expected=False,
              endpoint_only=True, description="age of the oldest request in the queue (CloudWatch: seconds)"),
    MetricDef("HasBacklogWithoutCapacity", SAGEMAKER_NS, ("Maximum",), "count", expected=False,
              endpoint_only=True, description="1 when requests wait and no instance runs (scale from zero)"),
    MetricDef("TimeInBacklog", SAGEMAKER_NS, _AVG_MAX, "ms", scale=0.001, expected=False,
              description="time a request was queued before processing (CloudWatch: µs)"),
    MetricDef("TotalProcessingTime", SAGEMAKER_NS, _AVG_MAX, "ms", expected=False,
              description="received -> processed, backlog, upload and notification included (CloudWatch: ms)"),
    MetricDef("InvocationsProcessed", SAGEMAKER_NS, ("Sum",), "count", direction="higher", expected=False,
              description="async requests processed"),
    MetricDef("InvocationFailures", SAGEMAKER_NS, ("Sum",), "count", expected=False,
              description="async requests that failed"),
)

METRICS_BY_NAME = {m.name: m for m in (*METRICS, *MULTI_MODEL_METRICS, *ASYNC_METRICS)}


def all_columns(metrics: tuple[MetricDef, ...] = METRICS) -> list[str]:
    return [c for m in metrics for c in m.columns()]
