"""Gate options, declared once as OptionSpecs, and the steps every gate-running command shares.

`sm-locust smoke` uses these; `sm-locust run` can gain the same options with three calls
(`add_gate_arguments(parser)`, `GateSettings.parse(vars(args))` then `gates_from_settings` before the run,
`report(...)` after).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from sm_locust.config.options import ArgumentContainer, OptionSpec, add_spec_arguments, parse_specs
from sm_locust.gates.baseline import DEFAULT_TOLERANCE, regression_gates
from sm_locust.gates.gates import Gate, MaxErrorRate, Verdict, evaluate
from sm_locust.gates.junit import to_junit_xml
from sm_locust.gates.spec import GateSpec
from sm_locust.record.runfolder import RunData, load_run
from sm_locust.sanitize import clean
from sm_locust.util.outputs import write_atomic

INCONCLUSIVE_CHOICES = ("fail", "pass")

# The gate options, declared once. The limits are repeatable [NAME=]VALUE texts, checked as a whole by
# GateSpec (a limit, its range, p95 against p99); they have no variable (a variable cannot be repeated).
OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("--max-p95-ms", "", None, "fail if p95 latency is above MS", multiple=True, metavar="[NAME=]MS",
               web_ui=False, forward=False),
    OptionSpec("--max-p99-ms", "", None, "fail if p99 latency is above MS", multiple=True, metavar="[NAME=]MS",
               web_ui=False, forward=False),
    OptionSpec("--max-error-rate", "", None, "fail if failed/attempted invocations is above FRACTION (0.01 = 1%%)",
               multiple=True, metavar="[NAME=]FRACTION", web_ui=False, forward=False),
    OptionSpec("--min-rps", "", None, "fail if goodput (successful invocations per second) is under RPS",
               multiple=True, metavar="[NAME=]RPS", web_ui=False, forward=False),
    OptionSpec("--min-requests", "SM_LOCUST_MIN_REQUESTS", 1, "fail if the run sent fewer requests", int, minimum=0,
               web_ui=False, forward=False),
    OptionSpec("--baseline", "SM_LOCUST_BASELINE", None, "fail when p95, p99 or goodput regressed significantly "
               "beyond --tolerance against this earlier run folder (the change's 95%% interval, from both runs' "
               "per-second samples), or the error rate beyond it", metavar="RUN_DIR", web_ui=False, forward=False),
    OptionSpec("--tolerance", "SM_LOCUST_TOLERANCE", DEFAULT_TOLERANCE, "allowed regression against --baseline, a "
               f"fraction ({DEFAULT_TOLERANCE:g} = {DEFAULT_TOLERANCE * 100:g}%%)", float, minimum=0, web_ui=False,
               forward=False),
    OptionSpec("--inconclusive", "SM_LOCUST_INCONCLUSIVE", "fail", "a gate whose figure's 95%% interval straddles "
               "its limit, or whose figure the load generator made (a client-bound step), is INCONCLUSIVE: count "
               "it as a failure (fail) or let it pass (pass)",
               choices=INCONCLUSIVE_CHOICES, web_ui=False, forward=False),
    OptionSpec("--junit", "SM_LOCUST_JUNIT", None, "write a JUnit XML report, one testcase per gate", metavar="PATH",
               web_ui=False, forward=False),
)


@dataclass(frozen=True)
class GateSettings:
    """The gate options, parsed once. `max_error_rate` holds the gates' own `[NAME=]VALUE`s, or, where a
    command declares `--max-error-rate` as its run's option (`smoke`), that option's value."""

    max_p95_ms: tuple[str, ...] = ()
    max_p99_ms: tuple[str, ...] = ()
    max_error_rate: tuple[str, ...] = ()
    min_rps: tuple[str, ...] = ()
    min_requests: int = 1
    baseline: str | None = None
    tolerance: float = DEFAULT_TOLERANCE
    inconclusive: str = "fail"
    junit: str | None = None

    @classmethod
    def parse(cls, source: Mapping[str, object]) -> GateSettings:
        """From a mapping (a command's `vars(args)`, keywords), each option by its spec (UsageError otherwise)."""
        options = parse_specs(OPTIONS, source)
        values = {f.name: options[f.name] for f in fields(cls)}
        values = {k: (tuple(str(x) for x in v) if isinstance(v, tuple) else v) for k, v in values.items()}
        for spec in OPTIONS:
            if spec.multiple and values[spec.dest] is None:
                values[spec.dest] = ()
        return cls(**values)

    @property
    def whole_run_error_rate(self) -> bool:
        """True when `--max-error-rate` was given for the whole run (a value without NAME=)."""
        return any("=" not in value for value in self.max_error_rate)


def add_gate_arguments(parser: ArgumentContainer, shared: tuple[str, ...] = ()) -> None:
    """Add the gate options. `shared`: the flags the command already declares as its run's options
    (smoke's `--max-error-rate`, the shapes' stop condition, whose value is also the whole-run gate):
    declared there, once, and read from there by `GateSettings.parse`."""
    group = parser.add_argument_group("gates (VALUE for the whole run, NAME=VALUE for one request name; repeatable)")
    add_spec_arguments(group, [spec for spec in OPTIONS if spec.flag not in shared])


def gates_from_settings(settings: GateSettings) -> list[Gate]:
    """Validated gates (UsageError on bad or contradictory limits, or a baseline that is not a run).

    With no limit and no baseline, the default smoke gate applies: no failed requests.
    """
    spec = GateSpec(max_p95_ms=settings.max_p95_ms, max_p99_ms=settings.max_p99_ms,
                    max_error_rate=settings.max_error_rate, min_rps=settings.min_rps,
                    min_requests=settings.min_requests)
    gates = spec.build()
    if settings.baseline:
        gates += regression_gates(load_run(settings.baseline, role="baseline"), settings.tolerance)
    elif spec.is_empty():
        gates.append(MaxErrorRate(0.0))
    return gates


def closing_line(verdicts: Sequence[Verdict], inconclusive_passes: bool = False) -> str:
    """'3 of 4 gates passed, 1 inconclusive (counted as a failure: --inconclusive pass to accept it) - FAILED';
    the inconclusive ones the load generator made say so and the fix ('2 inconclusive (the load generator
    was the bottleneck: add workers; counted as ...)')."""
    passed = sum(v.passed for v in verdicts)
    undecided = sum(v.inconclusive for v in verdicts)
    failed = sum(v.fails(inconclusive_passes) for v in verdicts)
    text = f"{passed} of {len(verdicts)} gates passed"
    if undecided:
        how = ("counted as a pass: --inconclusive pass" if inconclusive_passes
               else "counted as a failure: --inconclusive pass to accept it")
        client = [v for v in verdicts if v.inconclusive and v.client_fix]
        if client:
            fixes = " and ".join(dict.fromkeys(str(v.client_fix) for v in client))
            whats = " and ".join(dict.fromkeys(v.held.what for v in client if v.held is not None))
            some = "" if len(client) == undecided else f"{len(client)} of them: "
            how = f"{some}{whats}: {fixes}; {how}"
        text += f", {undecided} inconclusive ({how})"
    return text + (" - FAILED" if failed else "")


def report(gates: Sequence[Gate], run: RunData, *, junit: str | None = None, prefix: str = "sm-locust",
           duration_s: float = 0.0, properties: dict | None = None,
           inconclusive: str = "fail", verdict_said: bool = False) -> tuple[list[Verdict], int]:
    """Evaluate, print one line per gate and a closing line, write JUnit; return (verdicts, exit code).
    `inconclusive`: "fail" (an inconclusive gate fails the run) or "pass". `verdict_said`: the run's
    verdict, with its INCONCLUSIVE reason, was printed just before (`smoke` after its run): the note
    that repeats it is left out (the JUnit file still carries it)."""
    lenient = inconclusive == "pass"
    verdicts = evaluate(gates, run)
    if run.interrupted:  # a killed run's last checkpoint (record.runfolder): judged, and said so
        print(f"{prefix}: note: {clean(run.interrupted)}")  # from the run folder: a file
    held = list(dict.fromkeys(v.held.text for v in verdicts if v.held is not None))
    said = {v.held.text for v in verdicts if verdict_said and v.held is not None and v.held.made.verdict
            and not v.held.baseline}
    for text in held:  # why, whole, once (this run's, the baseline's): each gate line is short
        if text not in said:
            print(f"{prefix}: note: {clean(text)}")
    if held:
        properties = {**(properties or {}), "load_generator": "; ".join(held)}
    for verdict in verdicts:
        print(f"{prefix}: {clean(verdict.line())}")
    print(f"{prefix}: {clean(closing_line(verdicts, lenient))}")
    if junit:
        path = Path(junit)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, to_junit_xml(verdicts, time_s=duration_s, properties=properties,
                                        inconclusive_passes=lenient,
                                        timestamp=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())))
    return verdicts, (1 if any(v.fails(lenient) for v in verdicts) else 0)
