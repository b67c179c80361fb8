"""SageMaker Inference Recommender traffic patterns, parsed and checked, as a schedule a shape can follow.

`parse_traffic_pattern` takes a `TrafficPattern`, `{"TrafficPattern", "StoppingConditions"}` or a
whole CreateInferenceRecommendationsJob request (dict or JSON) and returns a `Schedule` whose
`at(elapsed_s)` answers `(users, spawn_rate)` or None (done). SpawnRate is read per minute and
spread evenly (`spawn_unit="second"` for the Studio guide's reading); phases run one after another,
each from its own InitialNumberOfUsers; at most `MAX_STEPS` steps or phases (docs/facts.md,
"Inference Recommender limits"). Hard API limits raise `UsageError`; the API's "should" advice goes
to `Schedule.warnings`. Each level is reached within `LEVEL_SPAWN_S`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from sm_locust.errors import UsageError
from sm_locust.plateau.conditions import Condition, LatencySLO, MaxInvocationsPerMinute, ThroughputGain

PHASES = "PHASES"
STAIRS = "STAIRS"
TRAFFIC_TYPES = (PHASES, STAIRS)
SPAWN_PER_MINUTE = "minute"
SPAWN_PER_SECOND = "second"
SPAWN_UNITS = (SPAWN_PER_MINUTE, SPAWN_PER_SECOND)
IR_PERCENTILES = {"P95": 95.0, "P99": 99.0}
IR_CUSTOM_TEST_PERCENTILE = "P95"
FLAT_STOP = "Stop"
FLAT_CONTINUE = "Continue"
ADVISED_INITIAL_USERS = (1, 3)
ADVISED_PHASE_S = (120, 3600)
MAX_USERS_PER_STEP = 3
MAX_JOB_S = 18_000  # RecommendationJobInputConfig.JobDurationInSeconds: "The maximum value is 18,000 seconds"
MAX_STEPS = MAX_JOB_S  # steps (or phases) of at least 1 s each that fit the longest job
LEVEL_SPAWN_S = 1.0

PHASE_KEYS = ("InitialNumberOfUsers", "SpawnRate", "DurationInSeconds")
STAIRS_KEYS = ("DurationInSeconds", "NumberOfSteps", "UsersPerStep")
PATTERN_KEYS = ("TrafficType", "Phases", "Stairs")
STOPPING_KEYS = ("MaxInvocations", "ModelLatencyThresholds", "FlatInvocations")
THRESHOLD_KEYS = ("Percentile", "ValueInMilliseconds")


@dataclass(frozen=True)
class Phase:
    """One IR phase, with SpawnRate already converted to users per minute."""

    initial_users: int
    spawn_per_minute: int
    duration_s: int

    def users_at(self, offset_s: int) -> int:
        return self.initial_users + (self.spawn_per_minute * offset_s) // 60

    @property
    def final_users(self) -> int:
        return self.users_at(self.duration_s - 1)

    def level_start(self, users: int) -> int:
        """First whole second of the phase at which `users` users run."""
        added = users - self.initial_users
        if added <= 0 or self.spawn_per_minute == 0:
            return 0
        return -(-added * 60 // self.spawn_per_minute)


@dataclass
class StoppingConditions:
    """IR stopping conditions, kept in IR's terms; `conditions()` turns them into search conditions."""

    max_invocations_per_minute: int | None = None
    latency_percentile: str | None = None  # "P95" / "P99"
    latency_ms: int | None = None
    flat_invocations: str = FLAT_STOP

    def conditions(self) -> list[Condition]:
        out: list[Condition] = []
        if self.max_invocations_per_minute is not None:
            out.append(MaxInvocationsPerMinute(self.max_invocations_per_minute))
        if self.latency_percentile is not None and self.latency_ms is not None:
            out.append(LatencySLO(IR_PERCENTILES[self.latency_percentile], self.latency_ms))
        if self.flat_invocations == FLAT_STOP:
            out.append(ThroughputGain())
        return out


