"""Gate flags for an argparse parser and the steps every gate-running command shares.

`sm-locust smoke` uses these; `sm-locust run` can gain the same flags with three calls
(`add_gate_arguments(parser)`, `gates_from_args(args)` before the run, `report(...)` after).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from sm_locust.gates.baseline import DEFAULT_TOLERANCE, regression_gates
from sm_locust.gates.gates import Gate, MaxErrorRate, Verdict, evaluate
from sm_locust.gates.junit import to_junit_xml
from sm_locust.gates.spec import GateSpec
from sm_locust.record.runfolder import RunData, load_run
from sm_locust.sanitize import clean
from sm_locust.util.numbers import argument_type
from sm_locust.util.outputs import write_atomic

INCONCLUSIVE_CHOICES = ("fail", "pass")


def add_gate_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the gate flags. A flag the parser already has (e.g. a shape's `--max-error-rate` stop
    condition, declared by the sm-locust options) is left to it: its value becomes the whole-run gate."""
    g = parser.add_argument_group("gates (VALUE for the whole run, NAME=VALUE for one request name; repeatable)")
    taken = set(getattr(parser, "_option_string_actions", {}))

    def add(flag: str, **kwargs) -> None:
        if flag not in taken:
            g.add_argument(flag, **kwargs)

    add("--max-p95-ms", action="append", default=[], metavar="[NAME=]MS", help="fail if p95 latency is above MS")
    add("--max-p99-ms", action="append", default=[], metavar="[NAME=]MS", help="fail if p99 latency is above MS")
    add("--max-error-rate", action="append", default=[], metavar="[NAME=]FRACTION",
        help="fail if failed/attempted invocations is above FRACTION (0.01 = 1%%)")
    add("--min-rps", action="append", default=[], metavar="[NAME=]RPS",
        help="fail if goodput (successful invocations per second) is under RPS")
    add("--min-requests", type=int, default=1, help="fail if the run sent fewer requests (default 1)")
    add("--baseline", default=None, metavar="RUN_DIR",
        help="fail when p95, p99 or goodput regressed significantly beyond --tolerance against this earlier run "
        "folder (the change's 95%% interval, from both runs' per-second samples), or the error rate beyond it")
    add("--tolerance", type=argument_type(float, minimum=0), default=DEFAULT_TOLERANCE,
        help=f"allowed regression against --baseline, a fraction (default {DEFAULT_TOLERANCE:g} = "
        f"{DEFAULT_TOLERANCE * 100:g}%%)")
    add("--inconclusive", choices=INCONCLUSIVE_CHOICES, default="fail",
        help="a gate whose figure's 95%% interval straddles its limit is INCONCLUSIVE: count it as a failure "
        "(fail, the default) or let it pass (pass)")
    add("--junit", default=None, metavar="PATH", help="write a JUnit XML report, one testcase per gate")


def _values(args: argparse.Namespace, dest: str) -> list[str]:
    """A gate flag's values as a list of strings, whoever declared the flag (a list, one value or None)."""
    value = getattr(args, dest, None)
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def gates_from_args(args: argparse.Namespace) -> list[Gate]:
    """Validated gates (UsageError on bad or contradictory limits, or a baseline that is not a run).

    With no limit and no baseline, the default smoke gate applies: no failed requests.
    """
    spec = GateSpec(max_p95_ms=_values(args, "max_p95_ms"), max_p99_ms=_values(args, "max_p99_ms"),
                    max_error_rate=_values(args, "max_error_rate"), min_rps=_values(args, "min_rps"),
                    min_requests=args.min_requests)
    gates = spec.build()
    if args.baseline:
        gates += regression_gates(load_run(args.baseline, role="baseline"), args.tolerance)
    elif spec.is_empty():
        gates.append(MaxErrorRate(0.0))
    return gates


def closing_line(verdicts: Sequence[Verdict], inconclusive_passes: bool = False) -> str:
    """'3 of 4 gates passed, 1 inconclusive (counted as a failure: --inconclusive pass to accept it) - FAILED'."""
    passed = sum(v.passed for v in verdicts)
    undecided = sum(v.inconclusive for v in verdicts)
    failed = sum(v.fails(inconclusive_passes) for v in verdicts)
    text = f"{passed} of {len(verdicts)} gates passed"
    if undecided:
        how = ("counted as a pass: --inconclusive pass" if inconclusive_passes
               else "counted as a failure: --inconclusive pass to accept it")
        text += f", {undecided} inconclusive ({how})"
    return text + (" - FAILED" if failed else "")


def report(gates: Sequence[Gate], run: RunData, *, junit: str | None = None, prefix: str = "sm-locust",
           duration_s: float = 0.0, properties: dict | None = None,
           inconclusive: str = "fail") -> tuple[list[Verdict], int]:
    """Evaluate, print one line per gate and a closing line, write JUnit; return (verdicts, exit code).
    `inconclusive`: "fail" (an inconclusive gate fails the run) or "pass"."""
    lenient = inconclusive == "pass"
    verdicts = evaluate(gates, run)
    if run.interrupted:  # a killed run's last checkpoint (record.runfolder): judged, and said so
        print(f"{prefix}: note: {clean(run.interrupted)}")  # from the run folder: a file
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
