"""`Sweep`: what every sweep kind is, and the part of it every kind shares.

A checked sweep is its file (`SweepSpec`), a deployer, the load plan, the configurations with keys
and prices, the sweep folder and the plan's estimates. `runner.SweepRunner` drives any `Sweep`; a
kind (`sweep/kinds.py`) subclasses it for what differs (`runner_class`, `base_row`, `measure_row`,
`client_bound`, `configuration_line`, `document`, `write_outputs`, `estimate`; docs/sweep.md, "Adding
a sweep kind"). Shared here: the runner's lookups, the plan's estimates and `max_cost_usd` cut, the
budget check while running, and the keys that open every sweep.json.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from sm_locust.aws.clients import AwsClient
from sm_locust.core.folder import holds_run
from sm_locust.errors import UsageError
from sm_locust.record.repeat import REPEAT_JSON, median_run
from sm_locust.record.summary import LOST_WORKER_FIX
from sm_locust.report.cost import load_prices
from sm_locust.sweep.costing import Estimate, Price, estimate, price_of
from sm_locust.sweep.deployers import Deployer, Deployment
from sm_locust.sweep.grid import Configuration
from sm_locust.sweep.load import LoadPlan
from sm_locust.sweep.objective import J, Objective, Recommended
from sm_locust.sweep.pipeline import Durations, simulate
from sm_locust.sweep.replicates import confirmation_note, drift_note
from sm_locust.sweep.rows import Marks, Row
from sm_locust.sweep.runner import CONFIRM_ROUNDS, RunOutcome, SweepRunner, is_complete
from sm_locust.sweep.schema import SweepSpec
from sm_locust.sweep.trust import (
    WORKER_LOST,
    Criterion,
    client_bound_reason,
    deciding,
    lost_worker_reason,
    untrusted_words,
)
from sm_locust.util.outputs import IN_USE, check_output_dir, refuse_unusable, run_in_progress
from sm_locust.util.yamlsafe import load_json

T = TypeVar("T")  # a kind's ranking candidate

DEFAULT_SWEEPS_DIR = "reports/sweeps"  # under reports/, which git ignores


def sweep_folder(spec: SweepSpec, out: str | Path | None) -> Path:
    """`--out`, or reports/sweeps/<sweep id>/, checked before anything runs (`check_sweep_folder`)."""
    folder = Path(out) if out else Path(DEFAULT_SWEEPS_DIR) / spec.sweep_id
    check_sweep_folder(folder, spec.sweep_id)
    return folder


def held_by(folder: Path, key: str) -> str | None:
    """A text value of the sweep.json in `folder` (`sweep_id`, `kind`, `deploy`), None when the file,
    the key or a text value is not there: what a sweep folder says about the sweep that wrote it."""
    try:
        value = load_json((folder / "sweep.json").read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def check_sweep_folder(folder: Path, sweep_id: str) -> None:
    """A one-line UsageError for a sweep folder that is not this sweep's to write: one that holds
    another sweep (its sweep.json names another sweep id: a rerun of the same sweep resumes there, a
    different one used to overwrite it silently), a run folder, a file in the way, a place that cannot
    be written or a full disk (sm_locust.util.outputs), or a sweep running there right now."""
    flag = "--out"
    refuse_unusable(folder, flag)
    if folder.is_dir():
        if run_in_progress(folder):
            raise UsageError(f"{flag} {folder} {IN_USE}")
        held = held_by(folder, "sweep_id")
        if held is not None and held != sweep_id:
            raise UsageError(f"{flag} {folder} holds another sweep (sweep id {held!r}, this one is {sweep_id!r}); "
                             "choose another folder, or remove that one")
        if holds_run(folder):
            raise UsageError(f"{flag} {folder} holds a run (summary.json, locust_*.csv), not a sweep; choose another "
                             "folder")
    check_output_dir(folder, flag)


def configuration_prices(spec: SweepSpec, configurations: list[Configuration]) -> dict[int, Price]:
    """Each configuration's price (`costing.price_of`: its price_per_hour, else the table's price for its
    instance type), the file's `prices:` table read once; a usage error names the key."""
    try:
        table = load_prices(spec.prices)
    except UsageError as exc:
        raise spec.check.prefixed("prices", exc) from None
    return {c.index: price_of(c.settings, table, where=spec.where(c)("instance_type")) for c in configurations}


