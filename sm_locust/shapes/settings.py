"""The load shapes' options (`OPTIONS`, shown in the web UI whatever shape is picked) and
`ShapeSettings`: those options parsed and checked once, for the shapes and for `sm-locust run`.

The same options arrive typed from the command line and as strings from the web UI form (Locust
keeps a None default's form value as text), so every value is parsed here, and every impossible or
contradictory setting becomes a one-line `UsageError` naming the flag and saying why. `sm-locust
run` calls `ShapeSettings.from_options(args).check(shape)` before anything starts; the shapes call
the same code on their first tick (web UI runs), and build their searches from it.

Defaults that depend on the shape are None in `OPTIONS` ("the shape's default"): `--max-users` is
10 for the step shape and 1000 for the plateau search; `--max-error-rate` is 0.05 for the plateau
and phases shapes and off for the step shape. `--max-error-rate` is the run's one error-rate
limit: the shapes judge each step by it and gates (`sm-locust smoke`) the whole run
(docs/plateau.md). The open-loop options (`--arrival`, `--rate-per-user`, `--max-in-flight`) are
the open-loop users' and live with `OpenLoopSettings` in `sm_locust/config/openloop.py`. Each
option's default, type and range are in its `OptionSpec`, once; `ShapeSettings.from_options` reads
the parsed `Options` and checks only what one option cannot say alone (contradictions between them).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from sm_locust.config.openloop import DEFAULT_RATE_PER_USER, OpenLoopSettings
from sm_locust.config.options import Options, OptionSpec, spec_defaults
from sm_locust.errors import UsageError
from sm_locust.measure.steady import DEFAULT_SLO_PERCENTILE, MODE_RATE, MODE_USERS, MODES, parse_percentile
from sm_locust.plateau.conditions import (
    DEFAULT_MAX_ERROR_RATE,
    Condition,
    ErrorRate,
    LatencySLO,
    MaxDuration,
    MaxInvocations,
)
from sm_locust.plateau.driver import DEFAULT_MIN_STEP_S, SearchDriver
from sm_locust.plateau.rates import Traffic, parse_traffic
from sm_locust.plateau.search import PlateauSearch, ScheduleSearch, StepSearch
from sm_locust.plateau.traffic import Schedule, parse_traffic_pattern
from sm_locust.scaling.timeline import MAX_TIME_SCALE
from sm_locust.shapes.tokens import TokenObjective, token_objective
from sm_locust.util.numbers import MAX_USERS
from sm_locust.util.yamlsafe import inline_only, load_yaml, names_a_file, read_text_file

DEFAULT_STEP_MAX_USERS = 10  # the step shape's last step (unchanged default)
DEFAULT_SEARCH_MAX_USERS = 1000  # the plateau search's ceiling
DEFAULT_START_RPS = 10.0
DEFAULT_MAX_RPS = 5000.0
MAX_SPAWN_RATE = 100.0  # Locust warns above 100 users/s

def _error_rate_hint(value: float) -> str:
    """`--max-error-rate 5`: a percentage where a fraction is asked for."""
    percent = f"; write {value / 100:g} for {value:g} %" if 1 <= value <= 100 else ""
    return f" (a fraction between 0 and 1{percent})"


def _seconds(text: str) -> float:
    seconds = parse_seconds(text, "")
    assert seconds is not None  # parse_seconds gives None only for "", which OptionSpec.parse never passes
    return seconds


OPTIONS: list[OptionSpec] = [
    OptionSpec("--start-users", "SM_LOCUST_START_USERS", 1, "step/plateau shape: users in the first step", int,
               minimum=1, maximum=MAX_USERS),
    OptionSpec("--step-users", "SM_LOCUST_STEP_USERS", 1, "step shape: users added each step", int, minimum=1,
               maximum=MAX_USERS, group="step"),
    OptionSpec("--step-seconds", "SM_LOCUST_STEP_SECONDS", 30.0,
               "step shape: seconds each step is held; plateau shape: the longest a step is held (it ends once stable)",
               float, above=0),
    OptionSpec("--min-step-seconds", "SM_LOCUST_MIN_STEP_SECONDS", DEFAULT_MIN_STEP_S,
               "plateau shape: the shortest a step is held; it ends at the first tick after this where its throughput "
               "is stable (3 sub-windows within 10 %%), else at --step-seconds", float, above=0, group="plateau"),
    OptionSpec("--max-users", "SM_LOCUST_MAX_USERS", None,
               "step shape: users in the last step (default 10); plateau: most users to try (default 1000)", int,
               minimum=1, maximum=MAX_USERS),
    OptionSpec("--stop-at-knee", "SM_LOCUST_STOP_AT_KNEE", False,
               "step shape: stop once throughput gains < 5 %% over 4 steps", bool, group="step"),
    OptionSpec("--latency-slo-ms", "SM_LOCUST_LATENCY_SLO_MS", None,
               "latency SLO in ms: a step whose --slo-percentile exceeds it is not "
               "acceptable (and stops the step shape)",
               float, above=0, group="slo"),
    OptionSpec("--time-to-result-slo-ms", "SM_LOCUST_TIME_TO_RESULT_SLO_MS", None,
               "async shape: time-to-result SLO in ms at --slo-percentile: a rate whose percentile's 95 %% interval "
               "lies above it stops the search; only rates shown within it count as capacity (docs/async.md)",
               float, above=0, group="slo"),
    OptionSpec("--slo-percentile", "SM_LOCUST_SLO_PERCENTILE", DEFAULT_SLO_PERCENTILE,
               "percentile the SLO applies to: 95, p99, 99.9", convert=parse_percentile, group="slo"),
    OptionSpec("--max-error-rate", "SM_LOCUST_MAX_ERROR_RATE", None,
               "the run's error-rate limit, a fraction, e.g. 0.05: a step above it is not acceptable (plateau/phases "
               "default 0.05; step: off); gates (sm-locust smoke) fail a run above it", float, minimum=0, below=1,
               hint=_error_rate_hint, group="slo"),
    OptionSpec("--max-duration", "SM_LOCUST_MAX_DURATION", None, "stop the search after this long: 600, 90s, 10m",
               convert=_seconds, group="slo"),
    OptionSpec("--max-invocations", "SM_LOCUST_MAX_INVOCATIONS", None, "stop the search after this many requests", int,
               minimum=1, group="slo"),
    OptionSpec("--search-mode", "SM_LOCUST_SEARCH_MODE", MODE_USERS,
               "plateau shape: step the user count (closed loop) or the arrival rate (open loop)",
               choices=MODES, convert=str.lower, group="plateau"),
    OptionSpec("--start-rps", "SM_LOCUST_START_RPS", DEFAULT_START_RPS,
               "plateau shape, rate mode: first arrival rate (req/s)", float, above=0, group="plateau"),
    OptionSpec("--max-rps", "SM_LOCUST_MAX_RPS", DEFAULT_MAX_RPS,
               "plateau shape, rate mode: highest arrival rate to try (req/s)", float, above=0, group="plateau"),
    OptionSpec("--traffic-pattern", "SM_LOCUST_TRAFFIC_PATTERN", None,
               "phases shape: Inference Recommender TrafficPattern (+ StoppingConditions), JSON text or file",
               group="phases", web_check=inline_only("--traffic-pattern", "{")),
    OptionSpec("--target-rps", "SM_LOCUST_TARGET_RPS", None, "open shape: constant arrival rate to send (req/s)",
               float, above=0, group="open"),
    OptionSpec("--traffic", "SM_LOCUST_TRAFFIC", None,
               "traffic shape: open-loop rate phases, a YAML/JSON file or text: [{duration_s: 300, rps: 20}, ...] "
               "(docs/autoscaling.md)", group="traffic", web_check=inline_only("--traffic", "[", "{")),
    OptionSpec("--stop-when-oversaturated", "SM_LOCUST_STOP_WHEN_OVERSATURATED", False,
               "open shape, --trace: stop the run, saying why, once the endpoint is over-saturated (over the last "
               "30-120 s the requests waiting grow while completions do not, on their 95 %% intervals)", bool,
               group="slo"),
    OptionSpec("--time-scale", "SM_LOCUST_TIME_SCALE", None,
               "traffic shape: emulated seconds per real second of a local fleet (sm-locust serve --time-scale): "
               "phase durations are divided by it (default 1; sm-locust run reads it from a local fleet)", float,
               above=0, maximum=MAX_TIME_SCALE, group="traffic"),
]
_DEFAULT = spec_defaults(OPTIONS)

_TIMESPAN = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)d)?\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m(?!s))?\s*"
                       r"(?:(\d+(?:\.\d+)?)s?)?\s*$")


def parse_seconds(value, flag: str) -> float | None:
    """600, "600", "90s", "10m", "1h30m", "7d" -> seconds; "" / None -> None."""
    if value is None or value == "":
        return None
    named = f"{flag} " if flag else ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = _TIMESPAN.match(str(value))
        if not match or not any(match.groups()):
            raise UsageError(f"{named}{value!r} is not a duration; write it like 600, 90s, 10m, 1h30m or 7d")
        d, h, m, s = (float(g) if g else 0.0 for g in match.groups())
        seconds = d * 86400 + h * 3600 + m * 60 + s
    if not (math.isfinite(seconds) and seconds > 0):
        raise UsageError(f"{named}must be more than 0 seconds, got {value!r}")
    return seconds


def load_traffic_pattern(value: str) -> str:
    """`--traffic-pattern` is JSON text (starts with `{`) or a path to a JSON file: return the JSON text."""
    text = str(value).strip()
    if text.startswith("{"):
        return text
    if not names_a_file(text):
        raise UsageError(f"--traffic-pattern {value!r} is neither JSON text nor a readable file")
    return read_text_file(Path(text).expanduser(), f"--traffic-pattern {value!r}")  # a regular file, bounded


def load_traffic(value: str, flag: str = "--traffic") -> Traffic:
    """`--traffic`: a YAML/JSON file, or the text itself (starts with `[` or `{`) -> checked rate phases."""
    text = str(value).strip()
    if not text.startswith(("[", "{")):
        if not names_a_file(text):
            raise UsageError(f"{flag} {value!r} is neither a readable file nor phases written inline "
                             "([{duration_s: 300, rps: 20}, ...])")
        text = read_text_file(Path(text).expanduser(), f"{flag} {value!r}")  # bounded: sm_locust.util.yamlsafe
    return parse_traffic(load_yaml(text, f"{flag} {value!r}"), flag)


@dataclass(frozen=True)
class StepSchedule:
    """The step shape's ramp: `start_users`, plus `step_users` every `step_seconds`, up to `max_users`."""

    start_users: int = _DEFAULT["start_users"]
    step_users: int = _DEFAULT["step_users"]
    step_seconds: float = _DEFAULT["step_seconds"]
    max_users: int = DEFAULT_STEP_MAX_USERS
    spawn_rate: float = MAX_SPAWN_RATE

    def validate(self) -> StepSchedule:
        """Each value's range is its option's (OptionSpec); what is left is the ramp itself."""
        if self.max_users < self.start_users:
            raise UsageError(f"--max-users ({self.max_users}) is below --start-users ({self.start_users})")
        return self

    @property
    def steps(self) -> int:
        return (self.max_users - self.start_users) // self.step_users + 1

    @property
    def duration(self) -> float:
        return self.steps * self.step_seconds

    def users_at(self, elapsed: float) -> int | None:
        """Users to hold at `elapsed` seconds, or None when the schedule is over."""
        index = int(elapsed // self.step_seconds)
        if index >= self.steps:
            return None
        return self.start_users + index * self.step_users


# ShapeSettings fields read from an option of another name, and those that are no option
OPTION_OF = {"max_duration_s": "max_duration"}
NOT_OPTIONS = frozenset({"spawn_rate", "objective"})


@dataclass(frozen=True)
class ShapeSettings:
    """The shapes' options of one run, typed (defaults: their `OptionSpec`s), and what the shapes build
    from them: the step schedule, the searches, their stop conditions."""

    start_users: int = _DEFAULT["start_users"]
    step_users: int = _DEFAULT["step_users"]
    step_seconds: float = _DEFAULT["step_seconds"]
    min_step_seconds: float = _DEFAULT["min_step_seconds"]
    max_users: int | None = _DEFAULT["max_users"]
    stop_at_knee: bool = _DEFAULT["stop_at_knee"]
    latency_slo_ms: float | None = _DEFAULT["latency_slo_ms"]
    time_to_result_slo_ms: float | None = _DEFAULT["time_to_result_slo_ms"]  # --shape async (plateau/asyncslo.py)
    slo_percentile: float = _DEFAULT["slo_percentile"]
    max_error_rate: float | None = _DEFAULT["max_error_rate"]
    max_duration_s: float | None = _DEFAULT["max_duration"]
    max_invocations: int | None = _DEFAULT["max_invocations"]
    search_mode: str = _DEFAULT["search_mode"]
    start_rps: float = _DEFAULT["start_rps"]
    max_rps: float = _DEFAULT["max_rps"]
    target_rps: float | None = _DEFAULT["target_rps"]
    arrival: str | None = None  # the open-loop options as given (config/openloop.py; None = not given)
    rate_per_user: float | None = None
    max_in_flight: int | None = None
    traffic_pattern: str | None = _DEFAULT["traffic_pattern"]
    traffic: str | None = _DEFAULT["traffic"]  # --traffic: open-loop rate phases (plateau/rates.py), a file or text
    time_scale: float | None = _DEFAULT["time_scale"]  # --time-scale: emulated seconds per real second
    spawn_rate: float | None = None  # Locust's -r, when given (the step shape's ramp)
    objective: TokenObjective | None = None  # --objective output-tokens (shapes/tokens.py); None = requests
    trace: str = ""  # --trace: a request trace to replay (the trace shape; the option is payloads/llm.py's)
    stop_when_oversaturated: bool = _DEFAULT["stop_when_oversaturated"]  # shapes/saturation.py

    @classmethod
    def from_options(cls, options: Options, spawn_rate: float | None = None) -> ShapeSettings:
        """Each field from the option of its name (`OPTION_OF` names the ones that differ); the
        fields in `NOT_OPTIONS` are given or computed here."""
        values = {f.name: getattr(options, OPTION_OF.get(f.name, f.name)) for f in fields(cls)
                  if f.name not in NOT_OPTIONS}
        settings = cls(**values, spawn_rate=spawn_rate, objective=token_objective(options, options.slo_percentile))
        return settings.validate()

    # -- checks that hold whatever the shape ------------------------------------------------------
    def validate(self) -> ShapeSettings:
        """What one option's range cannot say: the options against each other."""
        if self.max_users is not None and self.max_users < self.start_users:
            raise UsageError(f"--max-users ({self.max_users}) is below --start-users ({self.start_users})")
        if self.start_rps > self.max_rps:
            raise UsageError(f"--start-rps ({self.start_rps:g}) is above --max-rps ({self.max_rps:g})")
        if self.spawn_rate is not None and not self.spawn_rate > 0:
            raise UsageError(f"--spawn-rate must be more than 0, got {self.spawn_rate:g}")
        return self

    def check(self, shape: str | None) -> ShapeSettings:
        """Contradictions between the options and the chosen shape (None = constant users)."""
        if self.objective is not None:
            self.objective.check(shape, self.search_mode)
        open_loop = shape in ("open", "traffic", "async") or (shape == "plateau" and self.search_mode == MODE_RATE)
        if self.trace and shape != "trace":
            raise UsageError(f"--trace sets when each request is sent; it replaces the {shape or 'constant users'} "
                             "shape: leave --shape out (or --shape trace)")
        if self.stop_when_oversaturated and shape not in ("open", "trace"):
            raise UsageError("--stop-when-oversaturated judges an open-loop run at a set load: use it with "
                             "--target-rps R (the open shape) or --trace FILE")
        if shape == "trace" and not self.trace:
            raise UsageError("--shape trace needs --trace FILE (a Mooncake-format JSONL trace)")
        if self.time_to_result_slo_ms is not None and shape != "async":
            raise UsageError("--time-to-result-slo-ms is the async capacity search's SLO: use it with --shape async "
                             "(--async-result s3 or sqs:QUEUE_URL)")
        if self.traffic is not None and shape != "traffic":
            raise UsageError("--traffic describes the load itself (open-loop rate phases): use it with --shape traffic")
        if self.time_scale is not None and shape not in ("traffic", "trace"):
            raise UsageError("--time-scale compresses the phases of --traffic or the times of --trace; use it with "
                             "--traffic FILE or --trace FILE")
        if self.traffic_pattern is not None and shape != "phases":
            raise UsageError("--traffic-pattern describes the load itself: use it with --shape phases")
        if self.target_rps is not None and shape != "open":
            raise UsageError("--target-rps is a constant open-loop rate (--shape open); a rate search takes "
                             "--search-mode rate --start-rps/--max-rps")
        if self.search_mode == MODE_RATE and shape != "plateau":
            raise UsageError("--search-mode rate steps the arrival rate of the plateau "
                             "search: use it with --shape plateau")
        if shape == "trace":
            for flag, value in (("--arrival", self.arrival), ("--rate-per-user", self.rate_per_user)):
                if value is not None:
                    raise UsageError(f"{flag} shapes a rate; --trace sends each request at its traced time: drop "
                                     f"{flag}")
        elif not open_loop:
            for flag, value in (("--arrival", self.arrival), ("--rate-per-user", self.rate_per_user),
                                ("--max-in-flight", self.max_in_flight)):
                if value is not None:
                    raise UsageError(f"{flag} applies to open loop: --shape open --target-rps R, --traffic FILE, "
                                     "or --shape plateau --search-mode rate")
        if shape == "open" and self.target_rps is None:
            raise UsageError("--shape open needs --target-rps R (requests per second to send)")
        if shape == "phases":
            self.schedule()
        if shape == "traffic":
            self.rate_phases()
        if shape in ("step", "plateau") and self.max_users is not None and self.max_users < self.start_users:
            raise UsageError(f"--max-users ({self.max_users}) is below --start-users ({self.start_users})")
        if shape == "step":
            self.step_schedule()
        if shape == "plateau":
            self.plateau_search()
        if open_loop:
            self._check_open_loop_users(shape)
        return self

    def _check_open_loop_users(self, shape: str | None) -> None:
        """The most open-loop users (rate tokens) the shape would start is within MAX_USERS: `--target-rps 1e308`
        or `--rate-per-user 1e-300` asked for more users than there are atoms."""
        per_user = self.rate_per_user or DEFAULT_RATE_PER_USER
        if shape == "open":
            flag, rate = "--target-rps", self.target_rps or 0.0
        elif shape == "traffic":
            traffic = self.rate_phases()
            flag, rate, per_user = "--traffic", traffic.peak_rps, self.rate_per_user or traffic.token_rate()
        else:
            flag, rate = "--max-rps", self.max_rps
        if rate / per_user > MAX_USERS:
            raise UsageError(f"{flag} {rate:g} req/s at --rate-per-user {per_user:g} needs {rate / per_user:,.0f} "
                             f"open-loop users; at most {MAX_USERS:,} (raise --rate-per-user, or lower the rate)")

    # -- what the shapes build -------------------------------------------------------------------
    def constraints(self, default_error_rate: float | None) -> list[Condition]:
        """Latency SLO and error-rate cap (the cap defaults to `default_error_rate`; None = off)."""
        conditions: list[Condition] = []
        if self.latency_slo_ms is not None:
            conditions.append(LatencySLO(self.slo_percentile, self.latency_slo_ms))
        rate = self.max_error_rate if self.max_error_rate is not None else default_error_rate
        if rate is not None:
            conditions.append(ErrorRate(rate))
        return conditions

    def budgets(self) -> list[Condition]:
        conditions: list[Condition] = []
        if self.max_duration_s is not None:
            conditions.append(MaxDuration(self.max_duration_s))
        if self.max_invocations is not None:
            conditions.append(MaxInvocations(self.max_invocations))
        return conditions

    def step_schedule(self) -> StepSchedule:
        return StepSchedule(start_users=self.start_users, step_users=self.step_users, step_seconds=self.step_seconds,
                            max_users=self.max_users if self.max_users is not None else DEFAULT_STEP_MAX_USERS,
                            spawn_rate=self.spawn_rate or MAX_SPAWN_RATE).validate()

    def open_loop(self) -> OpenLoopSettings:
        """The open-loop settings with defaults applied (what the open-loop users run with)."""
        given: dict[str, Any] = {"arrival": self.arrival, "rate_per_user": self.rate_per_user,
                                 "max_in_flight": self.max_in_flight}
        return OpenLoopSettings(**{k: v for k, v in given.items() if v is not None})

    def step_search(self) -> StepSearch:
        schedule = self.step_schedule()
        # The step shape stops on an error rate only when asked (it used to run to the end).
        return StepSearch(schedule.start_users, schedule.step_users, schedule.max_users,
                          conditions=self.constraints(None) + self.budgets(), stop_at_knee=self.stop_at_knee,
                          extend_unstable=False)

    def plateau_search(self) -> PlateauSearch:
        """The adaptive search. Unstable steps are not re-run: the driver already held them up to
        --step-seconds waiting for stability (`plateau_driver`)."""
        conditions = self.constraints(DEFAULT_MAX_ERROR_RATE) + self.budgets()
        if self.search_mode == MODE_RATE:
            quantum = self.rate_per_user or DEFAULT_RATE_PER_USER
            return PlateauSearch(self.start_rps, self.max_rps, mode=MODE_RATE, conditions=conditions,
                                 granularity=quantum, extend_unstable=False)
        max_users = self.max_users if self.max_users is not None else max(DEFAULT_SEARCH_MAX_USERS, self.start_users)
        if self.objective is not None:  # the most output tokens/s within the TTFT / ITL SLOs
            return self.objective.search(self.start_users, max_users, conditions)
        return PlateauSearch(self.start_users, max_users, conditions=conditions, extend_unstable=False)

    def plateau_driver(self, search: PlateauSearch, min_subwindow_s: float, tokens=None) -> SearchDriver:
        """Each step held from --min-step-seconds until stable, at most --step-seconds (`tokens(start, end)`: the
        LLM answers of a window, for --objective output-tokens)."""
        if self.objective is not None:
            return self.objective.driver(search, tokens, step_s=self.step_seconds, min_step_s=self.min_step_seconds,
                                         min_subwindow_s=min_subwindow_s)
        return SearchDriver(search, step_s=self.step_seconds, min_step_s=self.min_step_seconds,
                            min_subwindow_s=min_subwindow_s)

    def schedule(self) -> Schedule:
        if self.traffic_pattern is None:
            raise UsageError("--shape phases needs --traffic-pattern FILE_OR_JSON (an Inference Recommender "
                             "TrafficPattern)")
        try:
            return parse_traffic_pattern(load_traffic_pattern(self.traffic_pattern))
        except UsageError as exc:
            raise UsageError(f"--traffic-pattern: {exc}") from None

    def rate_phases(self) -> Traffic:
        """The --traffic phases, read and checked (durations in run seconds: emulated on a local fleet)."""
        if self.traffic is None:
            raise UsageError("--shape traffic needs --traffic FILE (open-loop rate phases: [{duration_s, rps}, ...])")
        return load_traffic(self.traffic)

    def schedule_search(self, schedule: Schedule) -> ScheduleSearch:
        conditions = schedule.stopping.conditions() + self.constraints(None) + self.budgets()
        first = schedule.at(0.0)
        if first is None:  # parse_traffic_pattern refuses a pattern without phases
            raise UsageError("--traffic-pattern has no phase to run")
        return ScheduleSearch(first[0], max(schedule.max_users, first[0]), conditions=conditions)


