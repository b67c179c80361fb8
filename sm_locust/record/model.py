"""summary.json as typed records: the definition of the file (docs/summary.md describes it for users).

Each section is a frozen dataclass whose fields name its keys and kinds. `from_json` reads any
summary.json sm-locust has written (schema 1: keys are added, never renamed): a present key must have
its kind (else `ShapeError` names it), a missing key reads as None or empty, an unknown key is kept
aside untouched. `to_json` writes keys in the order read or built, so read-then-write is byte for
byte the same. A new key is one field (`json_field`); `make` builds a record in code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from functools import cache
from typing import Any, ClassVar, TypeVar

from sm_locust.measure.steady import DEFAULT_SLO_PERCENTILE
from sm_locust.util.formatting import compact, load_words

__all__ = ["DEFAULT_SLO_PERCENTILE", "Autoscaling", "CacheSide", "Hour", "InstanceSample", "JsonObject", "Llm",
           "LlmTurn", "Mix", "ModelCache", "Payload", "Phase", "Plateau", "Record", "ScaleEvent", "ScalingSlo",
           "ShapeError", "Step", "Summary", "SustainablePoint", "Target", "Totals", "Traffic", "Verdict", "load_words",
           "percentile_key"]

SCHEMA_VERSION = 1
Interval = tuple[float, float]
Intervals = Mapping[str, Interval | None]
JsonObject = Mapping[str, Any]  # a JSON object as read (a section this version does not type, or a whole file)
R = TypeVar("R", bound="Record")


def percentile_key(percentile: float, prefix: str = "") -> str:
    """summary.json's name of a percentile: 95 -> 'p95_ms', 99.9 -> 'p99_9_ms'; `prefix` 'ttft_' -> 'ttft_p95_ms'."""
    return f"{prefix}p{compact(float(percentile)).replace('.', '_')}_ms"


class ShapeError(ValueError):
    """A summary.json key whose value does not have its documented kind: the message names it."""


# -- kinds ----------------------------------------------------------------------------------------
# scalar kinds: "count" (whole number >= 0), "number" (finite), "text", "time" (ISO-8601), "bool",
# "object", "list", "interval" ([low, high], low <= high), "intervals" ({figure: interval or null}),
# "counts" ({name: count}); a trailing "?" allows null. A Record subclass is a nested object,
# `ListOf(cls)` a list of them, `MapOf(cls)` an object of them.

@dataclass(frozen=True)
class ListOf:
    record: type[Record]


@dataclass(frozen=True)
class MapOf:
    record: type[Record]


Kind = str | type["Record"] | ListOf | MapOf

_KIND_WORDS = {"count": "a whole number >= 0", "number": "a number", "text": "text", "time": "an ISO-8601 time",
               "bool": "true or false", "object": "an object", "list": "a list",
               "interval": "an interval [low, high] (or null)", "intervals": "an object", "counts": "an object"}


def json_field(kind: Kind, key: str | None = None, *, default: object = None) -> Any:
    """A dataclass field read from summary.json key `key` (the attribute's name by default) of `kind`."""
    if isinstance(default, (list, dict)):
        raise TypeError("use an immutable default")
    return field(default=default, metadata={"kind": kind, "key": key})


def _json_type(value: object) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _show(value: object) -> str:
    text = repr(value)
    return (text if len(text) <= 40 else text[:39] + "…") + f" (a JSON {_json_type(value)})"