@dataclass
class Schedule:
    """A parsed traffic pattern: users over time, plus the stopping conditions that came with it."""

    traffic_type: str
    phases: list[Phase]
    stopping: StoppingConditions = field(default_factory=StoppingConditions)
    warnings: list[str] = field(default_factory=list)

    @property
    def duration_s(self) -> int:
        return sum(p.duration_s for p in self.phases)

    @property
    def max_users(self) -> int:
        return max(max(p.initial_users, p.final_users) for p in self.phases)

    def at(self, elapsed_s: float) -> tuple[int, float] | None:
        """(users, Locust spawn rate per second) at `elapsed_s` into the test, or None once it is over."""
        second = int(max(0.0, elapsed_s))
        start = 0
        previous_level = 0
        for phase in self.phases:
            if second < start + phase.duration_s:
                offset = second - start
                users = phase.users_at(offset)
                level_start = phase.level_start(users)
                before = phase.users_at(level_start - 1) if level_start > 0 else previous_level
                jump = abs(users - before)
                return users, max(1.0, jump / LEVEL_SPAWN_S)
            start += phase.duration_s
            previous_level = phase.final_users
        return None

    def describe(self) -> str:
        parts = []
        for phase in self.phases:
            if phase.spawn_per_minute:
                parts.append(f"{phase.initial_users} users +{phase.spawn_per_minute}/min for {phase.duration_s} s"
                             f" (to {phase.final_users})")
            else:
                parts.append(f"{phase.initial_users} users for {phase.duration_s} s")
        return f"{self.traffic_type}: " + ", then ".join(parts)


# -- parsing ---------------------------------------------------------------------------------------
def _load(source: str | bytes | Mapping) -> Mapping:
    if isinstance(source, Mapping):
        return source
    if isinstance(source, bytes):
        source = source.decode("utf-8", errors="replace")
    if not isinstance(source, str):
        raise UsageError(f"traffic pattern must be JSON text or a dict, not {type(source).__name__}")
    if any(q in source for q in "\u201c\u201d\u2018\u2019"):
        raise UsageError("traffic pattern contains typographic quotes (\u201c \u201d); use plain double quotes")
    try:
        data = json.loads(source)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise UsageError(f"traffic pattern is not valid JSON: {exc.msg} at {where}") from None
    if not isinstance(data, Mapping):
        raise UsageError(f"traffic pattern must be a JSON object, not {type(data).__name__}")
    return data


