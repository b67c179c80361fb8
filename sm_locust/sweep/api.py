"""The sweep's entry points: check a sweep file, plan it, run it, clean up after it.

    sweep = load_sweep("sweep.yaml")          # every check, nothing deployed (UsageError otherwise)
    print("\\n".join(plan_lines(sweep)))      # what would be deployed, for how long, for how much
    result = run_sweep(sweep, yes=True)       # sweep.json / sweep.csv / sweep.html in sweep.out_dir
    cleanup("ranker-concurrency")             # delete what a killed SageMaker sweep left behind

`sweep(...)` does the first three in one call and accepts a `sagemaker.model.Model` (its image,
model data, role and environment become the shared endpoint settings), so the SageMaker Python
SDK stays an optional extra. The CLI (`sm_locust/cli/sweep.py`) is a thin adapter over these.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sm_locust.errors import RunError, UsageError
from sm_locust.report.cost import load_prices
from sm_locust.sweep import render
from sm_locust.sweep.costing import Estimate, Price, estimate, figures, price_of
from sm_locust.sweep.deployers import Deployer, Deployment, DeployError, create_deployer
from sm_locust.sweep.grid import Configuration, configuration_key, expand
from sm_locust.sweep.load import LoadPlan, check_payload, parse_load
from sm_locust.sweep.objective import Candidate, disqualification, pareto_front, recommend
from sm_locust.sweep.pipeline import Durations, simulate
from sm_locust.sweep.progress import Printer, duration_text, say
from sm_locust.sweep.runner import RunOutcome, SweepRunner, is_complete
from sm_locust.sweep.schema import SweepSpec, load_spec, parse_spec

DEFAULT_SWEEPS_DIR = "sweeps"
# Sweeps of another kind, loaded by name when the file has their section (they build on this module):
# SweepSpec attribute -> "module:function(spec, out=, client=, poll_s=) -> Sweep"
SWEEP_KINDS = {"serverless": "sm_locust.sweep.serverless:load"}
PRICING_ONLY = {"local": ("instance_type", "price_per_hour")}  # settings that price a configuration without changing it


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

    runner_class = SweepRunner  # what runs it (a serverless sweep's runner runs three tests per configuration)

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

    def base_row(self, c: Configuration) -> dict[str, Any]:
        price = self.prices[c.index]
        return {"index": c.index, "label": c.label, "key": self.keys[c.index], "settings": dict(c.settings),
                "status": "pending", "reason": None, "resumed": False,
                "run_dir": self.run_dir(c).name, "price_per_hour": price.usd_per_hour, "price_source": price.source,
                "instance_type": price.instance_type, "instance_count": price.instance_count}

    def new_deployment(self, index: int) -> Deployment:
        c = self.configuration(index)
        d = Deployment(index=index, key=self.keys[index], settings=dict(c.settings), run_dir=self.run_dir(c),
                       region=self.spec.region)
        self.deployer.prepare(d, self.spec.sweep_id)
        return d

    def cost_figures(self, index: int, capacity_rps: float | None) -> dict[str, Any]:
        return figures(capacity_rps, self.prices[index], self.spec.objective)

    def budget_allows(self, index: int, rows: Mapping[int, Mapping[str, Any]], in_flight: list[int]) -> bool:
        """Spent so far (measured billing) + estimates of the endpoints alive + this one's <= max_cost_usd."""
        if self.spec.max_cost_usd is None:
            return True
        spent = sum(float(r.get("cost_usd") or 0.0) for i, r in rows.items() if i not in in_flight)
        alive = sum(self.estimates[i].usd or 0.0 for i in in_flight if i in self.estimates)
        own = self.estimates[index].usd or 0.0 if index in self.estimates else 0.0
        return spent + alive + own <= self.spec.max_cost_usd + 1e-9

    # -- results ------------------------------------------------------------------------------------
    def document(self, rows: Mapping[int, dict[str, Any]], outcome: RunOutcome | None = None) -> dict[str, Any]:
        """sweep.json's content for the rows so far (docs/sweep.md)."""
        objective = self.spec.objective
        ordered = [rows[c.index] for c in self.configurations if c.index in rows]
        candidates = [Candidate(index=r["index"], label=r["label"], status=r["status"], reason=r.get("reason"),
                                capacity_rps=r.get("capacity_rps"), knee_users=r.get("knee_users"),
                                latency_ms=r.get("latency_ms"), error_rate=r.get("error_rate"),
                                cost_per_1m=r.get("cost_per_1m"), instances_needed=r.get("instances_needed"),
                                cost_per_hour_at_target=r.get("cost_per_hour_at_target"),
                                no_capacity_reason=r.get("no_capacity_reason")) for r in ordered]
        finished = [c for c in candidates if c.status not in ("pending", "running")]
        rec = recommend(finished, objective)
        front = pareto_front([(c.index, c.cost_per_1m, c.latency_ms) for c in finished
                              if c.status == "ok" and c.cost_per_1m is not None and c.latency_ms is not None])
        self.mark_rows(candidates, ordered, rec.lost, disqualification, front)
        return {
            **self.document_head(render.SCHEMA, outcome),
            "configurations": ordered,
            "recommendation": self.recommendation(rec),
            "pareto": front,
            "why_not": self.why_not(rec),
        }

    def mark_rows(self, candidates: list[Any], ordered: list[dict[str, Any]], lost: Mapping[int, str],
                  disqualify: Callable[[Any, Any], str | None], front: list[int] | None = None) -> None:
        """Each row's meets_objective, lost_because, (with `front`) pareto, and its run report's link."""
        for c, r in zip(candidates, ordered):
            r["meets_objective"] = c.status == "ok" and disqualify(c, self.spec.objective) is None
            r["lost_because"] = lost.get(c.index)
            if front is not None:
                r["pareto"] = c.index in front
            report = self.out_dir / r["run_dir"] / "report.html"
            r["report"] = f"{r['run_dir']}/report.html" if report.exists() else None

    def document_head(self, schema: int, outcome: RunOutcome | None, kind: str | None = None) -> dict[str, Any]:
        """sweep.json's opening keys: the sweep's identity, timing, parallelism, objective and load."""
        objective = self.spec.objective
        return {
            "schema": schema, **({"kind": kind} if kind else {}), "name": self.spec.name, "sweep_id": self.spec.sweep_id,
            "description": self.spec.description, "deploy": self.spec.deploy, "file": self.spec.source,
            "started_at": self.started_at, "ended_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_s": round(outcome.wall_s, 1) if outcome else None,
            "interrupted": bool(outcome and outcome.interrupted),
            "max_parallel_endpoints": self.spec.max_parallel_endpoints,
            "peak_alive_endpoints": outcome.peak_alive if outcome else None,
            "objective": {**objective.as_dict(), "percentile_label": objective.percentile_label},
            "load": self.plan.given,
        }

    def recommendation(self, rec: Any) -> dict[str, Any]:
        """sweep.json's `recommendation`: the winner's index, label and settings, and the sentence."""
        winner = rec.winner
        if winner is None:
            return {"index": None, "label": None, "settings": None, "reason": rec.reason}
        return {"index": winner.index, "label": winner.label, "settings": self.configuration(winner.index).settings,
                "reason": rec.reason}

    def why_not(self, rec: Any) -> dict[str, str]:
        """sweep.json's `why_not`: label -> why that configuration lost, in file order."""
        return {self.configuration(i).label: why for i, why in sorted(rec.lost.items())}

    def write_progress(self, rows: Mapping[int, dict[str, Any]]) -> None:
        """sweep.json and sweep.csv after every configuration, so a crash keeps what was measured."""
        self.write_outputs(self.document(rows), html_too=False)

    def write_outputs(self, document: dict[str, Any], html_too: bool = True) -> dict[str, Path]:
        return render.write_all(self.out_dir, document, html_too)


