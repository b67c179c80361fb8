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
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sm_locust.aws.clients import AwsClient
from sm_locust.errors import RunError, UsageError
from sm_locust.sanitize import page_text
from sm_locust.scaling.aws import JOURNAL_DIR
from sm_locust.sweep.base import DEFAULT_SWEEPS_DIR, Sweep, held_by
from sm_locust.sweep.deployers import DeployError, create_deployer
from sm_locust.sweep.deployers.local import tagged_folders
from sm_locust.sweep.kinds import DEFAULT_KIND, KINDS
from sm_locust.sweep.progress import Printer, say
from sm_locust.sweep.schema import SweepSpec, load_spec, parse_spec
from sm_locust.util.arguments import require_bool, require_path
from sm_locust.util.formatting import count, duration, money
from sm_locust.util.outputs import run_in_progress

if TYPE_CHECKING:
    import pandas as pd


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
    def recommendation(self) -> dict[str, object]:
        """sweep.json's `recommendation`: the winner's index, label and settings, and the sentence why."""
        return self.document["recommendation"]

    @property
    def table(self) -> pd.DataFrame:
        """sweep.csv as a pandas DataFrame: one row per configuration, whatever the sweep's kind."""
        import pandas as pd  # lazy: ~335 ms (measured), only for this table

        return pd.read_csv(self.outputs["csv"])

    def _repr_html_(self) -> str:
        reason = self.recommendation.get("reason") or "No recommendation."
        page = self.outputs.get("html")
        return (f"<p><b>{page_text(reason)}</b></p>"
                + self.table.to_html(index=False, na_rep="-", float_format=lambda v: f"{v:,.4g}")
                + (f"<p><small>{page_text(str(page))} (sweep.json, sweep.csv; one run folder per configuration)"
                   "</small></p>" if page else ""))


# -------------------------------------------------------------------------------------- checking


def _apply_model(spec: SweepSpec, model: object) -> None:
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


# Each kind's code, named here, above the kinds (the registry, sweep/kinds.py, sits below them and names
# none), and imported for a sweep of that kind only: the kinds' modules take about a second to import.
# load(spec, *, out, client, poll_s) -> Sweep
LOADERS = {"realtime": "sm_locust.sweep.realtime.sweep:load", "serverless": "sm_locust.sweep.serverless.sweep:load",
           "autoscaling": "sm_locust.sweep.autoscaling.sweep:load", "async": "sm_locust.sweep.asynchronous.sweep:load"}
# what `--cleanup ID` does for a kind, when more than its deployer's cleanup:
# cleanup(sweep_id, *, deploy, region, profile, client, out_dir, progress) -> (deleted, left)
CLEANUPS = {"autoscaling": "sm_locust.sweep.autoscaling.sagemaker:cleanup"}


def code_of(target: str) -> Callable[..., Any]:
    """The function a "module:function" target names, its module imported now."""
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


def load_sweep(source: str | Path | Mapping[str, object], *, out: str | Path | None = None,
               overrides: list[str] | None = None,
               client: AwsClient = None, model: object = None, poll_s: float | None = None,
               base_dir: Path | None = None) -> Sweep:
    """Read and check a sweep (a file or a mapping); UsageError naming the key when anything is wrong.
    The file's kind (sweep/kinds.py) builds it: its deployer, load plan, prices and estimates."""
    if not isinstance(source, str | os.PathLike | Mapping) or isinstance(source, bytes):
        raise UsageError(f"a sweep is a sweep file's path or a mapping of its keys, not {type(source).__name__} "
                         f"{source!r}")
    if isinstance(source, Mapping):
        spec = parse_spec(source, source="<sweep>", base_dir=base_dir or Path.cwd())
    else:
        spec = load_spec(source, overrides)
    if model is not None:
        _apply_model(spec, model)
    return code_of(LOADERS[KINDS.get(spec.kind).name])(spec, out=out, client=client, poll_s=poll_s)


# ------------------------------------------------------------------------------------------ plan


def _money(value: float | None) -> str:
    """The plan's dollars: cents from $0.10 up, else four decimals without trailing zeros ($0.0007)."""
    if value is None or value >= 0.1:
        return money(value)
    return money(value, 4).rstrip("0").rstrip(".")


def plan_totals(sweep: Sweep) -> dict[str, Any]:
    run = sweep.to_run()
    hours = sum(sweep.estimates[i].instance_hours for i in run)
    priced = [sweep.estimates[i].usd for i in run]
    usd = None if any(u is None for u in priced) else sum(u or 0.0 for u in priced)
    return {"configurations": len(sweep.configurations), "to_run": len(run),
            "measured_before": sum(1 for v in sweep.complete.values() if v),
            "over_budget": sum(1 for i in sweep.estimates if i not in sweep.allowed),
            "wall_s": sweep.wall_estimate_s, "instance_hours": hours, "usd": usd}


