"""`sm-locust serve`'s options, declared once as `OptionSpec`s: flag, `SM_LOCUST_SERVE_*` variable,
default, type and range.

The command line, the variables and `EndpointConfig.validate` (what a sweep file's `endpoint:` and
the Python `LocalEndpoint` go through) all refuse a value by the same spec, in the same words. The
emulations' own settings (`--llm-*`, `--serverless-*`, the models, the fleet) are declared here with
their types and choices; their defaults and ranges stay with their settings classes, which check
them as a whole. The variables are `SM_LOCUST_SERVE_*`, apart from `run`'s `SM_LOCUST_*`, so that a
shell set up for `run` (`SM_LOCUST_ENDPOINT_NAME`, `SM_LOCUST_SEED`) does not change the endpoint.
"""

from __future__ import annotations

from sm_locust.config.options import OptionSpec
from sm_locust.mix.spec import MAX_TARGETS
from sm_locust.scaling.policy import MAX_INSTANCES
from sm_locust.scaling.timeline import MAX_TIME_SCALE
from sm_locust.util.numbers import max_processes

MAX_ASYNC_CONCURRENT = 1000  # --async-max-concurrent: queue worker threads (MaxConcurrentInvocationsPerInstance)
MAX_THREADS = 1000  # --threads per worker (gthread): each a thread with its own stack
MAX_STREAM_TOKENS = 100_000  # --stream-tokens: PayloadParts in one streamed response
PROTOCOLS = ("ranking", "triton")
"""The models `--protocol` chooses: the ranking model (JSON, protobuf, npy, CSV) or a Triton model (KServe v2)."""
LLM_FORMATS = ("auto", "tgi", "lmi", "openai")
DEFAULT_TRITON_INPUTS = "input_ids:INT32:-1,512;attention_mask:INT32:-1,512"  # --protocol triton: BERT at 512 tokens
DEFAULT_TRITON_OUTPUTS = "logits:FP32:-1,2"

# group key -> the title --help shows, in --help's order ("" = the command's own options)
GROUPS: dict[str, str] = {
    "": "",
    "capacity": "capacity",
    "batching": "dynamic batching (as TF-Serving / Triton; docs/endpoint.md)",
    "protocol": "protocol (docs/endpoint.md, \"Triton\")",
    "faults": "fault injection",
    "streams": "response streams (POST /endpoints/NAME/invocations-response-stream)",
    "llm": "LLM emulation (continuous batching, docs/llm.md)",
    "serverless": "serverless emulation (SageMaker Serverless Inference, docs/serverless.md)",
    "multi_model": "multi-model endpoint emulation (TargetModel, docs/multi-model.md)",
    "components": "inference components (InferenceComponentName, docs/multi-model.md)",
    "fleet": "fleet emulation: a variant of several instances that autoscales (docs/autoscaling.md)",
    "async": "asynchronous inference (InvokeEndpointAsync answered in S3, docs/async.md)",
    "identity": "identity and metrics",
}

SERVE_ENV_PREFIX = "SM_LOCUST_SERVE_"  # a child endpoint takes only the flags it is given: these are cleared
RATIO = {"minimum": 0.0, "maximum": 1.0}
NOT_NEGATIVE = {"minimum": 0.0}


def _spec(flag: str, help: str, default=None, type=None, group: str = "", **rest) -> OptionSpec:
    env_var = SERVE_ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()
    return OptionSpec(flag, env_var, default, help, type=type, web_ui=False, forward=False, group=group, **rest)


def _instances(**rest) -> dict:
    return {"type": int, "minimum": 1, "maximum": MAX_INSTANCES, "group": "fleet", **rest}