def is_kind(value: object, kind: str) -> bool:
    """Whether a JSON value has the scalar `kind` (see the kinds above)."""
    if value is None:
        return kind.endswith("?")
    kind = kind.rstrip("?")
    if kind in ("count", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        return kind == "number" or (value >= 0 and float(value).is_integer())
    if kind == "text":
        return isinstance(value, str)
    if kind == "time":
        if not isinstance(value, str):
            return False
        try:
            datetime.fromisoformat(value)  # Python 3.11+ reads the Z suffix
        except ValueError:
            return False
        return True
    if kind == "bool":
        return isinstance(value, bool)
    if kind in ("object", "intervals", "counts"):
        return isinstance(value, Mapping)
    if kind == "interval":
        return (isinstance(value, list) and len(value) == 2 and all(is_kind(v, "number") for v in value)
                and value[0] <= value[1])
    return isinstance(value, list)


def _read(value: object, kind: Kind, where: str, nullable: bool = True, check: bool = True) -> object:
    """`value` (summary.json's, at `where`) as the field holds it; ShapeError when it is not of `kind`
    (a record or list of records may be null when `nullable`, a scalar kind when it ends in "?").
    `check=False` (a record built in this process) converts without judging."""
    if isinstance(kind, str):
        if check and not is_kind(value, kind):
            raise ShapeError(f"{where} is {_show(value)}, not {_KIND_WORDS[kind.rstrip('?')]}")
        if value is None:
            return None
        bare = kind.rstrip("?")
        if bare == "interval":
            assert isinstance(value, (list, tuple))
            return (value[0], value[1])
        if bare == "intervals":
            assert isinstance(value, Mapping)
            for name, pair in value.items():
                if check and not is_kind(pair, "interval?"):
                    raise ShapeError(f"{where}.{name} is {_show(pair)}, not {_KIND_WORDS['interval']}")
            return {name: None if pair is None else (pair[0], pair[1]) for name, pair in value.items()}
        if bare == "counts":
            assert isinstance(value, Mapping)
            for name, count in value.items():
                if check and not is_kind(count, "count"):
                    raise ShapeError(f"{where}.{name} is {count!r}, not a whole number")
            return dict(value)
        return value
    if value is None:
        if check and not nullable:
            raise ShapeError(f"{where} is {_show(value)}, not {'a list' if isinstance(kind, ListOf) else 'an object'}")
        return None
    if isinstance(kind, ListOf):
        if not isinstance(value, (list, tuple)):
            raise ShapeError(f"{where} is {_show(value)}, not a list")
        record = kind.record
        return tuple(item if isinstance(item, record) else record.from_json(item, f"{where}[{i}]", check=check)
                     for i, item in enumerate(value))
    if isinstance(kind, MapOf):
        if not isinstance(value, Mapping):
            raise ShapeError(f"{where} is {_show(value)}, not an object")
        return {name: item if isinstance(item, kind.record) else kind.record.from_json(item, f"{where}.{name}",
                                                                                      check=check)
                for name, item in value.items()}
    if isinstance(value, Record):
        return value
    if not isinstance(value, Mapping):
        raise ShapeError(f"{where} is {_show(value)}, not an object")
    return kind.from_json(value, where, check=check)


def _dump(value: object, kind: Kind) -> object:
    """A field's value as summary.json holds it."""
    if value is None:
        return None
    if isinstance(kind, ListOf):
        assert isinstance(value, Sequence)
        return [item.to_json() for item in value]
    if isinstance(kind, MapOf):
        assert isinstance(value, Mapping)
        return {name: item.to_json() for name, item in value.items()}
    if isinstance(value, Record):
        return value.to_json()
    if kind in ("interval", "interval?"):
        assert isinstance(value, tuple)
        return list(value)
    if kind in ("intervals", "intervals?"):
        assert isinstance(value, Mapping)
        return {name: None if pair is None else list(pair) for name, pair in value.items()}
    return value


@dataclass(frozen=True, kw_only=True)
class Record:
    """A summary.json object: its known keys as fields, the keys in file order (`keys`), the keys
    this version does not know (`extra`, kept for writing back, never read)."""

    keys: tuple[str, ...] = field(default=(), repr=False, compare=False)
    extra: Mapping[str, object] = field(default_factory=dict, repr=False, compare=False)

    _NOT_KEYS: ClassVar[frozenset[str]] = frozenset({"keys", "extra"})

    @classmethod
    @cache
    def json_spec(cls) -> Mapping[str, tuple[str, Kind, bool]]:
        """JSON key -> (attribute, kind, whether null is allowed), in declaration order; a record or
        list field may be null when its default is None."""
        return {(f.metadata.get("key") or f.name): (f.name, f.metadata["kind"], f.default is None)
                for f in fields(cls) if f.name not in cls._NOT_KEYS}

    @classmethod
    def from_json(cls: type[R], data: object, where: str = "", *, check: bool = True) -> R:
        """Read one object of summary.json (`where`: its place, for the error); ShapeError when a
        known key has the wrong kind. `check=False` (this process's own figures, or a file already
        held to its shape) takes values as they are, and a section that cannot be read at all reads
        as its default (kept in `extra`, so it is written back as it was). Unknown keys are kept in `extra`."""
        if not isinstance(data, Mapping):
            raise ShapeError(f"{where or 'it'} is a JSON {_json_type(data)}, not an object"
                             if where else f"it holds a JSON {_json_type(data)}, not an object")
        spec = cls.json_spec()
        values: dict[str, object] = {}
        extra: dict[str, object] = {}
        for key, value in data.items():
            if key not in spec:
                extra[key] = value
                continue
            attribute, kind, nullable = spec[key]
            try:
                values[attribute] = _read(value, kind, f"{where}.{key}" if where else key, nullable, check)
            except (ShapeError, TypeError, AttributeError, IndexError) as unreadable:
                if check:
                    raise ShapeError(str(unreadable)) from None
                extra[key] = value  # the field keeps its default
        return cls(keys=tuple(data), extra=extra, **values)

    @classmethod
    def of(cls: type[R], data: R | JsonObject) -> R:
        """`data` as this record: itself, or summary.json's object read without judging it (this
        process's own, or one already held to its shape)."""
        return data if isinstance(data, cls) else cls.from_json(data, check=False)

    @classmethod
    def make(cls: type[R], **values: object) -> R:
        """A record built in code: its keys are the arguments (attribute names), in order; an unknown
        name becomes an extra key. A sub-record may be given as its JSON object."""
        spec = cls.json_spec()
        by_attribute = {attribute: (key, kind) for key, (attribute, kind, _nullable) in spec.items()}
        known = {name: _read(value, by_attribute[name][1], name, check=False)
                 for name, value in values.items() if name in by_attribute}
        extra = {name: value for name, value in values.items() if name not in by_attribute}
        keys = tuple(by_attribute[name][0] if name in by_attribute else name for name in values)
        return cls(keys=keys, extra=extra, **known)

    def adding(self: R, **values: object) -> R:
        """This record with `values` (attribute names) set; keys it did not hold go after its own."""
        spec = self.json_spec()
        by_attribute = {attribute: (key, kind) for key, (attribute, kind, _nullable) in spec.items()}
        known = {name: _read(value, by_attribute[name][1], name, check=False)
                 for name, value in values.items() if name in by_attribute}
        extra = {**{key: value for key, value in self.extra.items() if spec.get(key, ("",))[0] not in values},
                 **{name: value for name, value in values.items() if name not in by_attribute}}
        new = [by_attribute[name][0] if name in by_attribute else name for name in values]
        keys = self.keys + tuple(key for key in new if key not in self.keys)
        return replace(self, keys=keys, extra=extra, **known)

    def has(self, key: str) -> bool:
        """Whether the file holds `key` (a null value counts: a key absent is an older writer's file)."""
        return key in self.keys

    def to_json(self) -> dict[str, object]:
        """The object as summary.json holds it: the keys in their order, the values as read or built."""
        spec = self.json_spec()
        out: dict[str, object] = {}
        for key in self.keys:
            if key in spec and key not in self.extra:
                attribute, kind, _nullable = spec[key]
                out[key] = _dump(getattr(self, attribute), kind)
            else:
                out[key] = self.extra[key]
        return out


class _Figures:
    """What readers compute from a record with percentiles and a `ci95` object."""

    ci95: Intervals | None
    extra: Mapping[str, object]

    def percentile(self, percentile: float, prefix: str = "") -> float | None:
        """The recorded percentile (`p95_ms` for 95), None when it was not recorded."""
        key = percentile_key(percentile, prefix)
        value = getattr(self, key, None) if not prefix else None
        if value is None:
            value = self.extra.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def interval(self, name: str) -> Interval | None:
        """The 95 % interval of figure `name` (`rps`, `p95_ms`, ...) as recorded; None when none is."""
        return (self.ci95 or {}).get(name)

    def records_interval(self, name: str) -> bool:
        """Whether the file records an interval entry for `name` (a null entry counts: the window was too short)."""
        return isinstance(self.ci95, Mapping) and name in self.ci95


@dataclass(frozen=True, kw_only=True)
class Totals(Record, _Figures):
    """`totals` (and each `by_name` entry): the whole run's figures."""

    requests: int = json_field("count", default=0)
    failures: int = json_field("count", default=0)
    rps: float | None = json_field("number")
    p50_ms: float | None = json_field("number?")
    p95_ms: float | None = json_field("number?")
    p99_ms: float | None = json_field("number?")
    errors: Mapping[str, int] | None = json_field("counts")
    successes: int | None = json_field("count?")
    goodput_rps: float | None = json_field("number?")
    error_rate: float | None = json_field("number?")
    in_flight_at_stop: int | None = json_field("count?")
    ci95: Intervals | None = json_field("intervals?")
    open_loop: JsonObject | None = json_field("object")
    backoff: JsonObject | None = json_field("object?")
    request_types: list[str] | None = json_field("list?")
    latency_series: JsonObject | None = json_field("object?")
    loop_lag: JsonObject | None = json_field("object?")  # the load generator's loop lag (measure.looplag.LoopLag)

    @property
    def failure_rate(self) -> float:
        """failures / requests (0 without requests); the recorded `error_rate` when there is one."""
        if self.error_rate is not None:
            return float(self.error_rate)
        return self.failures / self.requests if self.requests else 0.0


@dataclass(frozen=True, kw_only=True)
class LlmTurn(Record, _Figures):
    """One `llm.turns[]` entry (`--turns N`): the answers of one turn index of the conversations, whose
    prompts carry the turns before it (TTFT grows with the context); `ci95` holds each percentile's interval."""

    turn: int | None = json_field("count")
    requests: int = json_field("count", default=0)
    input_tokens_mean: float | None = json_field("number?")  # the prompt's tokens, the whole conversation sent
    ttft_p50_ms: float | None = json_field("number?")
    ttft_p95_ms: float | None = json_field("number?")
    itl_p50_ms: float | None = json_field("number?")
    itl_p95_ms: float | None = json_field("number?")
    e2e_p50_ms: float | None = json_field("number?")
    e2e_p95_ms: float | None = json_field("number?")
    output_tokens: float | None = json_field("number?")
    ci95: Intervals | None = json_field("intervals?")


@dataclass(frozen=True, kw_only=True)
class Llm(Record, _Figures):
    """`llm` (the run's and each step's): token figures when tokens were counted (docs/llm.md)."""

    ttft_p50_ms: float | None = json_field("number?")
    ttft_p90_ms: float | None = json_field("number?")
    ttft_p95_ms: float | None = json_field("number?")
    ttft_p99_ms: float | None = json_field("number?")
    itl_p50_ms: float | None = json_field("number?")
    itl_p90_ms: float | None = json_field("number?")
    itl_p95_ms: float | None = json_field("number?")
    itl_p99_ms: float | None = json_field("number?")
    tpot_p50_ms: float | None = json_field("number?")
    tpot_p95_ms: float | None = json_field("number?")
    e2e_p50_ms: float | None = json_field("number?")
    e2e_p95_ms: float | None = json_field("number?")
    output_tokens: float | None = json_field("number?")
    input_tokens: float | None = json_field("number?")
    output_tokens_per_s: float | None = json_field("number?")
    requests: int | None = json_field("count?")
    tokens_source: str | None = json_field("text?")
    ci95: Intervals | None = json_field("intervals?")
    excluded: JsonObject | None = json_field("object?")  # --warmup-s / --cooldown-s: what was left out
    turns: tuple[LlmTurn, ...] | None = json_field(ListOf(LlmTurn))  # --turns: the figures of each turn index

    def percentile(self, percentile: float, prefix: str = "ttft_") -> float | None:
        """A token latency's percentile: `prefix` 'ttft_', 'itl_', 'tpot_' or 'e2e_'."""
        value = getattr(self, percentile_key(percentile, prefix), None)
        if value is None:
            value = self.extra.get(percentile_key(percentile, prefix))
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True, kw_only=True)
class Step(Record, _Figures):
    """One `steps[]` entry: a held load's steady-window figures."""

    users: float | None = json_field("number")
    users_running: int | None = json_field("count?")  # fewer than `users` ran in the steady window (absent: all did)
    start: str | None = json_field("time")
    end: str | None = json_field("time")
    duration_s: float | None = json_field("number?")
    requests: int = json_field("count", default=0)
    failures: int = json_field("count", default=0)
    rps: float | None = json_field("number")
    successes: int | None = json_field("count?")
    goodput_rps: float | None = json_field("number?")
    p50_ms: float | None = json_field("number?")
    p95_ms: float | None = json_field("number?")
    p99_ms: float | None = json_field("number?")
    p90_ms: float | None = json_field("number?")
    p99_9_ms: float | None = json_field("number?")
    steady_s: float | None = json_field("number?")
    total_requests: int | None = json_field("count?")
    error_rate: float | None = json_field("number?")
    stable: bool | None = json_field("bool?")
    unstable_reason: str | None = json_field("text?")
    client_cpu_pct: float | None = json_field("number?")
    client_wait_pct: float | None = json_field("number?")
    client_worker: str | None = json_field("text?")  # a master: the Locust worker whose own CPU and wait those are
    client_bound: bool | None = json_field("bool?")
    client_bound_reason: str | None = json_field("text?")
    ci95: Intervals | None = json_field("intervals?")
    target_rate: float | None = json_field("number?")
    sent_rps: float | None = json_field("number?")
    offered_rps: float | None = json_field("number?")  # open loop, when under 95 % of target_rate: sends scheduled/s
    offered_ci95: Interval | None = json_field("interval?")  # ... its 95 % interval (measure.steady.undelivered_reason)
    late_fraction: float | None = json_field("number?")
    dropped_fraction: float | None = json_field("number?")
    judged: bool | None = json_field("bool?")
    llm: Llm | None = json_field(Llm)
    loop_lag: JsonObject | None = json_field("object?")  # the load generator's loop lag (measure.looplag.LoopLag)
    undecided: list[str] | None = json_field("list?")  # what the step budget left undecided (docs/plateau.md)
    measured_again: str | None = json_field("text?")  # a load measured already, run again: why (plateau.search AGAIN_*)

    @property
    def load(self) -> str:
        """'12 users', '1 user' or '40 req/s offered'."""
        return load_words(self.users, self.target_rate)