def _check_keys(obj: object, where: str, allowed: tuple[str, ...]) -> Mapping:
    if not isinstance(obj, Mapping):
        raise UsageError(f"{where} must be an object with {', '.join(allowed)}; got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise UsageError(f"{where} has unknown key {unknown[0]!r}; valid keys: {', '.join(allowed)}")
    return obj


def _int(obj: Mapping, key: str, where: str, minimum: int, maximum: int | None = None) -> int:
    if key not in obj:
        raise UsageError(f"{where} needs {key}")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{where}.{key} must be a whole number, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        limit = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise UsageError(f"{where}.{key} is {value}; IR requires {limit}")
    return value


def _phases(raw: object, spawn_unit: str, warnings: list[str]) -> list[Phase]:
    if not isinstance(raw, list) or not raw:
        raise UsageError("TrafficPattern.Phases must be a list with at least one phase")
    if len(raw) > MAX_STEPS:
        raise UsageError(f"TrafficPattern.Phases holds {len(raw):,} phases; at most {MAX_STEPS:,} (phases of at least "
                         f"1 s in IR's longest job, {MAX_JOB_S:,} s)")
    phases = []
    for index, item in enumerate(raw):
        where = f"Phases[{index}]"
        obj = _check_keys(item, where, PHASE_KEYS)
        initial = _int(obj, "InitialNumberOfUsers", where, 1)
        spawn = _int(obj, "SpawnRate", where, 0)
        duration = _int(obj, "DurationInSeconds", where, 1)
        low, high = ADVISED_INITIAL_USERS
        if not low <= initial <= high:
            warnings.append(f"{where}.InitialNumberOfUsers {initial}: IR advises {low} to {high}")
        low, high = ADVISED_PHASE_S
        if not low <= duration <= high:
            warnings.append(f"{where}.DurationInSeconds {duration}: IR advises {low} to {high} s for custom load tests")
        per_minute = spawn * 60 if spawn_unit == SPAWN_PER_SECOND else spawn
        phases.append(Phase(initial, per_minute, duration))
    return phases


def _stairs(raw: object) -> list[Phase]:
    obj = _check_keys(raw, "TrafficPattern.Stairs", STAIRS_KEYS)
    where = "Stairs"
    duration = _int(obj, "DurationInSeconds", where, 1)
    steps = _int(obj, "NumberOfSteps", where, 1)
    if steps > MAX_STEPS:
        raise UsageError(f"{where}.NumberOfSteps is {steps:,}; at most {MAX_STEPS:,} (steps of at least 1 s in IR's "
                         f"longest job, JobDurationInSeconds {MAX_JOB_S:,})")
    per_step = _int(obj, "UsersPerStep", where, 1, MAX_USERS_PER_STEP)
    return [Phase(per_step * (i + 1), 0, duration) for i in range(steps)]


def _stopping(raw: object) -> StoppingConditions:
    if raw is None:
        return StoppingConditions()
    obj = _check_keys(raw, "StoppingConditions", STOPPING_KEYS)
    stopping = StoppingConditions()
    if "MaxInvocations" in obj:
        stopping.max_invocations_per_minute = _int(obj, "MaxInvocations", "StoppingConditions", 1)
    if "ModelLatencyThresholds" in obj:
        thresholds = obj["ModelLatencyThresholds"]
        if not isinstance(thresholds, list) or len(thresholds) != 1:
            raise UsageError("StoppingConditions.ModelLatencyThresholds must hold exactly one threshold")
        where = "ModelLatencyThresholds[0]"
        threshold = _check_keys(thresholds[0], where, THRESHOLD_KEYS)
        percentile = threshold.get("Percentile")
        if not isinstance(percentile, str) or percentile.upper() not in IR_PERCENTILES:
            raise UsageError(f"{where}.Percentile is {percentile!r}; IR accepts {' or '.join(IR_PERCENTILES)}")
        stopping.latency_percentile = percentile.upper()
        stopping.latency_ms = _int(threshold, "ValueInMilliseconds", where, 1)
    if "FlatInvocations" in obj:
        flat = obj["FlatInvocations"]
        if flat not in (FLAT_STOP, FLAT_CONTINUE):
            raise UsageError(f"StoppingConditions.FlatInvocations is {flat!r}; choose {FLAT_STOP} or {FLAT_CONTINUE}")
        stopping.flat_invocations = flat
    return stopping


def _unwrap(data: Mapping) -> tuple[object, object, object]:
    """(TrafficPattern, StoppingConditions, JobDurationInSeconds) from any of the accepted wrappers."""
    if "InputConfig" in data:
        config = data["InputConfig"]
        if not isinstance(config, Mapping) or "TrafficPattern" not in config:
            raise UsageError("InputConfig has no TrafficPattern")
        return config["TrafficPattern"], data.get("StoppingConditions"), config.get("JobDurationInSeconds")
    if "TrafficPattern" in data:
        return data["TrafficPattern"], data.get("StoppingConditions"), data.get("JobDurationInSeconds")
    return data, None, None


def parse_traffic_pattern(source: str | bytes | Mapping, spawn_unit: str = SPAWN_PER_MINUTE) -> Schedule:
    """IR TrafficPattern (dict or JSON text, optionally wrapped) -> `Schedule`; bad input -> UsageError."""
    if spawn_unit not in SPAWN_UNITS:
        raise UsageError(f"unknown spawn unit {spawn_unit!r}; choose one of: {', '.join(SPAWN_UNITS)}")
    pattern, stopping_raw, job_duration = _unwrap(_load(source))
    pattern = _check_keys(pattern, "TrafficPattern", PATTERN_KEYS)
    has_phases, has_stairs = "Phases" in pattern, "Stairs" in pattern
    if has_phases and has_stairs:
        raise UsageError("TrafficPattern gives both Phases and Stairs; IR takes one or the other")
    traffic_type = pattern.get("TrafficType")
    if traffic_type is None:
        if not (has_phases or has_stairs):
            raise UsageError("TrafficPattern needs Phases (TrafficType PHASES) or Stairs (TrafficType STAIRS)")
        traffic_type = PHASES if has_phases else STAIRS
    if traffic_type not in TRAFFIC_TYPES:
        raise UsageError(f"TrafficPattern.TrafficType is {traffic_type!r}; choose {PHASES} or {STAIRS}")
    warnings: list[str] = []
    if traffic_type == PHASES:
        if not has_phases:
            raise UsageError("TrafficType PHASES needs a Phases list")
        phases = _phases(pattern["Phases"], spawn_unit, warnings)
    else:
        if not has_stairs:
            raise UsageError("TrafficType STAIRS needs a Stairs object")
        phases = _stairs(pattern["Stairs"])
    schedule = Schedule(traffic_type, phases, _stopping(stopping_raw), warnings)
    if job_duration is not None:
        if isinstance(job_duration, bool) or not isinstance(job_duration, int) or job_duration < 1:
            raise UsageError(f"JobDurationInSeconds must be a whole number >= 1, got {job_duration!r}")
        if schedule.duration_s > job_duration:
            warnings.append(f"the pattern lasts {schedule.duration_s} s, more than JobDurationInSeconds {job_duration}")
    if schedule.stopping.latency_percentile not in (None, IR_CUSTOM_TEST_PERCENTILE):
        warnings.append(f"IR asks for {IR_CUSTOM_TEST_PERCENTILE} in custom load tests")
    return schedule
