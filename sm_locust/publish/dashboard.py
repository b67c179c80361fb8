"""`--dashboard`: a CloudWatch dashboard with the client's view beside the endpoint's.

The body (`dashboard_body`, pure) follows CloudWatch's dashboard body structure (docs/facts.md):

- latency: the client's EndToEndLatency p50 and p99 beside the endpoint's ModelLatency and
  OverheadLatency. SageMaker publishes those two in MICROseconds: they are drawn through metric
  math (`/1000`) and labelled "(ms)", so all four lines share one millisecond axis;
- traffic: the endpoint's Invocations beside the client's Requests (Sum);
- errors on both sides: the client's Failures and Throttles, the endpoint's Invocation4XXErrors and
  Invocation5XXErrors (Sum);
- utilisation: CPU, memory, GPU and GPU memory (/aws/sagemaker/Endpoints, percent summed over
  cores or GPUs, as SageMaker reports them);
- instances: Invocations / InvocationsPerInstance (InvocationsPerInstance adds 1/instances per
  request, so the ratio is the instance count while there is traffic), and the client's InFlight;
- LLM runs: TimeToFirstToken and InterTokenLatency p50 / p99, OutputTokens.

The endpoint's metrics need its variant: the one the run targets (`--target-variant`), else every
variant through a SEARCH expression. `put_dashboard` writes it (PutDashboard creates or replaces)
and returns the console URL.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from sm_locust.aws.clients import AwsClient
from sm_locust.errors import UsageError

SAGEMAKER = "AWS/SageMaker"
ENDPOINT_INSTANCES = "/aws/sagemaker/Endpoints"
SAGEMAKER_PERIOD_S = 60  # SageMaker's invocation and utilisation metrics are 1-minute metrics
WIDTH, HEIGHT = 12, 6


def _client(namespace: str, dims: list[dict], name: str, stat: str, label: str, period: int) -> list:
    flat = [x for d in dims for x in (d["Name"], d["Value"])]
    return [namespace, name, *flat, {"stat": stat, "label": label, "period": period}]


def _endpoint_metric(namespace: str, name: str, endpoint: str, variant: str | None, stat: str, ident: str,
                     label: str, visible: bool = True) -> list:
    """One metric of the endpoint: explicit with its variant, else a SEARCH over every variant."""
    if variant:
        return [namespace, name, "EndpointName", endpoint, "VariantName", variant,
                {"stat": stat, "id": ident, "label": label, "visible": visible, "period": SAGEMAKER_PERIOD_S}]
    query = (f"SEARCH('{{{namespace},EndpointName,VariantName}} MetricName=\"{name}\" "
             f"EndpointName=\"{endpoint}\"', '{stat}', {SAGEMAKER_PERIOD_S})")
    return [{"expression": query, "id": ident, "label": label, "visible": visible}]


def _widget(title: str, metrics: list, x: int, y: int, region: str, period: int, *, label: str = "",
            stat: str = "Sum") -> dict:
    properties: dict[str, object] = {"title": title, "view": "timeSeries", "stacked": False, "region": region,
                                  "metrics": metrics, "period": period, "stat": stat}
    if label:
        properties["yAxis"] = {"left": {"label": label, "showUnits": False}}
    return {"type": "metric", "x": x, "y": y, "width": WIDTH, "height": HEIGHT, "properties": properties}


def dashboard_body(*, endpoint: str, namespace: str, dims: list[dict], region: str, period_s: int,
                   variant: str | None = None, llm: bool = False) -> dict:
    """The dashboard (module docstring) for `endpoint`, the client's metrics in `namespace` with `dims`."""
    p = period_s

    def ep(namespace_: str, name: str, stat: str, ident: str, label: str, visible: bool = True) -> list:
        return _endpoint_metric(namespace_, name, endpoint, variant, stat, ident, label, visible)

    def client(name: str, stat: str, label: str) -> list:
        return _client(namespace, dims, name, stat, label, p)

    latency = [client("EndToEndLatency", "p50", "client EndToEndLatency p50 (ms)"),
               client("EndToEndLatency", "p99", "client EndToEndLatency p99 (ms)"),
               ep(SAGEMAKER, "ModelLatency", "Average", "model_us", "ModelLatency (µs)", visible=False),
               ep(SAGEMAKER, "OverheadLatency", "Average", "overhead_us", "OverheadLatency (µs)", visible=False),
               [{"expression": "model_us/1000", "id": "model_ms", "label": "endpoint ModelLatency avg (ms)"}],
               [{"expression": "overhead_us/1000", "id": "overhead_ms", "label": "endpoint OverheadLatency avg (ms)"}]]
    traffic = [client("Requests", "Sum", "client Requests"),
               ep(SAGEMAKER, "Invocations", "Sum", "invocations", "endpoint Invocations")]
    errors = [client("Failures", "Sum", "client Failures"), client("Throttles", "Sum", "client Throttles"),
              ep(SAGEMAKER, "Invocation4XXErrors", "Sum", "e4xx", "endpoint Invocation4XXErrors"),
              ep(SAGEMAKER, "Invocation5XXErrors", "Sum", "e5xx", "endpoint Invocation5XXErrors")]
    utilisation = [ep(ENDPOINT_INSTANCES, name, "Average", name.lower(), f"endpoint {name} (%)")
                   for name in ("CPUUtilization", "MemoryUtilization", "GPUUtilization", "GPUMemoryUtilization")]
    instances = [ep(SAGEMAKER, "Invocations", "Sum", "inv", "Invocations", visible=False),
                 ep(SAGEMAKER, "InvocationsPerInstance", "Sum", "per_instance", "InvocationsPerInstance",
                    visible=False),
                 [{"expression": "inv/per_instance", "id": "instances",
                   "label": "endpoint instances (Invocations / InvocationsPerInstance)"}],
                 client("InFlight", "Average", "client requests in flight (mean)")]
    widgets = [
        _widget(f"{endpoint}: client end-to-end vs endpoint latency (ms)", latency, 0, 0, region, p, label="ms"),
        _widget(f"{endpoint}: client Requests vs endpoint Invocations", traffic, WIDTH, 0, region, p),
        _widget(f"{endpoint}: errors, client and endpoint", errors, 0, HEIGHT, region, p),
        _widget(f"{endpoint}: endpoint utilisation (% summed over cores / GPUs)", utilisation, WIDTH, HEIGHT, region,
                SAGEMAKER_PERIOD_S, label="%", stat="Average"),
        _widget(f"{endpoint}: instances and requests in flight", instances, 0, 2 * HEIGHT, region,
                SAGEMAKER_PERIOD_S, stat="Sum"),
    ]
    if llm:
        tokens = [client(name, stat, f"{short} {stat} (ms)")
                  for name, short in (("TimeToFirstToken", "TTFT"), ("InterTokenLatency", "ITL"))
                  for stat in ("p50", "p99")]
        widgets.append(_widget(f"{endpoint}: LLM token latency (ms)", tokens, WIDTH, 2 * HEIGHT, region, p, label="ms"))
        widgets.append(_widget(f"{endpoint}: LLM output tokens", [client("OutputTokens", "Sum", "output tokens")], 0,
                               3 * HEIGHT, region, p))
    note = (f"sm-locust live metrics for **{endpoint}**: the client's figures (namespace `{namespace}`, every "
            f"{period_s} s) beside the endpoint's (AWS/SageMaker, every 60 s; its latencies are in microseconds and "
            "are shown divided by 1000). docs/live-metrics.md")
    widgets.append({"type": "text", "x": WIDTH if not llm else 0, "y": 2 * HEIGHT if not llm else 4 * HEIGHT,
                    "width": WIDTH, "height": 3, "properties": {"markdown": note}})
    return {"start": "-PT3H", "periodOverride": "inherit", "widgets": widgets}


def console_url(region: str, name: str) -> str:
    return f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#dashboards/dashboard/{name}"


def put_dashboard(client: AwsClient, name: str, body: Mapping) -> list[str]:
    """PutDashboard (creates or replaces); a UsageError naming CloudWatch's objection when refused.
    Returns CloudWatch's validation messages (warnings: the dashboard was written, some part of it
    may not render)."""
    try:
        answer = client.put_dashboard(DashboardName=name, DashboardBody=json.dumps(body))
    except Exception as exc:
        error = (getattr(exc, "response", None) or {}).get("Error") or {}
        if not error:
            raise
        raise UsageError(f"--dashboard {name}: PutDashboard refused: {error.get('Code')}: "
                         f"{' '.join(str(error.get('Message') or '').split())[:200]}") from None
    return [str(m.get("Message")) for m in answer.get("DashboardValidationMessages") or [] if m.get("Message")]