@dataclass(frozen=True, kw_only=True)
class Plateau(Record):
    """`plateau`: the throughput plateau a search found (docs/plateau.md)."""

    capacity_rps: float | None = json_field("number?")
    capacity_ci95: Interval | None = json_field("interval?")
    capacity_step: int | None = json_field("count?")
    knee_step: int | None = json_field("count?")
    inconclusive: bool | None = json_field("bool?")
    inconclusive_reason: str | None = json_field("text?")
    capacity_load: float | None = json_field("number?")
    capacity_stable: bool | None = json_field("bool?")
    users: float | None = json_field("number?")
    rps: float | None = json_field("number?")
    goodput_rps: float | None = json_field("number?")
    p50_ms: float | None = json_field("number?")
    p95_ms: float | None = json_field("number?")
    p99_ms: float | None = json_field("number?")
    reason: str | None = json_field("text?")
    stable: bool | None = json_field("bool?")
    reached: bool | None = json_field("bool?")
    bound: str | None = json_field("text?")
    client_bound: bool | None = json_field("bool?")
    client_reason: str | None = json_field("text?")
    stop_reason: str | None = json_field("text?")
    mode: str | None = json_field("text?")
    load: float | None = json_field("number?")
    rate: float | None = json_field("number?")
    error_rate: float | None = json_field("number?")
    model_knee_users: float | None = json_field("number?")
    knee_ci95: Interval | None = json_field("interval?")  # the knee step's goodput interval (plateau.significance)
    knee_loads: list[float] | None = json_field("list?")  # the knee's interval in loads, against the capacity's
    knee_granule: float | None = json_field("number?")  # the load resolution the search placed the knee to
    undecided: list[str] | None = json_field("list?")  # decisions the measurement did not support
    knee_undecided: list[str] | None = json_field("list?")  # decisions left open that only place the knee in knee_loads
    steps: int | None = json_field("count?")
    text: str | None = json_field("text?")
    llm: Llm | None = json_field(Llm)  # the knee step's token figures, when the search ran on tokens

    def percentile(self, percentile: float) -> float | None:
        """The knee's recorded percentile (`p95_ms` for 95), None when not recorded."""
        value = getattr(self, percentile_key(percentile), None)
        if value is None:
            value = self.extra.get(percentile_key(percentile))
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @property
    def load_text(self) -> str:
        """The knee's load: '40 req/s offered' in rate mode, else '12 users' ('—' when no step)."""
        if self.mode == "rate" and self.rate is not None:
            return load_words(None, self.rate)
        return "—" if self.users is None else load_words(self.users, None)