@dataclass
class SweepResult:
    sweep: Sweep
    document: dict[str, Any]
    outputs: dict[str, Path]
    interrupted: bool = False
    signum: int = 2

    @property
    def exit_code(self) -> int:
        """0 every configuration measured and one recommended; 1 otherwise; 128 + the signal when
        interrupted (130 Ctrl-C, 143 SIGTERM), after the cleanup."""
        if self.interrupted:
            return 128 + int(self.signum)
        statuses = {c["status"] for c in self.document["configurations"]}
        return 0 if statuses <= {"ok"} and self.document["recommendation"]["index"] else 1

    # -- in a notebook (the Python API: `sm_locust.sweep(...)`) -------------------------------------
    @property
    def out_dir(self) -> Path:
        return self.sweep.out_dir

    @property
    def recommendation(self) -> dict[str, Any]:
        """sweep.json's `recommendation`: the winner's index, label and settings, and the sentence why."""
        return self.document["recommendation"]

    @property
    def table(self) -> Any:
        """sweep.csv as a pandas DataFrame: one row per configuration, whatever the sweep's kind."""
        import pandas as pd

        return pd.read_csv(self.outputs["csv"])

    def _repr_html_(self) -> str:
        import html

        reason = self.recommendation.get("reason") or "No recommendation."
        page = self.outputs.get("html")
        return (f"<p><b>{html.escape(reason)}</b></p>"
                + self.table.to_html(index=False, na_rep="-", float_format=lambda v: f"{v:,.4g}")
                + (f"<p><small>{html.escape(str(page))} (sweep.json, sweep.csv; one run folder per configuration)"
                   "</small></p>" if page else ""))