OPTIONS: tuple[OptionSpec, ...] = (
    _spec("--host", "address to bind (0.0.0.0 exposes it to your network)", "127.0.0.1"),
    _spec("--port", "port (default $SAGEMAKER_BIND_TO_PORT or 8080)", None, int, minimum=0, maximum=65535),
    # capacity
    _spec("--workers", "worker processes (default $SAGEMAKER_MODEL_SERVER_WORKERS, $SAGEMAKER_GUNICORN_WORKERS or 1)",
          None, int, "capacity", minimum=1, maximum=max_processes()),
    _spec("--threads", "threads per worker (>1 switches to gthread workers; 1 = gevent)", 1, int, "capacity",
          minimum=1, maximum=MAX_THREADS),
    _spec("--max-concurrency", "requests served at once across workers; the excess queues (0 = unlimited)", 0, int,
          "capacity", **NOT_NEGATIVE),
    _spec("--service-time-ms", "fixed time each request holds a slot: capacity = max-concurrency / service time",
          0.0, float, "capacity", **NOT_NEGATIVE),
    # dynamic batching
    _spec("--max-batch-size", "requests run together as one batch, at most (0 = no batching)", 0, int, "batching",
          **NOT_NEGATIVE),
    _spec("--max-batch-delay-ms", "how long a batch's first request waits for others to join (0: only those already "
          "waiting)", 0.0, float, "batching", **NOT_NEGATIVE),
    _spec("--batch-item-cost", "share of --service-time-ms each request after the first adds to a batch (0-1)", 0.2,
          float, "batching", **RATIO),
    # protocol
    _spec("--protocol", "the model behind the endpoint: ranking (the ranking model's JSON, protobuf, npy, CSV) or "
          "triton (NVIDIA Triton's KServe v2 protocol, JSON or binary tensors, as on SageMaker)", "ranking", None,
          "protocol", choices=PROTOCOLS),
    _spec("--model-inputs", "--protocol triton: the model's inputs, full shapes with the batch dimension first as -1 "
          f"when --max-batch-size > 0 (default {DEFAULT_TRITON_INPUTS})", "", None, "protocol",
          metavar="NAME:DATATYPE:DIMS;..."),
    _spec("--model-outputs", f"--protocol triton: the model's outputs (default {DEFAULT_TRITON_OUTPUTS})", "", None,
          "protocol", metavar="NAME:DATATYPE:DIMS;..."),
    # fault injection
    _spec("--latency-ms", "added latency per request", 0.0, float, "faults", **NOT_NEGATIVE),
    _spec("--jitter-ms", "uniform random extra latency up to this", 0.0, float, "faults", **NOT_NEGATIVE),
    _spec("--throttle-ratio", "share of requests answered ThrottlingException (0-1)", 0.0, float, "faults", **RATIO),
    _spec("--model-error-ratio", "share answered ModelError 424 (0-1)", 0.0, float, "faults", **RATIO),
    _spec("--error-ratio", "share answered InternalFailure 500 / ServiceUnavailable 503 (0-1)", 0.0, float, "faults",
          **RATIO),
    _spec("--drop-ratio", "share of connections closed without an answer (0-1)", 0.0, float, "faults", **RATIO),
    _spec("--cold-start-ms", "extra latency on each worker's first invocation; with the serverless emulation: each "
          "instance's start (ModelSetupTime) when new or idle for --idle-timeout-s", 0.0, float, "faults",
          **NOT_NEGATIVE),
    _spec("--not-ready-s", "answer ModelNotReadyException for this long after start", 0.0, float, "faults",
          **NOT_NEGATIVE),
    _spec("--seed", "seed for fault draws (repeatable runs)", None, int, "faults"),
    # response streams
    _spec("--first-token-ms", "delay before the first PayloadPart", 0.0, float, "streams", **NOT_NEGATIVE),
    _spec("--token-ms", "delay between two PayloadParts", 0.0, float, "streams", **NOT_NEGATIVE),
    _spec("--stream-tokens", "PayloadParts per streamed response (0: one per row's prediction)", 0, int, "streams",
          minimum=0, maximum=MAX_STREAM_TOKENS),
    _spec("--stream-error-ratio", "share of streams that fail half-way with a ModelStreamError event (0-1)", 0.0,
          float, "streams", **RATIO),
    # LLM emulation: defaults and ranges in sm_locust.endpoint.llm.LlmConfig
    _spec("--llm", "serve an emulated LLM instead of the ranking model: TGI / LMI {\"inputs\": ...} and OpenAI-style "
          "{\"messages\": [...]} requests, tokens streamed as a continuous batch makes them", False, bool, "llm",
          const=True),
    _spec("--llm-max-sequences", "sequences decoded at once per worker; more wait in a queue (default 16)", None, int,
          "llm"),
    _spec("--llm-step-ms", "a decode step's fixed time (default 25)", None, float, "llm"),
    _spec("--llm-step-ms-per-seq", "what each sequence in the batch adds to a step (default 0.6)", None, float, "llm"),
    _spec("--llm-prefill-ms-per-token", "what each prompt token admitted adds to its step (default 0.1)", None, float,
          "llm"),
    _spec("--llm-output-tokens", "answer lengths: 128, 64-256 (uniform) or 128~32 (normal), capped by the request's "
          "max_new_tokens (default: the request's max_new_tokens, else 128)", None, None, "llm"),
    _spec("--llm-format", "the container whose bytes the streams copy: tgi (SSE events), lmi (JSON lines), openai "
          "(vLLM's SSE chat chunks) or auto (from the request: inputs -> tgi, messages -> openai)", None, None, "llm",
          choices=LLM_FORMATS),
    _spec("--llm-server-counts", "answers carry the server's token counts when the request asks (details, "
          "stream_options.include_usage): true (default) or false (never)", None, bool, "llm"),
    _spec("--llm-error-ratio", "share of streams that end half-way with their format's in-band error (TGI's error "
          "event, LMI's error token, vLLM's error chunk) (0-1, default 0)", None, float, "llm"),
    _spec("--llm-request-log", "append one JSON line per request received to this file (arrival time, prompt "
          "tokens, answer length asked, a hash of each whole --llm-block-tokens prompt block): what the server "
          "saw", None, None, "llm"),
    _spec("--llm-tokenizer", "a Hugging Face tokenizer.json (or its folder): prompts counted by it, as run "
          "--tokenizer counts them (prefill, usage counts, --llm-request-log); default: words and punctuation "
          "marks", None, None, "llm"),
    _spec("--llm-adapters", "LoRA adapters as inference components on the base component: a count N (adapter-1 ... "
          "adapter-N) or names (sql,chat); a request names one by InferenceComponentName and waits for its load when "
          "it is not in memory", None, None, "llm", metavar="N|NAME,..."),
    _spec("--llm-adapter-cache", "--llm-adapters: adapters in memory at once, least recently used unloaded first "
          "(default: all)", None, int, "llm", minimum=1),
    _spec("--llm-adapter-load-ms", "--llm-adapters: what loading an adapter takes, before its request's prefill "
          "(default 500)", None, float, "llm", **NOT_NEGATIVE),
    _spec("--llm-base-component", "--llm-adapters: the base inference component's name, answered without an adapter "
          "(default base)", None, None, "llm"),
    _spec("--llm-block-tokens", "prompt blocks of this many tokens (words without --llm-tokenizer): --llm-request-log "
          "hashes each whole block, the prefix cache keeps them (default 512)", None, int, "llm", minimum=1),
    _spec("--llm-prefix-cache-blocks", "automatic prefix caching: each worker keeps this many prompt blocks (least "
          "recently used evicted); a request's leading blocks found there are not prefilled (default 0: none)", None,
          int, "llm", minimum=0),
    # serverless emulation: defaults and ranges in sm_locust.endpoint.serverless.ServerlessConfig
    _spec("--serverless-memory-mb", "MemorySizeInMB, 1024-6144 in 1 GB steps: the model takes --service-time-ms x "
          "6144 / this (CPU share proportional to memory); turns the emulation on (default 2048 when another "
          "--serverless-* flag is given)", None, int, "serverless"),
    _spec("--serverless-max-concurrency", "MaxConcurrency, 1-200: instances serving at once across workers; a "
          "request beyond them is answered ThrottlingException (429) at once (default 20)", None, int, "serverless"),
    _spec("--idle-timeout-s", "an instance idle this long is reclaimed; its next request starts cold with "
          "--cold-start-ms (default 60)", None, float, "serverless"),
    _spec("--serverless-compute-share", "share of --service-time-ms that scales with the memory size (0-1, default 1)",
          None, float, "serverless"),
    _spec("--serverless-throttle-ms", "time before a throttled request is answered: the round trip a refusal costs a "
          "caller (default 10)", None, float, "serverless"),
    # multi-model endpoint emulation: defaults and ranges in sm_locust.endpoint.multimodel.MultiModelConfig
    _spec("--multi-model", "host --model-count models named model-0001.tar.gz ...: a request's TargetModel is loaded "
          "into memory before it runs (downloaded first unless still on disk), least recently used models unloaded "
          "when memory is full", False, bool, "multi_model", const=True),
    _spec("--model-count", f"models hosted (default 100, at most {MAX_TARGETS:,})", None, int, "multi_model",
          minimum=1, maximum=MAX_TARGETS),
    _spec("--model-size-mb", "each model's size in MB, or LO-HI for sizes drawn once per model (default 100)", None,
          None, "multi_model"),
    _spec("--instance-memory-mb", "memory the models share (default 4096)", None, float, "multi_model"),
    _spec("--instance-disk-mb", "disk for downloaded models (default: unlimited); a full disk deletes the least "
          "recently used", None, float, "multi_model"),
    _spec("--model-download-ms", "download time from S3 per model (default 500)", None, float, "multi_model"),
    _spec("--model-load-ms", "load time into memory per model (default 500)", None, float, "multi_model"),
    _spec("--model-unload-ms", "unload time per model unloaded to make room; the load waits for it (default 0)", None,
          float, "multi_model"),
    _spec("--model-cache-setting", "MultiModelConfig.ModelCacheSetting: Disabled unloads a model after each request "
          "(default Enabled)", None, None, "multi_model", convert=str.capitalize, choices=("Enabled", "Disabled")),
    _spec("--model-ready-timeout-s", "a request still waiting for its model after this long is answered "
          "ModelNotReadyException (default 60, SageMaker's)", None, float, "multi_model"),
    # inference components
    _spec("--inference-components", "host these components, e.g. a:2,b:1: each with its own copies (requests served "
          "at once, across workers) and optionally its own service time in ms (default --service-time-ms)", None,
          None, "components", metavar="NAME:COPIES[:MS],..."),
    # fleet emulation: defaults and ranges in sm_locust.endpoint.fleet.FleetConfig and scaling.policy
    _spec("--instances", "instances serving at the start, each with its own --max-concurrency slots; turns the "
          "emulation on", None, **_instances()),
    _spec("--target-value", "target-tracking policy: the metric's target per instance (InvocationsPerInstance: per "
          "minute); turns autoscaling on (needs --max-instances)", None, float, "fleet"),
    _spec("--min-instances", "the policy's minimum (default --instances)", None, **_instances()),
    _spec("--max-instances", f"the policy's maximum (at most {MAX_INSTANCES:,})", None, **_instances()),
    _spec("--scaling-metric", "SageMakerVariantInvocationsPerInstance (default, one-minute periods) or "
          "SageMakerVariantConcurrentRequestsPerModelHighResolution (10-s periods)", None, None, "fleet"),
    _spec("--scale-out-cooldown-s", "ScaleOutCooldown (default 300, AWS's)", None, float, "fleet"),
    _spec("--scale-in-cooldown-s", "ScaleInCooldown (default 300, AWS's)", None, float, "fleet"),
    _spec("--instance-start-s", "seconds from a scale-out decision until its instances serve (default 240)", None,
          float, "fleet"),
    _spec("--time-scale", "emulated seconds per real second: the control loop, its periods, cooldowns and instance "
          "starts run this much faster (requests do not); everything reported is in emulated seconds (default 1)",
          None, float, "fleet", above=0, maximum=MAX_TIME_SCALE),
    _spec("--routing", "how requests spread over the instances: random (default) or least-outstanding", None, None,
          "fleet"),
    # asynchronous inference: the settings in sm_locust.endpoint.asyncqueue.AsyncEndpointConfig
    _spec("--async", "queue InvokeEndpointAsync, read its input from S3, write the answer to --async-output-path",
          False, bool, "async", const=True),
    _spec("--async-output-path", "S3OutputPath (needs --async)", None, None, "async", metavar="S3_URI"),
    _spec("--async-failure-path", "S3FailurePath (default: the output path's failures/)", None, None, "async",
          metavar="S3_URI"),
    _spec("--async-max-concurrent", "MaxConcurrentInvocationsPerInstance: queue workers (default 1)", None, int,
          "async", minimum=1, maximum=MAX_ASYNC_CONCURRENT),
    _spec("--async-s3-url", "S3 API URL, e.g. a moto server (default: AWS's)", None, None, "async"),
    _spec("--async-success-topic", "NotificationConfig SuccessTopic: an SNS topic ARN each result is announced to",
          None, None, "async", metavar="TOPIC_ARN"),
    _spec("--async-error-topic", "NotificationConfig ErrorTopic: an SNS topic ARN each failure is announced to",
          None, None, "async", metavar="TOPIC_ARN"),
    _spec("--async-sns-url", "SNS API URL, e.g. a moto server (default: AWS's)", None, None, "async"),
    # the async variant's instances and autoscaling: sm_locust.endpoint.asyncscaling.AsyncScalingConfig
    _spec("--async-max-instances", "instances the async variant may run, each with --async-max-concurrent workers; "
          "turns the instance emulation on (MaxCapacity)", None, int, "async", minimum=1, maximum=MAX_INSTANCES),
    _spec("--async-instances", "instances in service at the start, 0 for an endpoint scaled to zero (default "
          "--async-min-instances)", None, int, "async", minimum=0, maximum=MAX_INSTANCES),
    _spec("--async-min-instances", "MinCapacity, 0 allowed (default 0)", None, int, "async", minimum=0,
          maximum=MAX_INSTANCES),
    _spec("--async-target-backlog", "target tracking on ApproximateBacklogSizePerInstance: its TargetValue",
          None, float, "async", above=0),
    _spec("--async-scale-from-zero", "add the step scaling policy on HasBacklogWithoutCapacity (+1 instance when "
          "requests wait and none serves)", False, bool, "async", const=True),
    _spec("--async-instance-start-s", "seconds from a scale-out decision until its instances serve (default 240)",
          None, float, "async", minimum=0),
    _spec("--async-time-scale", "emulated seconds per real second of the async control loop (default 1)", None,
          float, "async", above=0, maximum=MAX_TIME_SCALE),
    _spec("--async-scale-out-cooldown-s", "ScaleOutCooldown, and the step policy's Cooldown (default 300)", None,
          float, "async", minimum=0),
    _spec("--async-scale-in-cooldown-s", "ScaleInCooldown (default 300)", None, float, "async", minimum=0),
    # identity and metrics
    _spec("--endpoint-name", "answer only this endpoint name (default: any name)", None, None, "identity"),
    _spec("--variant-name", "production variant reported back", "AllTraffic", None, "identity"),
    _spec("--cloudwatch-url", "publish the metrics a SageMaker endpoint has (Invocations, ModelLatency, "
          "CPUUtilization, ...) to this CloudWatch API URL, e.g. a moto server (docs/endpoint.md)", None, None,
          "identity"),
    _spec("--metrics-interval", "seconds between two publications with --cloudwatch-url", 10.0, float, "identity",
          name="metrics_interval_s", metavar="SECONDS", minimum=1),
    _spec("--metrics-endpoint-name", "EndpointName dimension of the metrics (default: --endpoint-name, else "
          "sm-locust-local)", None, None, "identity"),
)

BY_DEST: dict[str, OptionSpec] = {spec.dest: spec for spec in OPTIONS}  # for the defaults, at import


def by_dest() -> dict[str, OptionSpec]:
    """The options by dest, read when a value is checked (so a test that changes a spec changes every check)."""
    return {spec.dest: spec for spec in OPTIONS}