@dataclass(frozen=True, kw_only=True)
class Verdict(Record):
    """`verdict`: whether the measurement decides (`ok`) or the load generator did (`inconclusive`)."""

    status: str | None = json_field("text")
    reason: str | None = json_field("text?")


@dataclass(frozen=True, kw_only=True)
class Async(Record):
    """`async`: what an `--async-result` run waited for (record.asyncsummary.AsyncSummary writes it)."""

    accepted: int = json_field("count", default=0)
    results: int = json_field("count", default=0)
    failures: int = json_field("count", default=0)
    failed: JsonObject | None = json_field("object")
    time_to_result: JsonObject | None = json_field("object")
    acceptance: JsonObject | None = json_field("object")
    awaited_at_stop: int = json_field("count", default=0)
    polls: int = json_field("count", default=0)
    poll_resolution_max_ms: float | None = json_field("number?")
    backlog_max: int = json_field("count", default=0)
    not_kept: int | None = json_field("count?")
    backlog: list[float] | None = json_field("list?")  # the client-side backlog per backlog_every_s seconds (its max)
    backlog_every_s: int | None = json_field("count?")
    first_time_to_result_ms: float | None = json_field("number?")  # the run's first call: from idle, its cold start


@dataclass(frozen=True, kw_only=True)
class AsyncSearchStep(Record):
    """One `async_search.steps[]` entry: a rate's backlog slope and, with an SLO, its time to result."""

    rate_rps: float | None = json_field("number?")
    backlog_slope_per_s: float | None = json_field("number?")
    backlog_slope_ci95: Interval | None = json_field("interval?")
    samples: int | None = json_field("count?")
    tolerance_per_s: float | None = json_field("number?")
    backlog: str | None = json_field("text?")  # bounded | grows | undecided
    backlog_last: float | None = json_field("number?")
    slo_ms: float | None = json_field("number?")
    percentile: float | None = json_field("number?")
    time_to_result_ms: float | None = json_field("number?")
    time_to_result_ci95: Interval | None = json_field("interval?")
    results: int | None = json_field("count?")
    awaited: int | None = json_field("count?")
    slo: str | None = json_field("text?")  # keeps | breach | undecided
    extensions: int | None = json_field("count?")


