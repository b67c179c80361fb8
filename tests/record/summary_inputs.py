"""Fixed inputs of `record.summary.build_summary` that reach every section it writes (closed-loop and
open-loop steps, a plateau, per-name figures, latency series, back-offs, hours and the sections other
modules add): tests/data/summaries/built-*.json holds what the builder of that date wrote from them."""

from __future__ import annotations

from sm_locust.measure.steady import MODE_RATE, measure_step
from sm_locust.measure.timeline import Second
from sm_locust.record.summary import step_record

T0 = 1_704_067_200.0


def _closed(cpu: float = 30.0) -> list[Second]:
    out = []
    for i in range(24):
        users = 2 if i < 12 else 4
        requests = 40 + (i * 7) % 9
        out.append(Second(t=T0 + i + 1, users=users, spawning=False, requests=requests, failures=i % 5 == 0,
                          hist={20 + i % 3: requests - 4, 45: 4}, client_cpu_pct=cpu + i % 4))
    return out


def _open() -> list[Second]:
    out = []
    for i in range(24, 40):
        out.append(Second(t=T0 + i + 1, users=0, spawning=False, requests=50, failures=0, hist={30: 48, 60: 2},
                          target_rate=50.0, sent=50, late=1 if i % 4 == 0 else 0, dropped=0, client_cpu_pct=95.0))
    return out


LLM = {"requests": 40, "ttft_p50_ms": 12, "ttft_p95_ms": 20, "ttft_p99_ms": 22, "itl_p50_ms": 3.5, "itl_p95_ms": 5,
       "itl_p99_ms": 6, "tpot_p50_ms": 3.4, "tpot_p95_ms": 4.9, "e2e_p50_ms": 120, "e2e_p95_ms": 180,
       "output_tokens": 4000, "input_tokens": None, "output_tokens_per_s": 99.4,
       "request_output_tokens_per_s_p50": 30.0, "tokens_source": "counted", "unrecognised_streams": 0,
       "ci95": {"ttft_p95_ms": [18, 23], "output_tokens_per_s": None}}


def constant_inputs() -> dict:
    """A closed-loop run without a search whose second step was client-bound: steps measured from the seconds."""
    return {"endpoint": "fixture-ep", "started_at": T0, "ended_at": T0 + 24.5,
            "totals": {"requests": 1060, "failures": 5, "p50_ms": 21, "p95_ms": 45, "p99_ms": 45},
            "errors": {"ModelError": 5}, "seconds": _closed(cpu=93.0), "complete": False}


def inputs() -> dict:
    """build_summary's keyword arguments: a search with a closed-loop and an open-loop step, every section."""
    closed, opened = _closed(), _open()
    steps = [step_record(measure_step(closed[:12])), step_record(measure_step(opened, mode=MODE_RATE))]
    steps[0]["llm"] = dict(LLM, ci95=None)
    return {
        "endpoint": "fixture-ep",
        "started_at": T0,
        "ended_at": T0 + 40.25,
        "totals": {"requests": 1790, "failures": 5, "p50_ms": 21, "p95_ms": 45, "p99_ms": 60, "in_flight_at_stop": 2,
                   "ci95": {"rps": [43.1, 46.2], "goodput_rps": [43.0, 46.1], "p50_ms": [21, 22],
                            "p95_ms": [44, 46], "p99_ms": None}},
        "errors": {"ModelError": 2, "ThrottlingException": 3},
        "seconds": (),
        "steps": steps,
        "plateau": {"capacity_rps": 45.5, "capacity_ci95": [44.0, 47.0], "capacity_step": 1, "knee_step": 0,
                    "inconclusive": False, "inconclusive_reason": None, "capacity_load": 4, "capacity_stable": True,
                    "users": 2, "rps": 44.1, "goodput_rps": 43.0, "p50_ms": 21, "p95_ms": 45, "p99_ms": 45,
                    "reason": "throughput gain < 5 % over 2 steps", "stable": True, "reached": True,
                    "bound": "throughput", "client_bound": False, "client_reason": None, "stop_reason": None,
                    "mode": "users", "load": 2, "rate": None, "error_rate": 0.02, "model_knee_users": 1.8,
                    "steps": 2, "text": "plateau: capacity 46 req/s (±2) at step 2: 4 users"},
        "extra": {"payload": {"source": "body.json", "count": 1, "min_bytes": 10, "avg_bytes": 10, "max_bytes": 10},
                  "stop_reason": "run time 40 s reached (-t)", "llm": LLM,
                  "future_section": {"added": "by a later version"}},
        "open_loop": {"scheduled": 800, "sent": 800, "late": 4, "dropped": 0, "late_fraction": 0.005,
                      "dropped_fraction": 0.0},
        "by_name": {"InvokeEndpoint": {"requests": 1790, "failures": 5, "successes": 1785, "rps": 44.5,
                                       "goodput_rps": 44.3, "p50_ms": 21, "p95_ms": 45, "p99_ms": 60,
                                       "request_types": ["POST"], "errors": {"ModelError": 2}}},
        "latency_series": {"TTFT": {"count": 12, "p50_ms": 5, "p95_ms": 9, "p99_ms": 9, "avg_ms": 5.5}},
        "backoff": {"count": 1, "seconds": 0.05, "first_s": 0.05, "max_s": 1.0},
        "hours": [{"hour": 1, "start": "2024-01-01T00:00:00.000Z", "end": "2024-01-01T00:00:40.250Z",
                   "duration_s": 40, "users": 0, "users_max": 4, "requests": 1790, "failures": 5, "successes": 1785,
                   "rps": 44.5, "goodput_rps": 44.3, "error_rate": 0.0028, "p50_ms": 21, "p95_ms": 45,
                   "p99_ms": 60, "client_cpu_pct": 50.2, "backoffs": 1, "errors": {"ModelError": 2}}],
        "complete": True,
    }