# -------------------------------------------------------------------------------------- checking


def _apply_model(spec: SweepSpec, model: Any) -> None:
    """A sagemaker.model.Model's image, model data, role and env as shared endpoint defaults."""
    defaults = {"image": getattr(model, "image_uri", None), "role": getattr(model, "role", None)}
    data = getattr(model, "model_data", None)
    if isinstance(data, str):
        defaults["model_data_url"] = data
    for key, value in (getattr(model, "env", None) or {}).items():
        defaults[f"environment.{key}"] = value
    for key, value in defaults.items():
        if value is not None and key not in spec.endpoint:
            spec.endpoint[key] = value


def _where(spec: SweepSpec, c: Configuration) -> Callable[[str], str]:
    def where(key: str) -> str:
        if not key:
            return f"{spec.source}: configuration {c.label!r}"
        if key in spec.grid:
            return f"{spec.source}: grid.{key}"
        for i, item in enumerate(spec.configurations):
            if key in item or key.split(".", 1)[0] in item:
                return f"{spec.source}: configurations[{i}].{key}"
        if key in spec.endpoint:
            return f"{spec.source}: endpoint.{key}"
        if key in ("instance_type", "price_per_hour") and getattr(spec, key) is not None:
            return f"{spec.source}: {key}"
        return f"{spec.source}: endpoint.{key}"

    return where


def load_sweep(source: str | Path | Mapping[str, Any], *, out: str | Path | None = None, overrides: list[str] | None = None,
               client=None, model: Any = None, poll_s: float | None = None, base_dir: Path | None = None) -> Sweep:
    """Read and check a sweep (a file or a mapping); UsageError naming the key when anything is wrong."""
    if isinstance(source, Mapping):
        spec = parse_spec(source, source="<sweep>", base_dir=base_dir or Path.cwd())
    else:
        spec = load_spec(source, overrides)
    if model is not None:
        _apply_model(spec, model)
    for attribute, target in SWEEP_KINDS.items():  # a serverless: section -> sweep/serverless.py (issue 14)
        if getattr(spec, attribute, None) is not None:
            module, _, function = target.partition(":")
            return getattr(importlib.import_module(module), function)(spec, out=out, client=client, poll_s=poll_s)
    kwargs: dict[str, Any] = {}
    if spec.deploy == "sagemaker":
        kwargs = {"client": client, "region": spec.region, "profile": spec.aws_profile,
                  "timeout_s": spec.deploy_timeout_minutes * 60.0}
        if poll_s is not None:
            kwargs["poll_s"] = poll_s
    try:
        deployer = create_deployer(spec.deploy, **kwargs)
    except UsageError as exc:
        raise UsageError(f"{spec.source}: deploy: {exc.message}") from None
    configurations = expand(spec.shared_settings(), spec.grid, spec.configurations)
    for c in configurations:
        deployer.check(c.settings, _where(spec, c))
    plan = parse_load(spec.load, spec.objective, source=spec.source, base_dir=spec.base_dir)
    check_payload(plan)
    try:
        table = load_prices(spec.prices)
    except UsageError as exc:
        raise UsageError(f"{spec.source}: prices: {exc.message}") from None
    prices = {c.index: price_of(c.settings, table, where=_where(spec, c)("instance_type")) for c in configurations}
    pricing_only = PRICING_ONLY.get(spec.deploy, ("price_per_hour",))
    keys = {c.index: configuration_key(spec.deploy, {k: v for k, v in c.settings.items() if k not in pricing_only}, plan.given)
            for c in configurations}
    out_dir = Path(out) if out else Path(DEFAULT_SWEEPS_DIR) / spec.sweep_id
    sweep = Sweep(spec, deployer, plan, configurations, keys, prices, out_dir)
    _estimate(sweep)
    return sweep