@dataclass(frozen=True, kw_only=True)
class AsyncSearch(Record):
    """`async_search`: the rate steps of `--shape async` and what stopped them (plateau.asyncsearch)."""

    start_rps: float | None = json_field("number?")
    step_rps: float | None = json_field("number?")
    max_rps: float | None = json_field("number?")
    capacity_rps: float | None = json_field("number?")
    grows_at_rps: float | None = json_field("number?")
    stop_reason: str | None = json_field("text?")
    steps: tuple[AsyncSearchStep, ...] = json_field(ListOf(AsyncSearchStep), default=())
    time_to_result_slo_ms: float | None = json_field("number?")
    slo_percentile: float | None = json_field("number?")
    slo_breach_at_rps: float | None = json_field("number?")
    verdict: str | None = json_field("text?")  # conclusive | INCONCLUSIVE (with an SLO)
    inconclusive_reason: str | None = json_field("text?")


@dataclass(frozen=True, kw_only=True)
class Hour(Record):
    """One `hours[]` entry."""

    hour: int | None = json_field("count")
    start: str | None = json_field("time")
    end: str | None = json_field("time")
    duration_s: float | None = json_field("number?")
    users: float | None = json_field("number?")
    users_max: float | None = json_field("number?")
    requests: int = json_field("count", default=0)
    failures: int = json_field("count", default=0)
    successes: int | None = json_field("count?")
    rps: float | None = json_field("number")
    goodput_rps: float | None = json_field("number?")
    error_rate: float | None = json_field("number?")
    p50_ms: float | None = json_field("number?")
    p95_ms: float | None = json_field("number?")
    p99_ms: float | None = json_field("number?")
    client_cpu_pct: float | None = json_field("number?")
    backoffs: int | None = json_field("count?")
    target_rate: float | None = json_field("number?")
    errors: JsonObject | None = json_field("object?")


