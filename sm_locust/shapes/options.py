"""Options of the load shapes (shown in the web UI whatever shape is picked).

Defaults that depend on the shape are None here ("the shape's default"): `--max-users` is 10 for
the step shape and 1000 for the plateau search; `--max-error-rate` is 0.05 for the plateau and
phases shapes and off for the step shape. `--max-error-rate` is the run's one error-rate limit:
the shapes judge each step by it and gates (`sm-locust smoke`) the whole run (docs/plateau.md).
`sm_locust.shapes.settings` parses and checks them all.
"""

from __future__ import annotations

from sm_locust.options import OptionSpec

OPTIONS: list[OptionSpec] = [
    OptionSpec("--start-users", "SM_LOCUST_START_USERS", 1, "step/plateau shape: users in the first step", int),
    OptionSpec("--step-users", "SM_LOCUST_STEP_USERS", 1, "step shape: users added each step", int),
    OptionSpec("--step-seconds", "SM_LOCUST_STEP_SECONDS", 30.0,
               "step shape: seconds each step is held; plateau shape: the longest a step is held (it ends once stable)",
               float),
    OptionSpec("--min-step-seconds", "SM_LOCUST_MIN_STEP_SECONDS", 10.0,
               "plateau shape: the shortest a step is held; it ends at the first tick after this where its throughput "
               "is stable (3 sub-windows within 10 %%), else at --step-seconds", float),
    OptionSpec("--max-users", "SM_LOCUST_MAX_USERS", None,
               "step shape: users in the last step (default 10); plateau: most users to try (default 1000)", int),
    OptionSpec("--stop-at-knee", "SM_LOCUST_STOP_AT_KNEE", False,
               "step shape: stop once throughput gains < 5 %% over 4 steps", bool),
    OptionSpec("--latency-slo-ms", "SM_LOCUST_LATENCY_SLO_MS", None,
               "latency SLO in ms: a step whose --slo-percentile exceeds it is not "
               "acceptable (and stops the step shape)",
               float),
    OptionSpec("--slo-percentile", "SM_LOCUST_SLO_PERCENTILE", "95", "percentile the SLO applies to: 95, p99, 99.9"),
    OptionSpec("--max-error-rate", "SM_LOCUST_MAX_ERROR_RATE", None,
               "the run's error-rate limit, a fraction, e.g. 0.05: a step above it is not acceptable (plateau/phases "
               "default 0.05; step: off); gates (sm-locust smoke) fail a run above it", float),
    OptionSpec("--max-duration", "SM_LOCUST_MAX_DURATION", None, "stop the search after this long: 600, 90s, 10m"),
    OptionSpec("--max-invocations", "SM_LOCUST_MAX_INVOCATIONS", None, "stop the search after this many requests", int),
    OptionSpec("--search-mode", "SM_LOCUST_SEARCH_MODE", "users",
               "plateau shape: step the user count (closed loop) or the arrival rate (open loop)",
               choices=("users", "rate")),
    OptionSpec("--start-rps", "SM_LOCUST_START_RPS", 10.0, "plateau shape, rate mode: first arrival rate (req/s)",
               float),
    OptionSpec("--max-rps", "SM_LOCUST_MAX_RPS", 5000.0,
               "plateau shape, rate mode: highest arrival rate to try (req/s)",
               float),
    OptionSpec("--traffic-pattern", "SM_LOCUST_TRAFFIC_PATTERN", None,
               "phases shape: Inference Recommender TrafficPattern (+ StoppingConditions), JSON text or file"),
    OptionSpec("--target-rps", "SM_LOCUST_TARGET_RPS", None, "open shape: constant arrival rate to send (req/s)",
               float),
    OptionSpec("--traffic", "SM_LOCUST_TRAFFIC", None,
               "traffic shape: open-loop rate phases, a YAML/JSON file or text: [{duration_s: 300, rps: 20}, ...] "
               "(docs/autoscaling.md)"),
    OptionSpec("--time-scale", "SM_LOCUST_TIME_SCALE", None,
               "traffic shape: emulated seconds per real second of a local fleet (sm-locust serve --time-scale): "
               "phase durations are divided by it (default 1; sm-locust run reads it from a local fleet)", float),
    OptionSpec("--arrival", "SM_LOCUST_ARRIVAL", None, "open loop: arrival process, constant (default) or poisson"),
    OptionSpec("--rate-per-user", "SM_LOCUST_RATE_PER_USER", None,
               "open loop: req/s each OpenLoopUser adds (default 1; the user count is rate / this)", float),
    OptionSpec("--max-in-flight", "SM_LOCUST_MAX_IN_FLIGHT", None,
               "open loop: most outstanding requests per process (default 1000); sends past it are dropped and counted",
               int),
]
