"""CI gates: pass/fail checks over a finished run (summary.json), for `sm-locust smoke`.

Why a package of its own: a gate is pure decision logic (fed summary.json data, never Locust), so
it is tested with synthetic numbers and reused wherever a run folder exists (a smoke run, an
existing run folder, a baseline comparison). Layers, as elsewhere in sm-locust:

- a gate answers pass, fail or inconclusive (`decide`: the figure's 95 % interval against the
  limit, and how much longer a run would decide an undecided one);
- the numbers a gate reads are `RunData` / `Metrics` from `sm_locust.record.runfolder`, the one
  run-folder reader (totals and exact per-name figures from summary.json, counted in logical
  invocations; goodput beside attempts);
- `gates`: the strategy objects (`MaxLatency`, `MaxErrorRate`, `MinRps`, `MinRequests`,
  `NoRegression`); each `judge()` returns an `Outcome` (status, message);
- `spec`: command-line values -> validated gates (contradictory limits are usage errors);
- `baseline`: regression gates against an earlier run (`compare`: the change with its interval,
  from a block bootstrap of both runs' per-second samples);
- `junit`: JUnit XML, one testcase per gate.
"""

from typing import TYPE_CHECKING

from sm_locust.gates.decide import FAIL, INCONCLUSIVE, PASS

if TYPE_CHECKING:
    from sm_locust.gates.gates import (
        Gate,
        MaxErrorRate,
        MaxLatency,
        MinRequests,
        MinRps,
        NoRegression,
        Outcome,
        Verdict,
        evaluate,
    )

__all__ = ["FAIL", "INCONCLUSIVE", "PASS", "Gate", "MaxErrorRate", "MaxLatency", "MinRequests", "MinRps",
           "NoRegression", "Outcome", "Verdict", "evaluate"]


def __getattr__(name: str) -> object:
    """The gates' names, imported when first used: `decide` (the one judge of a limit, which the run's
    closing checks use) must not pull the run-folder reader and pandas into `sm-locust run`'s parent."""
    if name in __all__:
        from sm_locust.gates import gates  # lazy: gates.gates reads run folders (pandas); decide is light

        return getattr(gates, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