@dataclass(frozen=True, kw_only=True)
class CacheSide(Record):
    """`model_cache.cold` / `warm`: the requests that waited for their model's load, or found it loaded."""

    requests: int | None = json_field("count?")
    p50_ms: float | None = json_field("number?")
    p95_ms: float | None = json_field("number?")
    p99_ms: float | None = json_field("number?")
    wait_p50_ms: float | None = json_field("number?")  # cold only: the waits the endpoint reported
    wait_p95_ms: float | None = json_field("number?")


@dataclass(frozen=True, kw_only=True)
class Target(Record):
    """One `targets[]` entry: a model or inference component of a traffic mix (`others` adds `targets`)."""

    name: str | None = json_field("text")
    requests: int = json_field("count", default=0)
    failures: int = json_field("count", default=0)
    p50_ms: float | None = json_field("number?")
    p95_ms: float | None = json_field("number?")
    p99_ms: float | None = json_field("number?")
    cold: int | None = json_field("count?")
    targets: int | None = json_field("count?")
    ttft: CacheSide | None = json_field(CacheSide)  # a stream's TTFT at this target (no cold marks)
    ttft_cold: CacheSide | None = json_field(CacheSide)  # ... of the streams the endpoint marked cold
    ttft_warm: CacheSide | None = json_field(CacheSide)


@dataclass(frozen=True, kw_only=True)
class ModelCache(Record):
    """`model_cache`: warm and cold requests of a multi-model mix (or of LoRA adapters, marked by the endpoint)."""

    source: str | None = json_field("text")
    requests: int = json_field("count", default=0)
    hit_rate: float | None = json_field("number?")
    hit_rate_ci95: Interval | None = json_field("interval?")  # from the endpoint's cold/warm marks in time blocks
    threshold_ms: float | None = json_field("number?")
    cold: CacheSide | None = json_field(CacheSide)
    warm: CacheSide | None = json_field(CacheSide)
    ttft_cold: CacheSide | None = json_field(CacheSide)  # streams: time to first token, cold and warm
    ttft_warm: CacheSide | None = json_field(CacheSide)