def _estimate(sweep: Sweep) -> None:
    """Which configurations are already measured, the plan's estimates, the budget's cut."""
    spec = sweep.spec
    deploy_s = spec.expected_deploy_minutes * 60.0 if spec.expected_deploy_minutes is not None else sweep.deployer.expected_deploy_s
    test_s = sweep.plan.expected_test_s()
    delete_s = sweep.deployer.expected_delete_s
    for c in sweep.configurations:
        sweep.complete[c.index] = is_complete(sweep.run_dir(c), sweep.keys[c.index])
    pending = [c.index for c in sweep.configurations if not sweep.complete[c.index]]
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
        e = estimate(sweep.prices[i], deploy_s=deploy_s, test_s=test_s, delete_s=delete_s,
                     wait_s=max(0.0, billed[i] - deploy_s - test_s - delete_s))
        sweep.estimates[i] = e
        if spec.max_cost_usd is not None and (over or spent + (e.usd or 0.0) > spec.max_cost_usd + 1e-9):
            over = True
            continue
        spent += e.usd or 0.0
        sweep.allowed.add(i)
    allowed = [i for i in pending if i in sweep.allowed]
    sweep.wall_estimate_s = simulate({i: durations[i] for i in allowed}, spec.max_parallel_endpoints).wall_s if allowed else 0.0


# ------------------------------------------------------------------------------------------ plan


def _money(value: float | None) -> str:
    if value is None:
        return "$?"
    return f"${value:.2f}" if value >= 0.1 else f"${value:.4f}".rstrip("0").rstrip(".")


def plan_totals(sweep: Sweep) -> dict[str, Any]:
    run = sweep.to_run()
    hours = sum(sweep.estimates[i].instance_hours for i in run)
    priced = [sweep.estimates[i].usd for i in run]
    usd = None if any(u is None for u in priced) else sum(priced)
    return {"configurations": len(sweep.configurations), "to_run": len(run),
            "measured_before": sum(1 for v in sweep.complete.values() if v),
            "over_budget": sum(1 for i in sweep.estimates if i not in sweep.allowed),
            "wall_s": sweep.wall_estimate_s, "instance_hours": hours, "usd": usd}


