"""The sweep file's `load:` section -> the options and `LoadSettings` of one `sm-locust run`.

`load:` takes `sm-locust run`'s options in snake_case (`payload`, `step_seconds`,
`latency_slo_ms`, `users`, `run_time`, `shape`, ...), checked here once with the same rules the
run command applies, so a typo fails before anything is deployed. Differences from `sm-locust run`:

- the default shape is `plateau` (unless `users`, `shape` or `target_rps` says otherwise): a sweep
  compares capacities;
- the objective's SLO, percentile and error budget become the search's `latency_slo_ms`,
  `slo_percentile` and `max_error_rate` unless `load:` sets them, so the plateau each configuration
  reports is the highest load that still meets the objective;
- constant users all start at once (spawn_rate defaults to `users`, not 1 per second): the
  sweep measures the load, not a ramp;
- relative paths (`payload`, `traffic_pattern`) are relative to the sweep file;
- `endpoint_name` and `endpoint_url` come from the deployer, per configuration.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sm_locust.config.options import OptionSpec, SageMakerSettings, all_option_specs
from sm_locust.core.launch import LoadSettings
from sm_locust.errors import UsageError
from sm_locust.payloads.options import prepare_payloads
from sm_locust.shapes import SHAPES
from sm_locust.shapes.settings import ShapeSettings, parse_seconds
from sm_locust.sweep.objective import Objective
from sm_locust.sweep.validate import Checker

RUN_KEYS = ("users", "spawn_rate", "run_time", "shape", "processes", "locust_args")
SET_BY_DEPLOYER = ("endpoint_name", "endpoint_url")
PATH_KEYS = ("payload", "traffic_pattern")
SEARCH_SHAPES = ("plateau", "step", "phases")
DEFAULT_RUN_TIME = "1m"  # sm-locust run's default without a shape
PLATEAU_STEPS_GUESS = 10  # for estimates only: the adaptive search takes ~2 log2(knee users) steps
LOCUST_OVERHEAD_S = 6.0  # start and stop of the Locust process, per configuration (measured here: 4-6 s)


@dataclass
class LoadPlan:
    """What every configuration's run is asked, minus the endpoint (which the deployer gives)."""

    options: dict[str, Any]  # every sm-locust option by dest: defaults overlaid with the file's
    given: dict[str, Any]  # what the file (or the objective) set, for the configuration key and options.json
    load: LoadSettings
    shape: str | None
    shape_settings: ShapeSettings = field(repr=False)
    source: str = "<sweep>"

    def namespace(self, endpoint_name: str, endpoint_url: str = "", region: str | None = None) -> SimpleNamespace:
        values = dict(self.options)
        values.update(endpoint_name=endpoint_name, endpoint_url=endpoint_url or "")
        if region and not values.get("region"):
            values["region"] = region
        return SimpleNamespace(**values)

    def settings(self, endpoint_name: str, endpoint_url: str = "", region: str | None = None) -> SageMakerSettings:
        return SageMakerSettings.from_options(self.namespace(endpoint_name, endpoint_url, region)).validate()

    def expected_test_s(self) -> float:
        """A guess at one run's wall time (plan estimates): the run time or budget when given, the
        step ramp's length, or PLATEAU_STEPS_GUESS steps for the adaptive search."""
        s = self.shape_settings
        if self.load.run_time:
            seconds = parse_seconds(self.load.run_time, "run_time")
        elif s.max_duration_s:
            seconds = s.max_duration_s
        elif self.shape == "step":
            seconds = s.step_schedule().duration
        elif self.shape == "phases":
            seconds = s.schedule().duration_s
        elif self.shape == "plateau":
            seconds = PLATEAU_STEPS_GUESS * s.step_seconds
        else:
            seconds = parse_seconds(DEFAULT_RUN_TIME, "run_time")
        return float(seconds or 0.0) + LOCUST_OVERHEAD_S


def _specs() -> dict[str, OptionSpec]:
    return {spec.dest: spec for spec in all_option_specs() if spec.forward}


def _convert(spec: OptionSpec, value: Any, path: str, check: Checker) -> Any:
    """An option's value from the file, by the option's type (numbers by the one numeric rule)."""
    if value is None:
        return None
    if spec.type is bool:
        try:
            return spec.argparse_kwargs()["type"](value)
        except ValueError:
            raise check.error(path, f"expected true or false, got {value!r}") from None
    if spec.type is int:
        value = check.integer(path, value)
    elif spec.type is float:
        value = check.number(path, value)
    elif spec.type is None:
        if isinstance(value, (dict, list)):
            raise check.error(path, f"expected text or a number, got {value!r}")
        value = str(value)
    else:
        try:
            value = spec.type(value)
        except (TypeError, ValueError) as exc:
            raise check.error(path, f"{exc}") from None
    if spec.choices and value not in spec.choices:
        raise check.error(path, f"unknown {value!r}; choose one of: {', '.join(map(str, spec.choices))}")
    return value