@dataclass(frozen=True, kw_only=True)
class Mix(Record):
    """`mix`: the traffic mix of a multi-model or inference-component run."""

    field: str | None = json_field("text")
    spec: str | None = json_field("text")
    kind: str | None = json_field("text")
    targets: int | None = json_field("count")
    seed: float | None = json_field("number?")
    zipf_s: float | None = json_field("number?")
    top_weights: JsonObject | None = json_field("object?")


@dataclass(frozen=True, kw_only=True)
class ScaleEvent(Record):
    """One `autoscaling.scale_events[]` entry (run seconds)."""

    t_s: float | None = json_field("number")
    direction: str | None = json_field("text")
    from_: int | None = json_field("count", "from")
    to: int | None = json_field("count")
    reaction_s: float | None = json_field("number?")
    ready_s: float | None = json_field("number?")
    ready_at_s: float | None = json_field("number?")
    reaction_s_ci95: Interval | None = json_field("interval?")  # [value - gap, value]: the poll's resolution
    ready_s_ci95: Interval | None = json_field("interval?")


@dataclass(frozen=True, kw_only=True)
class InstanceSample(Record):
    """One `autoscaling.instances[]` entry: DescribeEndpoint's desired and in-service counts."""

    t_s: float | None = json_field("number")
    desired: int | None = json_field("count")
    in_service: int | None = json_field("count")


@dataclass(frozen=True, kw_only=True)
class ScalingSlo(Record):
    """`autoscaling.slo`: the latency SLO the seconds over it were counted against."""

    slo_ms: float | None = json_field("number?")
    percentile: float | None = json_field("number?")


@dataclass(frozen=True, kw_only=True)
class Autoscaling(Record):
    """`autoscaling`: the instance counts, scale events and SLO breaches of a watched run (docs/autoscaling.md)."""

    source: str | None = json_field("text?")
    time_scale: float | None = json_field("number?")
    duration_s: float | None = json_field("number?")
    policy: JsonObject | None = json_field("object?")
    scale_events: tuple[ScaleEvent, ...] = json_field(ListOf(ScaleEvent), default=())
    instances: tuple[InstanceSample, ...] = json_field(ListOf(InstanceSample), default=())
    periods: list[JsonObject] | None = json_field("list?")
    peak_instances: int | None = json_field("count?")
    instance_hours: float | None = json_field("number?")
    cost_usd: float | None = json_field("number?")
    slo: ScalingSlo | None = json_field(ScalingSlo)
    slo_breach_s: float | None = json_field("number?")
    breach_s_ci95: Interval | None = json_field("interval?")  # each second's requests resampled (scaling.intervals)
    breach_client_bound_s: float | None = json_field("number?")  # of them, seconds the load generator was behind
    breaches: list[list[float]] | None = json_field("list?")
    failed: int | None = json_field("count?")
    throttled: int | None = json_field("count?")
    flaps: int | None = json_field("count?")
    watched: JsonObject | None = json_field("object?")


@dataclass(frozen=True, kw_only=True)
class Phase(Record):
    """One `traffic.phases[]` entry: a rate offered for a duration (run seconds)."""

    duration_s: float | None = json_field("number")
    rps: float | None = json_field("number")


@dataclass(frozen=True, kw_only=True)
class Traffic(Record):
    """`traffic`: the rate phases of a `--traffic` run (docs/autoscaling.md)."""

    phases: tuple[Phase, ...] = json_field(ListOf(Phase), default=())
    time_scale: float | None = json_field("number?")  # emulated seconds per real second


@dataclass(frozen=True, kw_only=True)
class Payload(Record):
    """`payload`: where the request bodies came from and their sizes (the options that shaped them are extra keys)."""

    source: str | None = json_field("text?")
    count: int | None = json_field("count?")
    min_bytes: float | None = json_field("number?")
    avg_bytes: float | None = json_field("number?")
    max_bytes: float | None = json_field("number?")


