"""`sm_locust.run(...)`: `sm-locust run` from Python, returning a `RunResult`.

The keywords are the CLI's options (`api/options.py`) and the run is the CLI's run core
(`core.plan.plan_run`, `core.start.start_run`), so the two cannot drift apart. The API adds
`predictor=` / `data=` (api/predictor.py), a progress display (api/progress.py), and the stop
button: a notebook interrupt is forwarded to Locust once and `run` returns the result with
`.interrupted` (KeyboardInterrupt if nothing was written yet). Errors are the CLI's `UsageError` /
`RunError`, raised. The calling process never imports Locust or gevent (tests/api/test_api_run.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sm_locust.api.options import run_arguments
from sm_locust.api.predictor import read_predictor, request_body
from sm_locust.api.progress import RunProgress, make_display
from sm_locust.api.result import RunResult
from sm_locust.core.arguments import RunArguments
from sm_locust.core.folder import check_out_dir, discard_out_dir, holds_run, make_out_dir
from sm_locust.core.plan import plan_run
from sm_locust.core.start import start_run
from sm_locust.core.verdict import every_request_failed
from sm_locust.errors import Interrupted, RunError, UsageError
from sm_locust.record.folders import choose_out_dir
from sm_locust.record.runfolder import SUMMARY_JSON
from sm_locust.shapes.settings import parse_seconds
from sm_locust.util.arguments import require_path
from sm_locust.util.outputs import write_atomic

PAYLOAD_FILE = "payload.body"  # a `data=` body: no suffix the payload loaders read specially, sent verbatim
PROGRESS_EVERY_S = 1.0


def run(endpoint_name: str | None = None, *, predictor: object = None, data: object = None, payload: str | None = None,
        shape: str | None = None, out: str | Path | None = None, progress: bool | str = True,
        locust_args: Iterable[str] | None = None, **options: object) -> RunResult:
    """Run a headless load test as `sm-locust run` does and return its RunResult.

    `endpoint_name`, `payload`, `shape`, `out` and every other keyword are the options of `sm-locust
    run` with underscores (`endpoint_url`, `users`, `run_time`, `latency_slo_ms`, `transport`, ...),
    with the same defaults. `predictor`: a SageMaker SDK Predictor (or an object with its attributes);
    `data`: one request body (serialized by the predictor's serializer; without a predictor bytes and
    text are sent as they are, a dict or list as JSON). `progress`: True (a line updating in place, or
    a tqdm bar when tqdm is installed), "line", "tqdm" or False. `locust_args`: arguments for Locust
    itself (what follows `--` on the command line).
    """
    require_path("out", out)
    given: dict[str, object] = {**options, "endpoint_name": endpoint_name, "payload": payload, "shape": shape,
                             "out": None if out is None else str(out)}
    env = _take_predictor(given, predictor) if predictor is not None else {}
    body = None
    if data is not None:
        if payload is not None:
            raise UsageError("pass data= (one request body) or payload= (a payload source), not both")
        body, content_type = request_body(data, predictor)
        if content_type and given.get("content_type") is None:
            given["content_type"] = content_type
    arguments = run_arguments(given, locust_args)  # every name and value, by the options' own specs
    state = RunProgress(total_s=_planned_seconds(arguments), interval_s=PROGRESS_EVERY_S)
    display = make_display(progress, state.total_s)  # a bad progress= is refused before anything is written
    out = arguments.run.out
    out_dir = Path(out) if out else choose_out_dir(None, arguments.options.endpoint_name or "")
    arguments = dataclasses.replace(arguments, run=arguments.run.replace(out=str(out_dir)))
    created, started = False, time.monotonic()

    def echo(line: str) -> None:
        if state.feed(line):
            display.update(state)

    try:
        if body is not None:
            created = _write_body(arguments, out_dir, body)
            arguments = dataclasses.replace(
                arguments, options=arguments.options.replace(payload=str(out_dir / PAYLOAD_FILE)))
        planned = plan_run(arguments, progress_every_s=PROGRESS_EVERY_S)
        if planned.repeat > 1:  # one RunResult is one run folder
            raise UsageError("repeat: the Python API runs one test and returns its result; call sm_locust.run(...) "
                             "once per repetition, or use `sm-locust run --repeat N` (repeat.json)")
        _, summary = start_run(planned, echo=echo, env=env)
    except Interrupted as exc:
        if not (out_dir / SUMMARY_JSON).is_file():
            display.close(exc.message)
            raise KeyboardInterrupt(exc.message) from None
        display.close(f"stopped after {state.elapsed_s:.0f} s; what was measured is in {out_dir}/")
        return RunResult(out_dir, interrupted=exc.message)
    except BaseException as exc:
        if created and not holds_run(out_dir):  # failed before Locust wrote anything: leave no folder
            discard_out_dir(out_dir, created)
        display.close(f"failed: {exc}" if str(exc) else f"failed: {type(exc).__name__}")
        raise
    failed = every_request_failed(summary, out_dir)
    display.close(f"done in {time.monotonic() - started:.0f} s; results in {out_dir}/" if not failed else failed)
    if failed:
        raise RunError(f"{failed}; what was measured is in {out_dir}/")
    return RunResult(out_dir)


def _take_predictor(given: dict[str, Any], predictor: object) -> dict[str, str]:
    """Fill the options a Predictor determines (what the caller passed wins, except another endpoint);
    return the environment carrying its credentials to the Locust child."""
    target = read_predictor(predictor)
    if target.env and given.get("aws_profile"):
        raise UsageError("predictor= brings its session's credentials; drop aws_profile= (or predictor=)")
    for name, value in target.options().items():
        if given.get(name) is None:
            given[name] = value
        elif name == "endpoint_name" and given[name] != value:
            raise UsageError(f"endpoint_name={given[name]!r} differs from the predictor's endpoint {value!r}; "
                             "pass one of them")
    return target.env


def _write_body(arguments: RunArguments, out_dir: Path, body: bytes) -> bool:
    """The data= body into the run folder (checked as --out is), to be the run's payload; True when this
    made the folder."""
    check_out_dir(out_dir, overwrite=arguments.run.overwrite)
    created = make_out_dir(out_dir)
    write_atomic(out_dir / PAYLOAD_FILE, body)  # every file of a run folder is written whole
    return created


def _planned_seconds(arguments: RunArguments) -> float | None:
    """How long the run is planned to take (its -t, else a shape's --max-duration), for a progress bar."""
    for value, flag in ((arguments.run.run_time, "--run-time"), (arguments.options.max_duration, "--max-duration")):
        if value:
            try:
                return parse_seconds(value, flag)
            except UsageError:
                return None  # start_run names the bad value
    return None