def plan_lines(sweep: Sweep) -> list[str]:
    """`--plan`: each configuration, what it would deploy, its estimate; the totals; the load."""
    spec = sweep.spec
    lines = [f"sm-locust sweep: plan for {spec.name!r}: {len(sweep.configurations)} configurations on {spec.deploy} "
             f"(sweep id {spec.sweep_id}), results in {sweep.out_dir}/"]
    for c in sweep.configurations:
        i = c.index
        price = sweep.prices[i]
        priced = f" (${price.usd_per_hour:.3f}/h)" if price.usd_per_hour is not None else ""
        head = f"  [{i}] {c.label}: {sweep.deployer.describe(c.settings)}{priced}"
        if sweep.complete[i]:
            lines.append(f"{head}; measured before (run folder {sweep.run_dir(c).name} complete): skipped")
            continue
        e = sweep.estimates[i]
        tail = (f"; about {duration_text(e.billed_s)} alive, {e.instance_hours:.3f} instance-hours, {_money(e.usd)}")
        if i not in sweep.allowed:
            tail += f"; NOT RUN: max_cost_usd {spec.max_cost_usd:g} would be passed"
        lines.append(head + tail)
    t = plan_totals(sweep)
    what = "as if on the priced instance; nothing is billed locally" if spec.deploy == "local" else "billed by AWS"
    lines.append(f"  total: {t['to_run']} to run ({t['measured_before']} measured before, {t['over_budget']} over budget), "
                 f"about {duration_text(t['wall_s'])} with max_parallel_endpoints {spec.max_parallel_endpoints}, "
                 f"{t['instance_hours']:.3f} instance-hours, {_money(t['usd'])} ({what})")
    shown = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                      for k, v in sweep.plan.given.items() if k not in ("payload", "shape"))
    lines.append(f"  load per configuration: shape {sweep.plan.shape or 'constant users'}"
                 + (f", {shown}" if shown else "") + f"; about {duration_text(sweep.plan.expected_test_s())} per test")
    return lines


# ------------------------------------------------------------------------------------------- run


def run_sweep(sweep: Sweep, *, yes: bool = False, confirm: Callable[[str], bool] | None = None,
              printer: Printer | None = None, handle_signals: bool = True) -> SweepResult:
    """Run every configuration still to measure; write sweep.json, sweep.csv and sweep.html."""
    printer = printer or Printer()
    t = plan_totals(sweep)
    if t["to_run"] and sweep.deployer.needs_confirmation and not yes:
        question = (f"create {t['to_run']} {sweep.spec.deploy} endpoint{'s' if t['to_run'] != 1 else ''} "
                    f"(about {t['instance_hours']:.2f} instance-hours, {_money(t['usd'])})?")
        if confirm is None:
            raise UsageError(f"this sweep would {question[:-1]}: review `sm-locust sweep {sweep.spec.source} --plan`, "
                             "then pass --yes")
        if not confirm(question):
            raise RunError("nothing deployed (not confirmed)")
    sweep.started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    say(printer, f"{sweep.spec.name}: {t['configurations']} configurations on {sweep.spec.deploy}, {t['to_run']} to run"
                + (f" ({t['measured_before']} measured before)" if t["measured_before"] else "")
                + f", about {duration_text(t['wall_s'])}; results in {sweep.out_dir}/")
    outcome = sweep.runner_class(sweep, printer, handle_signals=handle_signals).run()
    document = sweep.document(outcome.rows, outcome)
    outputs = sweep.write_outputs(document)
    say(printer, f"recommendation: {document['recommendation']['reason']}")
    say(printer, f"results in {outputs['html']} (sweep.json, sweep.csv; one run folder per configuration)")
    return SweepResult(sweep, document, outputs, outcome.interrupted, outcome.signum)


def sweep(source: str | Path | Mapping[str, Any], *, out: str | Path | None = None, yes: bool = False, model: Any = None,
          client=None, overrides: list[str] | None = None) -> SweepResult:
    """Check, plan and run a sweep in one call (`model`: a sagemaker.model.Model to clone settings from)."""
    return run_sweep(load_sweep(source, out=out, overrides=overrides, client=client, model=model), yes=yes)


def cleanup(sweep_id: str, *, deploy: str = "sagemaker", region: str | None = None, profile: str | None = None,
            client=None, printer: Printer | None = None) -> tuple[list[str], list[str]]:
    """Delete every resource tagged with this sweep id: (deleted, left)."""
    printer = printer or Printer()
    kwargs = {"client": client, "region": region, "profile": profile} if deploy == "sagemaker" else {}
    deployer = create_deployer(deploy, **kwargs)
    try:
        return deployer.cleanup(sweep_id, lambda text: say(printer, text))
    except DeployError as exc:
        raise RunError(str(exc)) from None