@dataclass(frozen=True, kw_only=True)
class SustainablePoint(Record):
    """`report.sustainable`: the sustainable point a report, compare and `sm-locust report` quote (report.merge
    builds it): one step's own figures (`step`, 1-based) with their 95 % intervals, the capacity step's, the
    verdict, and for a rate run the instances its rates are divided by (`per_instance`, report.policy)."""

    users: float | None = json_field("number?")
    rps: float | None = json_field("number?")
    goodput_rps: float | None = json_field("number?")
    p50_ms: float | None = json_field("number?")
    p95_ms: float | None = json_field("number?")
    p99_ms: float | None = json_field("number?")
    source: str | None = json_field("text?")
    stable: bool | None = json_field("bool?")
    capacity_rps: float | None = json_field("number?")
    capacity_ci95: Interval | None = json_field("interval?")
    inconclusive: bool | None = json_field("bool?")
    inconclusive_reason: str | None = json_field("text?")
    step: int | None = json_field("count?")
    capacity_step: int | None = json_field("count?")
    capacity_users: float | None = json_field("number?")
    capacity_p95_ms: float | None = json_field("number?")
    rps_ci95: Interval | None = json_field("interval?")
    goodput_rps_ci95: Interval | None = json_field("interval?")
    p50_ms_ci95: Interval | None = json_field("interval?")
    p95_ms_ci95: Interval | None = json_field("interval?")
    p99_ms_ci95: Interval | None = json_field("interval?")
    instances: int | None = json_field("count?")
    per_instance: bool | None = json_field("bool?")


@dataclass(frozen=True, kw_only=True)
class LostWorker(Record):
    """One `workers.lost[]` entry: a Locust worker gone during the test (record.workers)."""

    id: str | None = json_field("text?")
    reason: str | None = json_field("text?")  # "missing" (no heartbeat) or "quit"
    after_s: float | None = json_field("number?")  # seconds into the test


@dataclass(frozen=True, kw_only=True)
class Workers(Record):
    """`workers`: a distributed run's Locust workers, expected, connected, at the end, lost (record.workers)."""

    expected: int | None = json_field("count?")
    connected: int | None = json_field("count?")
    at_end: int | None = json_field("count?")
    lost: tuple[LostWorker, ...] = json_field(ListOf(LostWorker), default=())


@dataclass(frozen=True, kw_only=True)
class Summary(Record):
    """summary.json: a run's result (docs/summary.md). Sections this version does not type (publish,
    ...) are plain JSON objects."""

    schema: int | None = json_field("count")
    endpoint: str | None = json_field("text?")
    started_at: str | None = json_field("time?")
    ended_at: str | None = json_field("time?")
    duration_s: float | None = json_field("number?")
    totals: Totals = json_field(Totals, default=Totals())
    steps: tuple[Step, ...] = json_field(ListOf(Step), default=())
    plateau: Plateau | None = json_field(Plateau)
    verdict: Verdict | None = json_field(Verdict)
    complete: bool | None = json_field("bool?")
    hours: tuple[Hour, ...] | None = json_field(ListOf(Hour))
    by_name: Mapping[str, Totals] | None = json_field(MapOf(Totals))
    latency_series: JsonObject | None = json_field("object?")
    payload: Payload | None = json_field(Payload)
    stop_reason: str | None = json_field("text?")
    targets: tuple[Target, ...] | None = json_field(ListOf(Target))
    model_cache: ModelCache | None = json_field(ModelCache)
    mix: Mix | None = json_field(Mix)
    autoscaling: Autoscaling | None = json_field(Autoscaling)
    traffic: Traffic | None = json_field(Traffic)
    trace: JsonObject | None = json_field("object?")  # --trace: the trace replayed and the sends' lateness
    publish: JsonObject | None = json_field("object?")
    llm: Llm | None = json_field(Llm)
    loop_lag: JsonObject | None = json_field("object?")  # each generating process's loop lag, a master's workers
    async_: Async | None = json_field(Async, "async")  # asynchronous inference (record.asyncsummary)
    async_search: AsyncSearch | None = json_field(AsyncSearch)  # --shape async (plateau.asyncsearch)
    workers: Workers | None = json_field(Workers)  # a distributed run's workers (record.workers)
    # what `sm-locust report` adds to the file (report/pipeline.py)
    cloudwatch: JsonObject | None = json_field("object?")
    cost: JsonObject | None = json_field("object?")
    report: JsonObject | None = json_field("object?")

    @property
    def inconclusive(self) -> bool:
        """The run's verdict says the load generator, not the endpoint, decided the answer."""
        return self.verdict is not None and self.verdict.status == "inconclusive"

    @property
    def killed(self) -> bool:
        """summary.json is a checkpoint of a run that did not end normally (`complete: false`)."""
        return self.complete is False

    def step(self, index: int | None) -> Step | None:
        """steps[index], None when the index is None or out of range."""
        if index is None or not 0 <= index < len(self.steps):
            return None
        return self.steps[index]
