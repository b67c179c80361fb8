"""The sweep file's `load:` section -> the options and `LoadSettings` of one `sm-locust run`.

`load:` takes `sm-locust run`'s options in snake_case, checked once by the run command's own specs
and rules (`OptionSpec.parse`, `core.rules`, `core.plan.locust_load`), so a typo fails before
anything is deployed; values are typed. Unlike `sm-locust run`: the default shape is `plateau`; the
objective's SLO, percentile and error budget feed the search; constant users start at once; relative
paths are relative to the sweep file; `repeat: N` quotes the median run; `endpoint_name` and
`endpoint_url` come from the deployer (docs/sweep.md).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.options import Options, OptionSpec, all_option_specs, parse_options
from sm_locust.core.child import LoadSettings
from sm_locust.core.plan import locust_load
from sm_locust.core.rules import DEFAULT_RUN_TIME, check_users, chosen_shape
from sm_locust.errors import UsageError
from sm_locust.measure.steady import steady_samples
from sm_locust.payloads.options import prepare_payloads
from sm_locust.shapes.settings import ShapeSettings, parse_seconds
from sm_locust.sweep.objective import Objective
from sm_locust.sweep.shortrun import ShortRun, Window, short_run
from sm_locust.sweep.validate import Checker

RUN_KEYS = ("users", "spawn_rate", "run_time", "shape", "processes", "locust_args", "repeat")
SET_BY_DEPLOYER = ("endpoint_name", "endpoint_url")
PATH_KEYS = ("payload", "traffic_pattern")
SEARCH_SHAPES = ("plateau", "step", "phases")
FIXED_LENGTH_SHAPES = (None, "open")  # one load for the run time: constant users, a constant open-loop rate
PLATEAU_STEPS_GUESS = 10  # for estimates only: the adaptive search takes ~2 log2(knee users) steps
LOCUST_OVERHEAD_S = 6.0  # start and stop of the Locust process, per configuration (measured here: 4-6 s)


@dataclass
class LoadPlan:
    """What every configuration's run is asked, minus the endpoint (which the deployer gives)."""

    options: Options  # every sm-locust option, parsed: defaults overlaid with the file's
    given: dict[str, Any]  # what the file (or the objective) set, for the configuration key and options.json
    load: LoadSettings
    shape: str | None
    shape_settings: ShapeSettings = field(repr=False)
    source: str = "<sweep>"
    repeat: int = 1  # runs of each configuration's test (record/repeat.py)

    def run_options(self, endpoint_name: str, endpoint_url: str = "", region: str | None = None,
                    **changes: object) -> Options:
        """The options of one configuration's run: the endpoint the deployer gave, the region unless
        `load:` names one, and a kind's own `changes` (by dest)."""
        extra: dict[str, object] = {"endpoint_name": endpoint_name, "endpoint_url": endpoint_url or None}
        if region and not self.options.region:
            extra["region"] = region
        return self.options.replace(**extra, **changes)

    def settings(self, endpoint_name: str, endpoint_url: str = "", region: str | None = None) -> SageMakerSettings:
        return SageMakerSettings.from_options(self.run_options(endpoint_name, endpoint_url, region)).validate()

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
        return (float(seconds or 0.0) + LOCUST_OVERHEAD_S) * self.repeat

    def short_run(self) -> ShortRun | None:
        """The plan's note when a fixed-length load (`run_time` with constant users or the open
        shape) leaves each test's steady window too few seconds for a useful rate interval
        (`sweep.shortrun`); None for a search or a pattern, which decide their own steps."""
        if not self.load.run_time or self.shape not in FIXED_LENGTH_SHAPES:
            return None
        run_s = float(parse_seconds(self.load.run_time, "run_time") or 0.0)
        if self.shape_settings.max_duration_s:  # the open shape stops at the sooner of the two
            run_s = min(run_s, float(self.shape_settings.max_duration_s))
        return short_run(f"load.run_time {self.load.run_time}", run_s, [Window("per test", "rate", steady_samples)])


def _specs() -> dict[str, OptionSpec]:
    return {spec.dest: spec for spec in all_option_specs() if spec.forward}