def _resolve_path(value: str, base_dir: Path) -> str:
    candidate = Path(value).expanduser()
    if not candidate.is_absolute() and (base_dir / candidate).exists():
        return str((base_dir / candidate).resolve())
    return str(candidate) if candidate.is_absolute() else value


def parse_load(load: dict[str, Any], objective: Objective, *, source: str = "<sweep>",
               base_dir: Path | None = None) -> LoadPlan:
    """Check `load:` and build the run's options; UsageError naming `load.<key>` when wrong."""
    base_dir = base_dir or Path.cwd()
    check = Checker(source)
    specs = _specs()
    valid = sorted(set(specs) | set(RUN_KEYS))
    given: dict[str, Any] = {}
    run: dict[str, Any] = {}
    for key, value in load.items():
        path = f"load.{key}"
        if key in SET_BY_DEPLOYER:
            raise check.error(path, "set by the deployer for each configuration; leave it out")
        if key in RUN_KEYS:
            run[key] = value
            continue
        if key not in specs:
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise check.error(path, f"unknown key; {hint}load takes `sm-locust run` options in snake_case "
                              f"({', '.join(valid)})")
        value = _convert(specs[key], value, path, check)
        if key in PATH_KEYS and isinstance(value, str) and value:
            value = _resolve_path(value, base_dir)
        given[key] = value

    shape = None
    if run.get("shape") is not None:
        try:
            shape = SHAPES.canonical(str(run["shape"]))
        except UsageError as exc:
            raise check.prefixed("load.shape", exc) from None
    users = run.get("users")
    if users is not None:
        users = run["users"] = check.integer("load.users", users, minimum=1,
                                             expected="expected a whole number of users (1 or more)")
    if shape is None and given.get("target_rps") is not None:
        shape = "open"
    if shape is None and users is None:
        shape = "plateau"  # a sweep compares capacities
    if users is not None and shape in ("plateau", "phases", "open"):
        raise check.error("load.users", f"conflicts with shape {shape} (the shape decides the load); "
                          "leave users out, or set shape: step")
    if shape in SEARCH_SHAPES:
        if objective.slo_ms is not None and given.get("latency_slo_ms") is None:
            given["latency_slo_ms"] = float(objective.slo_ms)
        if given.get("slo_percentile") is None and objective.slo_ms is not None:
            given["slo_percentile"] = f"{objective.percentile:g}"
        if given.get("max_error_rate") is None:
            given["max_error_rate"] = float(objective.max_error_rate)

    options = {dest: spec.default for dest, spec in specs.items()}
    options.update(given)
    spawn_rate = run.get("spawn_rate")
    if spawn_rate is not None:
        spawn_rate = check.number("load.spawn_rate", spawn_rate, above=0,
                                  expected="expected a number of users per second (more than 0)")
    options["spawn_rate"] = spawn_rate
    try:
        shape_settings = ShapeSettings.from_options(SimpleNamespace(**options)).check(shape)
    except UsageError as exc:
        raise check.prefixed("load", exc) from None

    run_time = run.get("run_time")
    if run_time is not None:
        run_time = str(run_time)
        try:
            parse_seconds(run_time, "run_time")
        except UsageError as exc:
            raise check.prefixed("load.run_time", exc) from None
    elif shape in (None, "open") and not (shape == "open" and shape_settings.max_duration_s):
        run_time = DEFAULT_RUN_TIME
    processes = run.get("processes")
    if processes is not None:
        rule = "worker processes N >= 1, or -1 for one per core"
        processes = check.integer("load.processes", processes, minimum=-1, expected=rule)
        if processes == 0:
            raise check.error("load.processes", f"{rule}, got 0")
    locust_args = run.get("locust_args") or []
    if not isinstance(locust_args, list) or not all(isinstance(a, (str, int, float)) for a in locust_args):
        raise check.error("load.locust_args", "a list of Locust command-line arguments, e.g. [--stop-timeout, 5]")
    load_settings = LoadSettings(
        users=users if users is not None else (None if shape else 1),
        spawn_rate=float(spawn_rate) if spawn_rate is not None else (100.0 if shape else float(users or 1)),
        run_time=run_time, shape=shape, processes=processes, quiet=True, progress_every_s=0.0,
        locust_args=[str(a) for a in locust_args],
    )
    return LoadPlan(options, {**given, **{k: v for k, v in run.items() if v is not None}}, load_settings, shape,
                    shape_settings, source)


def check_payload(plan: LoadPlan) -> None:
    """Encode the payload once, as `sm-locust run` does before it starts: a bad payload fails here."""
    if not plan.options.get("payload"):
        raise Checker(plan.source).error("load.payload", "missing; give the request body source (a file, .jsonl, "
                                         "folder, .npy/.npz or module:function; relative paths are relative to the "
                                         "sweep file)")
    namespace = plan.namespace("sweep-check")
    try:
        prepare_payloads(SageMakerSettings.from_options(namespace).validate(), namespace)
    except UsageError as exc:
        raise Checker(plan.source).prefixed("load", exc) from None