def plan_lines(sweep: Sweep) -> list[str]:
    """`--plan`: each configuration, what it would deploy, its estimate; the totals; the load (and a note
    when its run time is too short for a useful interval: `sweep.shortrun`)."""
    spec = sweep.spec
    how_many = count(len(sweep.configurations), "configuration")
    lines = [f"sm-locust sweep: plan for {spec.name!r}: {how_many} on {spec.deploy} "
             f"(sweep id {spec.sweep_id}), results in {sweep.out_dir}/"]
    for c in sweep.configurations:
        i = c.index
        price = sweep.prices[i]
        priced = f" (${price.usd_per_hour:.3f}/h)" if price.usd_per_hour is not None else ""
        options = "".join(f", {k} {v}" for k, v in sweep.run_options(i).items())  # e.g. the configuration's mix
        head = f"  [{i}] {c.label}: {sweep.deployer.describe(sweep.deployer_settings(c))}{options}{priced}"
        if sweep.complete[i]:
            lines.append(f"{head}; measured before (run folder {sweep.run_dir(c).name} complete): skipped")
            continue
        e = sweep.estimates[i]
        tail = (f"; about {duration(e.billed_s)} alive, {e.instance_hours:.3f} instance-hours, {_money(e.usd)}")
        if i not in sweep.allowed:
            tail += f"; NOT RUN: max_cost_usd {spec.max_cost_usd:g} would be passed"
        lines.append(head + tail)
    t = plan_totals(sweep)
    what = "as if on the priced instance; nothing is billed locally" if spec.deploy == "local" else "billed by AWS"
    lines.append(f"  total: {t['to_run']} to run ({t['measured_before']} measured before, "
                 f"{t['over_budget']} over budget), about {duration(t['wall_s'])} with max_parallel_endpoints "
                 f"{spec.max_parallel_endpoints}, "
                 f"{t['instance_hours']:.3f} instance-hours, {_money(t['usd'])} ({what})")
    shown = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                      for k, v in sweep.plan.given.items() if k not in ("payload", "shape"))
    lines.append(f"  load per configuration: shape {sweep.plan.shape or 'constant users'}"
                 + (f", {shown}" if shown else "") + f"; about {duration(sweep.plan.expected_test_s())} per test")
    short = sweep.plan.short_run()
    if short is not None:
        lines.append(f"  {short.text()}")
    extra = sweep.confirmation_estimate()
    if extra is not None:
        lines.append(f"  confirmation: when the leader and the runner-up are told apart by their intervals, both are "
                     f"measured again in the reverse order: at most about {duration(extra.billed_s)} more, "
                     f"{extra.instance_hours:.3f} instance-hours, {_money(extra.usd)} (`confirm: false` skips it)")
    return lines


# ------------------------------------------------------------------------------------------- run


def run_sweep(sweep: Sweep, *, yes: bool = False, confirm: Callable[[str], bool] | None = None,
              printer: Printer | None = None, handle_signals: bool = True) -> SweepResult:
    """Run every configuration still to measure; write sweep.json, sweep.csv and sweep.html."""
    printer = printer or Printer()
    t = plan_totals(sweep)
    ask = bool(t["to_run"] and sweep.deployer.needs_confirmation and not yes)
    question = (f"{sweep.deployer.action(t['to_run'])} "
                f"(about {t['instance_hours']:.2f} instance-hours, {_money(t['usd'])})?")
    if ask and confirm is None:
        raise UsageError(f"this sweep would {question[:-1]}: review `sm-locust sweep {sweep.spec.source} --plan`, "
                         "then pass --yes")
    if t["to_run"]:  # credentials, models, instance types, quotas: a sure failure stops it here (exit 2)
        sweep.deployer.before_creating([sweep.deployer_settings(sweep.configuration(i)) for i in sweep.to_run()],
                                       sweep.spec.max_parallel_endpoints, lambda text: say(printer, text))
    if ask:
        assert confirm is not None
        if not confirm(question):
            raise RunError("nothing deployed (not confirmed)")
    sweep.started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    how_many = count(t["configurations"], "configuration")
    say(printer, f"{sweep.spec.name}: {how_many} on {sweep.spec.deploy}, {t['to_run']} to run"
                + (f" ({t['measured_before']} measured before)" if t["measured_before"] else "")
                + f", about {duration(t['wall_s'])}; results in {sweep.out_dir}/")
    short = sweep.plan.short_run() if t["to_run"] else None
    if short is not None:
        say(printer, short.text())
    outcome = sweep.runner_class(sweep, printer, handle_signals=handle_signals).run()
    document = sweep.document(outcome.rows, outcome)
    outputs = sweep.write_outputs(document)
    say(printer, f"recommendation: {document['recommendation']['reason']}")
    say(printer, f"results in {outputs['html']} (sweep.json, sweep.csv; one run folder per configuration)")
    return SweepResult(sweep, document, outputs, outcome.interrupted, outcome.signum)


