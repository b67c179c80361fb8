"""A configuration's row: what a sweep records about one configuration, typed, and the one place a
row becomes a sweep.json object.

The runner fills a row as the configuration goes, the kind reads its figures back from the run
folder (`Sweep.measure_row`) and its ranking marks it; `Row.as_dict` writes the groups in one order
for every kind and path (keys: docs/sweep.md). A group is absent until it happened; inside a group a
figure that could not be known is null. A kind subclasses `Row` with its identity fields
(`identity()`) and a figures dataclass with `as_dict()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class Figures(Protocol):
    """A kind's measured figures of one configuration."""

    def as_dict(self) -> dict[str, object]:
        """Its sweep.json keys, in order."""
        ...


@dataclass(kw_only=True)
class Timing:
    """How long this run of the sweep spent on the configuration (seconds, rounded to 0.1)."""

    wall_s: float  # from the start of its creation to the end of its measurement
    deploy_s: float | None = None  # creation (None: it failed or was interrupted)
    test_s: float | None = None  # the test

    def as_dict(self) -> dict[str, object]:
        return {"wall_s": self.wall_s, "deploy_s": self.deploy_s, "test_s": self.test_s}


@dataclass(kw_only=True)
class Marks:
    """What the ranking says of the configuration, and the link to its run report."""

    meets_objective: bool
    lost_because: str | None = None
    pareto: bool | None = None  # kinds that draw a Pareto front (None: not written)
    report: str | None = None  # `<run folder>/report.html` when it exists

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"meets_objective": self.meets_objective, "lost_because": self.lost_because}
        if self.pareto is not None:
            out["pareto"] = self.pareto
        out["report"] = self.report
        return out


@dataclass(kw_only=True)
class Teardown:
    """What was deployed, once it is deleted (or could not be)."""

    deployed: dict[str, Any]  # endpoint_name, resources, and the deployer's own info
    billed_s: float | None = None  # from the start of creation to the end of deletion (None: never created)
    cost_usd: float | None = None  # billed_s x price x count (None: no price)
    left_behind: list[str] = field(default_factory=list)  # what could not be deleted

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"deployed": self.deployed}
        if self.billed_s is not None:
            out["billed_s"] = self.billed_s
        if self.cost_usd is not None:
            out["cost_usd"] = self.cost_usd
        if self.left_behind:
            out["left_behind"] = list(self.left_behind)
        return out


@dataclass(kw_only=True)
class Remeasure:
    """The first measurement of a configuration measured again by itself because the load generator was
    the bottleneck (runner.py): why, and where that first run folder was kept."""

    first_reason: str
    first_run_dir: str  # the first run folder, renamed beside the configuration's (`<run_dir>.client-bound`)
    first_cost_usd: float | None = None  # what the first deployment was billed (added to the row's cost_usd)
    first_billed_s: float | None = None
    first_report: str | None = None  # `<first_run_dir>/report.html` when that run's report was drawn

    def as_dict(self) -> dict[str, object]:
        return {"first_reason": self.first_reason, "first_run_dir": self.first_run_dir,
                "first_cost_usd": self.first_cost_usd, "first_billed_s": self.first_billed_s,
                "first_report": self.first_report}

    @classmethod
    def from_dict(cls, data: object) -> Remeasure | None:
        if not isinstance(data, dict) or not data.get("first_reason"):
            return None
        report = data.get("first_report")
        return cls(first_reason=str(data["first_reason"]), first_run_dir=str(data.get("first_run_dir") or ""),
                   first_cost_usd=data.get("first_cost_usd"), first_billed_s=data.get("first_billed_s"),
                   first_report=str(report) if report else None)


@dataclass(kw_only=True)
class Confirm:
    """The other replicate of a configuration measured twice to confirm the ranking (runner.py,
    sweep/replicates.py): its run folder, kept beside the configuration's as `<run_dir>.replicate-1`,
    and its figures (read back from that folder; not written to sweep.json twice)."""

    first_run_dir: str
    figures: Figures | None = None
    first_cost_usd: float | None = None  # what the first deployment was billed (added to the row's cost_usd)
    first_billed_s: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {"first_run_dir": self.first_run_dir, "first_cost_usd": self.first_cost_usd,
                "first_billed_s": self.first_billed_s,
                "first_figures": self.figures.as_dict() if self.figures is not None else None}

    @classmethod
    def from_dict(cls, data: object) -> Confirm | None:
        if not isinstance(data, dict) or not data.get("first_run_dir"):
            return None
        return cls(first_run_dir=str(data["first_run_dir"]), first_cost_usd=data.get("first_cost_usd"),
                   first_billed_s=data.get("first_billed_s"))


@dataclass(kw_only=True)
class Row:
    """One configuration's row (a kind subclasses it with its identity and figures)."""

    index: int
    label: str
    key: str
    settings: dict[str, Any]
    run_dir: str  # the run folder's name, in the sweep folder
    status: str = "pending"  # pending | running | ok | inconclusive | failed | skipped | interrupted
    reason: str | None = None  # why it failed, was skipped, interrupted or is inconclusive
    resumed: bool = False  # measured by an earlier run of the sweep
    client_bound: str | None = None  # why its (last) measurement was the load generator's, not the endpoint's
    remeasure: Remeasure | None = None  # measured again by itself after a client-bound first measurement
    confirm: Confirm | None = None  # measured twice to confirm the ranking: the other replicate
    report_gaps: list[str] | None = None  # what `sm-locust report` found missing (None: no report drawn)
    timing: Timing | None = None
    figures: Figures | None = None
    marks: Marks | None = None
    teardown: Teardown | None = None

    def identity(self) -> dict[str, object]:
        """The kind's keys that say what the configuration is, after the shared ones."""
        return {}

    def fail(self, status: str, reason: str | None) -> None:
        self.status, self.reason = status, reason

    @property
    def cost_usd(self) -> float | None:
        """What it was billed, once torn down (None before, or without a price)."""
        return self.teardown.cost_usd if self.teardown is not None else None

    def as_dict(self) -> dict[str, object]:
        """The row as sweep.json's configuration object (the one place rows are written)."""
        out: dict[str, object] = {"index": self.index, "label": self.label, "key": self.key,
                               "settings": dict(self.settings),
                               "status": self.status, "reason": self.reason, "resumed": self.resumed,
                               "run_dir": self.run_dir, "client_bound": self.client_bound}
        if self.remeasure is not None:
            out["remeasured"] = self.remeasure.as_dict()
        if self.confirm is not None:
            out["replicate"] = self.confirm.as_dict()
        out.update(self.identity())
        if self.report_gaps is not None:
            out["report_gaps"] = list(self.report_gaps)
        for group in (self.timing, self.figures, self.marks, self.teardown):
            if group is not None:
                out.update(group.as_dict())
        return out

    def __getitem__(self, key: str) -> Any:
        """Read access by sweep.json key (`row["status"]`), for notebooks and tests."""
        return self.as_dict()[key]