def sagemaker_options(spec: SweepSpec, client: AwsClient = None, poll_s: float | None = None) -> dict[str, object]:
    """The keyword arguments of a SageMaker deployer for this file (injected client, region,
    profile, creation timeout, polling interval); empty for other deployers."""
    if spec.deploy != "sagemaker":
        return {}
    options: dict[str, object] = {"client": client, "region": spec.region, "profile": spec.aws_profile,
                               "timeout_s": spec.deploy_timeout_minutes * 60.0}
    if poll_s is not None:
        options["poll_s"] = poll_s
    return options


@dataclass
class Sweep:
    """A checked sweep: its file, deployer, configurations, run options, prices and plan."""

    spec: SweepSpec
    deployer: Deployer
    plan: LoadPlan
    configurations: list[Configuration]
    keys: dict[int, str]
    prices: dict[int, Price]
    out_dir: Path
    estimates: dict[int, Estimate] = field(default_factory=dict)
    complete: dict[int, bool] = field(default_factory=dict)
    allowed: set[int] = field(default_factory=set)
    wall_estimate_s: float = 0.0
    started_at: str = ""

    runner_class: ClassVar[type[SweepRunner]] = SweepRunner  # what runs this kind
    every_step_decides: ClassVar[bool] = False  # a client-bound step anywhere in the run makes it untrustworthy
    judges_client: ClassVar[bool] = True  # whether `client_bound` reads client-bound steps (a lost worker: always)
    confirms: ClassVar[bool] = False  # the kind ranks on replicates: `contenders` names who to measure again

    def confirmation_estimate(self) -> Estimate | None:
        """The most the confirmation adds (`confirm: true`, the default): the dearest configurations to run,
        up to `CONFIRM_ROUNDS` x 2 of them, deployed, tested and deleted once more, one after the other; None
        when it cannot happen."""
        run = self.to_run()
        if not (self.spec.confirm and self.confirms and len(self.configurations) >= 2 and run):
            return None
        dearest = sorted(run, key=lambda i: self.estimates[i].usd or 0.0)[-2 * CONFIRM_ROUNDS:]
        each = [self.estimates[i] for i in dearest]
        usd = [e.usd for e in each]
        return Estimate(sum(e.deploy_s for e in each), sum(e.test_s for e in each), sum(e.delete_s for e in each),
                        0.0, sum(e.instance_hours for e in each),
                        None if any(u is None for u in usd) else sum(u or 0.0 for u in usd))

    def contenders(self, rows: Mapping[int, Row]) -> list[int]:
        """Indexes of the leader and the runner-up to measure again (`replicates.contenders` on the kind's
        ranking), [] when nothing needs confirming or the kind does not confirm."""
        return []

    def replicate_pairs(self, ordered: Sequence[Row], candidate: Callable[[Any], T]) -> dict[int, tuple[T, T]]:
        """Configuration index -> (its candidate, its other replicate's candidate) for each ok row measured
        twice (`Row.confirm`)."""
        pairs: dict[int, tuple[T, T]] = {}
        for r in ordered:
            if r.status == "ok" and r.confirm is not None and r.confirm.figures is not None:
                pairs[r.index] = (candidate(r), candidate(replace(r, figures=r.confirm.figures)))
        return pairs

    def confirmation_tail(self, ranked: Sequence[T], pairs: Mapping[int, tuple[T, T]],
                          criteria: Sequence[Criterion[T]]) -> str:
        """The recommendation's words on the confirmation (`replicates.confirmation_note`): who was measured
        twice, whether the winner and the runner-up still differ on both replicates, and any drift."""
        if not pairs:
            return ""
        labels = [self.configuration(i).label for i in sorted(pairs)]
        notes = [drift_note(labels[k], *pairs[i], criteria) for k, i in enumerate(sorted(pairs))]
        twice = [c for c in ranked if getattr(c, "index", None) in pairs]  # as ranked on both replicates
        tied = False
        if ranked and twice and twice[0] is ranked[0] and len(twice) >= 2:  # the leader vs the next measured twice
            why = deciding(twice[0], twice[1], criteria)[0]
            tied = why is None or why.interval is None
        return confirmation_note(labels, notes, tied=tied)

    def client_bound(self, run_dir: Path) -> str | None:
        """Why this configuration's run measured the load generator rather than the endpoint, or None
        (sweep/trust.py reads the run's summary.json; with `repeat:`, every run's: one bound run is enough).
        A kind that does not judge client-bound steps (`judges_client`) still reads a lost Locust worker."""
        reasons = []
        for label, folder in self.result_dirs(run_dir):
            try:
                summary = load_json((folder / "summary.json").read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(summary, dict):
                continue
            reason = (client_bound_reason(summary, every_step=self.every_step_decides) if self.judges_client
                      else lost_worker_reason(summary))
            if reason:
                reasons.append(f"{label}: {reason}" if label else reason)
        return "; ".join(reasons) or None

    def repeat_document(self, run_dir: Path) -> dict[str, Any] | None:
        """The run folder's repeat.json (`load: {repeat: N}`), None when it ran once."""
        try:
            document = load_json((run_dir / REPEAT_JSON).read_text())
        except (OSError, ValueError):
            return None
        return document if isinstance(document, dict) and document.get("folders") else None

    def result_dirs(self, run_dir: Path) -> list[tuple[str, Path]]:
        """(label, folder) of each run of the configuration: itself, or with `repeat:` run-1/ .. run-N/."""
        document = self.repeat_document(run_dir)
        if document is None:
            return [("", run_dir)]
        return [(str(name), run_dir / str(name)) for name in document["folders"]]

    def quoted_dir(self, run_dir: Path) -> Path:
        """The run folder a configuration's figures are read from: its own, or with `repeat:` the run whose
        capacity is the median of the runs' (one run's own steps, `record.repeat.median_run`)."""
        document = self.repeat_document(run_dir)
        if document is None:
            return run_dir
        index = median_run(document)
        return run_dir / str(document["folders"][index if index is not None else 0])

    # -- lookups the runner uses -------------------------------------------------------------------
    def configuration(self, index: int) -> Configuration:
        return self.configurations[index - 1]

    def run_dir(self, c: Configuration) -> Path:
        """`<what varies>-<key>`; a folder with the same key under another name (the grid grew, so
        what varies changed) is found by its key suffix, so the rerun still resumes."""
        key = self.keys[c.index]
        path = self.out_dir / c.slug(key)
        if not path.exists() and self.out_dir.is_dir():
            for other in sorted(self.out_dir.glob(f"*-{key[:6]}")):
                if is_complete(other, key):
                    return other
        return path

    def to_run(self) -> list[int]:
        return [c.index for c in self.configurations if not self.complete[c.index] and c.index in self.allowed]

    def skip_reason(self, index: int) -> str:
        return f"max_cost_usd {self.spec.max_cost_usd:g} would be passed (plan estimate)"

    def new_deployment(self, index: int) -> Deployment:
        c = self.configuration(index)
        d = Deployment(index=index, key=self.keys[index], settings=self.deployer_settings(c), run_dir=self.run_dir(c),
                       region=self.spec.region)
        self.deployer.prepare(d, self.spec.sweep_id)
        return d

    def budget_allows(self, index: int, rows: Mapping[int, Row], in_flight: list[int]) -> bool:
        """Spent so far (measured billing) + estimates of the endpoints alive + this one's <= max_cost_usd."""
        if self.spec.max_cost_usd is None:
            return True
        spent = sum(r.cost_usd or 0.0 for i, r in rows.items() if i not in in_flight)
        alive = sum(self.estimates[i].usd or 0.0 for i in in_flight if i in self.estimates)
        own = self.estimates[index].usd or 0.0 if index in self.estimates else 0.0
        return spent + alive + own <= self.spec.max_cost_usd + 1e-9

    def deployer_settings(self, c: Configuration) -> dict[str, object]:
        """What the deployer is given of configuration `c`'s settings (a kind may keep some for its test)."""
        return dict(c.settings)

    def run_options(self, index: int) -> dict[str, object]:
        """`sm-locust run` options of configuration `index`'s test beyond the `load:` section's (by dest)."""
        return {}

    # -- the plan ----------------------------------------------------------------------------------
    def estimate(self) -> None:
        """Which configurations are already measured, the plan's estimates, the budget's cut."""
        spec = self.spec
        deploy_s = (spec.expected_deploy_minutes * 60.0 if spec.expected_deploy_minutes is not None
                    else self.deployer.expected_deploy_s)
        test_s = self.plan.expected_test_s()
        delete_s = self.deployer.expected_delete_s
        for c in self.configurations:
            self.complete[c.index] = is_complete(self.run_dir(c), self.keys[c.index])
        pending = [c.index for c in self.configurations if not self.complete[c.index]]
        durations = {i: Durations(deploy_s, test_s, delete_s) for i in pending}
        billed = {i: deploy_s + test_s + delete_s for i in pending}
        if pending:
            started: dict[int, float] = {}
            for at, what, i in simulate(durations, spec.max_parallel_endpoints).events:
                if what == "deploy":
                    started[i] = at
                elif what == "deleted":
                    billed[i] = at - started[i]
        spent = 0.0
        over = False
        for i in pending:
            e = estimate(self.prices[i], deploy_s=deploy_s, test_s=test_s, delete_s=delete_s,
                         wait_s=max(0.0, billed[i] - deploy_s - test_s - delete_s))
            self.estimates[i] = e
            if spec.max_cost_usd is not None and (over or spent + (e.usd or 0.0) > spec.max_cost_usd + 1e-9):
                over = True
                continue
            spent += e.usd or 0.0
            self.allowed.add(i)
        allowed = [i for i in pending if i in self.allowed]
        self.wall_estimate_s = (simulate({i: durations[i] for i in allowed}, spec.max_parallel_endpoints).wall_s
                                if allowed else 0.0)

    # -- what each kind supplies -------------------------------------------------------------------
    def row_fields(self, c: Configuration) -> dict[str, Any]:
        """The shared fields of configuration `c`'s row: who it is and where its run folder is."""
        return {"index": c.index, "label": c.label, "key": self.keys[c.index], "settings": dict(c.settings),
                "run_dir": self.run_dir(c).name}

    def base_row(self, c: Configuration) -> Row:
        """The row of configuration `c` before it runs: the kind's `Row` subclass, from `row_fields(c)`
        and the kind's identity (price, memory size, ...)."""
        raise NotImplementedError

    def measure_row(self, index: int, run_dir: Path, row: Row) -> None:
        """Set `row.figures` from the configuration's run folder (OSError, ValueError or KeyError: the
        runner records the configuration as failed, with the error)."""
        raise NotImplementedError

    def configuration_line(self, index: int, total: int, row: Row) -> str:
        """The line printed when configuration `index` is done (measured, failed, skipped, resumed)."""
        raise NotImplementedError

    def document(self, rows: Mapping[int, Row], outcome: RunOutcome | None = None) -> dict[str, Any]:
        """sweep.json's content for the rows so far (`Row.as_dict` for each configuration)."""
        raise NotImplementedError

    def write_outputs(self, document: dict[str, Any], html_too: bool = True) -> dict[str, Path]:
        """sweep.json, sweep.csv and (with `html_too`) sweep.html; their paths by kind."""
        raise NotImplementedError

    # -- sweep.json's shared parts -----------------------------------------------------------------
    def ordered_rows(self, rows: Mapping[int, Row]) -> list[Row]:
        """The rows in file order."""
        return [rows[c.index] for c in self.configurations if c.index in rows]

    def mark_rows(self, candidates: Sequence[J], ordered: list[Row], lost: Mapping[int, str],
                  disqualify: Callable[[J, Objective], str | None], front: list[int] | None = None) -> None:
        """Each row's marks: meets_objective, lost_because, (with `front`) pareto, its run report's link."""
        for c, r in zip(candidates, ordered, strict=True):
            report = self.out_dir / r.run_dir / "report.html"
            r.marks = Marks(meets_objective=c.status == "ok" and disqualify(c, self.spec.objective) is None,
                            lost_because=lost.get(c.index), pareto=None if front is None else c.index in front,
                            report=f"{r.run_dir}/report.html" if report.exists() else None)

    def document_head(self, schema: int, outcome: RunOutcome | None, kind: str | None = None) -> dict[str, object]:
        """sweep.json's opening keys: the sweep's identity, timing, parallelism, objective and load."""
        objective = self.spec.objective
        return {
            "schema": schema, **({"kind": kind} if kind else {}), "name": self.spec.name,
            "sweep_id": self.spec.sweep_id,
            "description": self.spec.description, "deploy": self.spec.deploy, "file": self.spec.source,
            "started_at": self.started_at, "ended_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_s": round(outcome.wall_s, 1) if outcome else None,
            "interrupted": bool(outcome and outcome.interrupted),
            "max_parallel_endpoints": self.spec.max_parallel_endpoints,
            "peak_alive_endpoints": outcome.peak_alive if outcome else None,
            "objective": {**objective.as_dict(), "percentile_label": objective.percentile_label},
            "load": self.plan.given,
        }

    def recommendation(self, rec: Recommended, rows: Sequence[Row] = (), tail: str = "") -> dict[str, object]:
        """sweep.json's `recommendation`: the winner's index, label and settings, and the sentence; with
        a winner while other configurations are INCONCLUSIVE (measured twice with the load generator as
        the bottleneck), the sentence says they were not compared, so the choice is among the rest."""
        winner = rec.winner
        inconclusive = [r.label for r in rows if r.status == "inconclusive"]
        if winner is None:
            return {"index": None, "label": None, "settings": None, "reason": rec.reason, "inconclusive": inconclusive}
        reason = rec.reason + tail
        if inconclusive:
            why = untrusted_words(" ".join(r.reason or "" for r in rows if r.status == "inconclusive"))
            fix = ("measure it on a less busy machine or with more workers" if "load generator" in why
                   else LOST_WORKER_FIX if why.startswith(WORKER_LOST) else "measure it with longer steps")
            reason += f" (chosen without {', '.join(inconclusive)}: INCONCLUSIVE, {why} in both measurements; {fix})"
        tied = [self.configuration(i).label for i in getattr(rec, "tied", [])]
        return {"index": winner.index, "label": winner.label, "settings": self.configuration(winner.index).settings,
                "reason": reason, "tied_with": tied, "inconclusive": inconclusive}

    def why_not(self, rec: Recommended) -> dict[str, str]:
        """sweep.json's `why_not`: label -> why that configuration lost, in file order."""
        return {self.configuration(i).label: why for i, why in sorted(rec.lost.items())}

    def write_progress(self, rows: Mapping[int, Row]) -> None:
        """sweep.json and sweep.csv after every configuration, so a crash keeps what was measured."""
        self.write_outputs(self.document(rows), html_too=False)