def _convert(spec: OptionSpec, value: object, path: str, check: Checker) -> Any:
    """An option's value from the file: of the option's type as YAML typed it (a number is a number,
    true/false a bool), then by the option's own rule (`OptionSpec.parse`: its range, choices,
    vocabulary), worded under `path`."""
    if value is None:
        return None
    if spec.type is bool and not isinstance(value, bool):
        raise check.error(path, f"expected true or false, got {value!r}")
    if spec.type is int:
        value = check.integer(path, value)
    elif spec.type is float:
        value = check.number(path, value)
    elif isinstance(value, (dict, list)):
        raise check.error(path, f"expected text or a number, got {value!r}")
    try:
        return spec.parse(value, name="")
    except UsageError as exc:
        raise check.error(path, exc.message.strip()) from None


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
    run: dict[str, object] = {}
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

    try:
        shape = chosen_shape(None if run.get("shape") is None else str(run["shape"]),
                             target_rps=given.get("target_rps"), traffic=given.get("traffic"))
    except UsageError as exc:
        raise check.prefixed("load.shape", exc) from None
    users = run.get("users")
    if users is not None:
        users = run["users"] = check.integer("load.users", users, minimum=1,
                                             expected="expected a whole number of users (1 or more)")
    if shape is None and users is None:
        shape = "plateau"  # a sweep compares capacities
    try:
        check_users(users, shape, word=lambda key: f"load.{key}")
    except UsageError as exc:
        raise check.error("", exc.message) from None
    if shape in SEARCH_SHAPES:
        if objective.slo_ms is not None and given.get("latency_slo_ms") is None:
            given["latency_slo_ms"] = float(objective.slo_ms)
        if given.get("slo_percentile") is None and objective.slo_ms is not None:
            given["slo_percentile"] = float(objective.percentile)
        if given.get("max_error_rate") is None:
            given["max_error_rate"] = float(objective.max_error_rate)

    options = parse_options(given)
    spawn_rate = run.get("spawn_rate")
    if spawn_rate is not None:
        spawn_rate = check.number("load.spawn_rate", spawn_rate, above=0,
                                  expected="expected a number of users per second (more than 0)")
    try:
        shape_settings = ShapeSettings.from_options(options, spawn_rate).check(shape)
    except UsageError as exc:
        raise check.prefixed("load", exc) from None

    run_time = run.get("run_time")
    if run_time is not None:
        run_time = str(run_time)
        try:
            parse_seconds(run_time, "run_time")
        except UsageError as exc:
            raise check.prefixed("load.run_time", exc) from None
    processes = run.get("processes")
    if processes is not None:
        rule = "worker processes N >= 1, or -1 for one per core"
        processes = check.integer("load.processes", processes, minimum=-1, expected=rule)
        if processes == 0:
            raise check.error("load.processes", f"{rule}, got 0")
    repeat = run.get("repeat")
    if repeat is not None:
        repeat = check.integer("load.repeat", repeat, minimum=1,
                               expected="expected a whole number of runs per configuration (1 or more)")
    locust_args = run.get("locust_args") or []
    if not isinstance(locust_args, list) or not all(isinstance(a, (str, int, float)) for a in locust_args):
        raise check.error("load.locust_args", "a list of Locust command-line arguments, e.g. [--stop-timeout, 5]")
    try:
        load_plan = locust_load(
            options, users=users, run_time=run_time, shape=shape, processes=processes, quiet=True, progress_every_s=0.0,
            spawn_rate=spawn_rate if spawn_rate is not None or shape else float(users or 1),  # all users at once
            locust_args=[str(a) for a in locust_args])
    except UsageError as exc:
        raise check.prefixed("load", exc) from None
    return LoadPlan(options, {**given, **{k: v for k, v in run.items() if v is not None}}, load_plan, shape,
                    shape_settings, source, repeat=int(repeat or 1))


def check_payload(plan: LoadPlan) -> None:
    """Encode the payload once, as `sm-locust run` does before it starts: a bad payload fails here."""
    if not plan.options.payload:
        raise Checker(plan.source).error("load.payload", "missing; give the request body source (a file, .jsonl, "
                                         "folder, .npy/.npz or module:function; relative paths are relative to the "
                                         "sweep file)")
    options = plan.run_options("sweep-check")
    try:
        prepare_payloads(SageMakerSettings.from_options(options).validate(), options)
    except UsageError as exc:
        raise Checker(plan.source).prefixed("load", exc) from None