def sweep(source: str | Path | Mapping[str, object], *, out: str | Path | None = None, yes: bool = False,
          model: object = None,
          client=None, overrides: list[str] | None = None) -> SweepResult:
    """Check, plan and run a sweep in one call (`model`: a sagemaker.model.Model to clone settings from)."""
    require_path("out", out)
    require_bool("yes", yes)
    return run_sweep(load_sweep(source, out=out, overrides=overrides, client=client, model=model), yes=yes)


def refuse_live_sweep(sweep_id: str, folder: Path) -> None:
    """A one-line UsageError, before anything is stopped or deleted, when the sweep `sweep_id` is running:
    its folder (`folder`, or the one its local endpoints name) is locked by a live process
    (`sm_locust.util.outputs.locked_folder`). Was: --cleanup stopped a live sweep's endpoint, whose
    configuration was then measured as failing, and the sweep recommended from it."""
    for candidate in [folder, *sorted(tagged_folders(sweep_id))]:
        if not candidate.is_dir() or not run_in_progress(candidate):
            continue
        held = held_by(candidate, "sweep_id")
        if held in (None, sweep_id):
            raise UsageError(f"--cleanup {sweep_id}: that sweep is running right now ({candidate} is locked by a live "
                             "sm-locust sweep); nothing was stopped. Stop the sweep (Ctrl+C or SIGTERM: it deletes "
                             "what it created), then run --cleanup for anything it reports left behind")


def folder_kind(out_dir: Path) -> str:
    """The kind of the sweep a folder holds, for `--cleanup ID` without its file: sweep.json's `kind`;
    else `autoscaling` when restore journals are there (a sweep killed before its first sweep.json);
    else the default."""
    kind = held_by(out_dir, "kind")
    if kind is not None and kind in KINDS:
        return kind
    return "autoscaling" if (out_dir / JOURNAL_DIR).is_dir() else DEFAULT_KIND


def folder_deploy(out_dir: Path) -> str | None:
    """Where the sweep a folder holds deployed (sweep.json's `deploy`), for `--cleanup ID` without its file."""
    return held_by(out_dir, "deploy")


def cleanup(sweep_id: str, *, deploy: str | None = "sagemaker", region: str | None = None, profile: str | None = None,
            client: AwsClient = None, printer: Printer | None = None, kind: str | None = DEFAULT_KIND,
            out: str | Path | None = None) -> tuple[list[str], list[str]]:
    """Delete every resource tagged with this sweep id (and undo what its kind changed): (deleted, left).
    `out`: the sweep folder (default reports/sweeps/<sweep id>/), for kinds that keep what to undo there;
    `kind` None: the folder says (`folder_kind`); `deploy` None: the folder says, else sagemaker, and this
    machine's endpoint processes tagged with the sweep id are stopped too (a local sweep's)."""
    printer = printer or Printer()
    folder = Path(out) if out else Path(DEFAULT_SWEEPS_DIR) / sweep_id
    refuse_live_sweep(sweep_id, folder)
    if kind is None:
        kind = folder_kind(folder)
    local: tuple[list[str], list[str]] = ([], [])
    if deploy is None:
        deploy = folder_deploy(folder)
        if deploy is None:  # nothing says where it ran: this machine's tagged endpoints, then SageMaker
            local = create_deployer("local").cleanup(sweep_id, lambda text: say(printer, text))
            deploy = "sagemaker"

    def progress(text: str) -> None:
        say(printer, text)

    options: dict[str, object] = ({"client": client, "region": region, "profile": profile}
                                  if deploy == "sagemaker" else {})
    try:
        target = CLEANUPS.get(KINDS.get(kind).name)
        if target is not None:
            deleted, left = code_of(target)(sweep_id, deploy=deploy, region=region, profile=profile, client=client,
                                            out_dir=folder, progress=progress)
        else:
            deleted, left = create_deployer(deploy, **options).cleanup(sweep_id, progress)
        return local[0] + deleted, local[1] + left
    except DeployError as exc:
        raise RunError(str(exc)) from None
