"""Runs a checked sweep: deploy, test, delete every configuration; always clean up.

Tests run one at a time in the main thread with the normal run machinery (`config.preflight` +
`core.child.execute`), so each configuration leaves a normal run folder; creations and deletions
run in threads driven by the `Pipeline`. Guarantees: **cleanup** after every test, failed creation,
Ctrl-C or SIGTERM; **resume** skips a configuration whose folder holds an ok result with the same
key; **budget** (`max_cost_usd`) stops a deployment that would pass it; **failure is local**; and
**trust**: a client-bound configuration is measured once more alone, after the others, and still
bound is INCONCLUSIVE, never ranked (sweep/trust.py); **confirmation**: the leader and the runner-up,
told apart by their intervals, are measured once more in the reverse order and ranked on both
replicates (sweep/replicates.py; `confirm: false` turns it off).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import queue
import shutil
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.preflight import preflight
from sm_locust.core.child import execute
from sm_locust.core.repeat import RUN_PREFIX
from sm_locust.errors import Interrupted, SmLocustError
from sm_locust.record.repeat import REPEAT_JSON, repeat_document
from sm_locust.record.summary import write_json
from sm_locust.sweep.deployers import Cancelled, DeployError, Deployment
from sm_locust.sweep.pipeline import (
    DELETING,
    DEPLOYING,
    READY,
    TESTING,
    WAITING,
    Pipeline,
)
from sm_locust.sweep.progress import Printer, StepEcho, eta_s, progress_line, say
from sm_locust.sweep.rows import Confirm, Remeasure, Row, Teardown, Timing
from sm_locust.sweep.trust import WORKER_LOST, untrusted_because, untrusted_words
from sm_locust.util.formatting import count
from sm_locust.util.outputs import locked_folder, write_atomic
from sm_locust.util.yamlsafe import load_json

MARKER = "sweep_configuration.json"
FIRST_SUFFIX = ".client-bound"  # the first run folder of a configuration measured again by itself
REPLICATE_SUFFIX = ".replicate-1"  # the first run folder of a configuration measured twice to confirm the ranking
CONFIRM_ROUNDS = 2  # the confirmation measures at most 2 x 2 configurations again (sweep/replicates.py)


class SweepInterrupted(KeyboardInterrupt):
    """SIGTERM, turned into the same unwinding as Ctrl-C."""


@dataclass
class RunOutcome:
    rows: dict[int, Row]
    interrupted: bool = False
    signum: int = signal.SIGINT
    wall_s: float = 0.0
    peak_alive: int = 0
    notes: list[str] = field(default_factory=list)


def is_complete(run_dir: Path, key: str) -> bool:
    """A configuration measured before: its result (summary.json, or the file the marker names) plus
    our marker with the same key, status ok."""
    try:
        marker = load_json((run_dir / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(marker, dict):  # not our marker (edited, or another tool's file): measured again
        return False
    result = str(marker.get("result") or "summary.json")
    return marker.get("key") == key and marker.get("status") == "ok" and (run_dir / result).exists()


def _locust_children() -> list:
    """Locust processes this sweep started (a run interrupted in the middle)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "locust" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def stop_locust_children(timeout: float = 5.0) -> None:
    children = _locust_children()
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=timeout)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


class SweepRunner:
    """One sweep run of any kind; `sweep` is a `base.Sweep` (checked file, deployer, configurations,
    plan). A kind whose test is not one normal run overrides `run_configuration` (and `result_file`)."""

    result_file = "summary.json"  # what a measured configuration's run folder holds (resume checks it)

    def __init__(self, sweep, printer: Printer | None = None, *, handle_signals: bool = True):
        self.sweep = sweep
        if getattr(sweep.plan, "repeat", 1) > 1:  # `load: {repeat: N}`: the run folder holds run-1/ .. and repeat.json
            self.result_file = REPEAT_JSON
        self.spec = sweep.spec
        self.deployer = sweep.deployer
        self.printer = printer or Printer()
        self.handle_signals = handle_signals
        self.total = len(sweep.configurations)
        self.cancel = threading.Event()
        self.events: queue.Queue = queue.Queue()
        self.deployments: dict[int, Deployment] = {}
        self.torn_down: set[int] = set()
        self.rows: dict[int, Row] = {}
        self.timing: dict[int, dict[str, float]] = {}
        self.measured = 0
        self.finished: set[int] = set()
        self.remeasure_queue: list[int] = []  # client-bound configurations to measure again by themselves
        self.confirming: int | None = None  # the configuration being measured a second time to confirm the ranking
        self.rounds_over = False  # measuring again and confirming are over: the bar may say "done"
        # the confirmation measurement under way: (index, run folder, first replicate's folder, the row's first figures)
        self.replicating: tuple[int, Path, Path, tuple] | None = None
        self.bar_said_next = False  # a bar said another round was next
        self.signum: int = signal.SIGINT
        self.started = time.monotonic()
        self._previous_handlers: dict[int, Any] = {}

    # -- signals ----------------------------------------------------------------------------------
    def _raise_interrupt(self, signum, frame) -> None:
        self.signum = signum
        raise SweepInterrupted()

    def _refuse(self, signum, frame) -> None:
        say(self.printer, f"still cleaning up, please wait; if you stop it now, `sm-locust sweep --cleanup "
                         f"{self.spec.sweep_id}` deletes what is left")

    def _install(self, handler_int, handler_term) -> None:
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return
        for signum, handler in ((signal.SIGINT, handler_int), (signal.SIGTERM, handler_term)):
            previous = signal.signal(signum, handler)
            self._previous_handlers.setdefault(signum, previous)

    def _restore(self) -> None:
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        self._previous_handlers.clear()

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> RunOutcome:
        sweep = self.sweep
        outcome = RunOutcome(self.rows)
        sweep.out_dir.mkdir(parents=True, exist_ok=True)
        with locked_folder(sweep.out_dir):  # a second sweep into this folder now is refused (sm_locust.util.outputs)
            return self._run_locked(outcome)

    def _run_locked(self, outcome: RunOutcome) -> RunOutcome:
        sweep = self.sweep
        pipeline = Pipeline([c.index for c in sweep.configurations], self.spec.max_parallel_endpoints)
        self.pipeline = pipeline
        for c in sweep.configurations:
            self.rows[c.index] = sweep.base_row(c)
        for c in sweep.configurations:
            if is_complete(sweep.run_dir(c), sweep.keys[c.index]):
                pipeline.skip(c.index)
                self.rows[c.index].status, self.rows[c.index].resumed = "ok", True
                self._measured(c.index)
            elif c.index not in sweep.allowed:
                pipeline.skip(c.index)
                self.rows[c.index].fail("skipped", sweep.skip_reason(c.index))
                self._measured(c.index)
        self._install(signal.default_int_handler, self._raise_interrupt)
        self.executor = ThreadPoolExecutor(max_workers=2 * self.spec.max_parallel_endpoints,
                                           thread_name_prefix="sm-locust-sweep")
        try:
            self._loop(pipeline)
            self._remeasure_client_bound()
            self._confirm()
            self.rounds_over = True
            if self.bar_said_next:  # the last bar said another round was next: now it is done
                self._progress_bar()
        except KeyboardInterrupt:
            outcome.interrupted = True
            outcome.signum = self.signum
            self._install(self._refuse, self._refuse)
            say(self.printer, f"interrupted ({signal.Signals(self.signum).name}): stopping the test and deleting what "
                "this sweep created")
            self.cancel.set()
            stop_locust_children()
        finally:
            self.cancel.set()
            self._install(self._refuse, self._refuse)
            self.executor.shutdown(wait=True)
            self._drain()
            for i in list(self.deployments):
                if i not in self.torn_down:
                    self._teardown(i)
            self._put_back_first_replicate()
            for row in self.rows.values():
                if row.status in ("pending", "running"):
                    row.fail("interrupted" if outcome.interrupted else "failed",
                             row.reason or "the sweep stopped before this configuration finished")
            self._restore()
        outcome.wall_s = time.monotonic() - self.started
        outcome.peak_alive = pipeline.peak_alive
        return outcome

    def _remeasure_client_bound(self) -> None:
        """Each configuration whose measurement was client-bound, deployed and tested again with nothing
        else alive (the main pipeline has finished: every other endpoint is deleted), one at a time."""
        while self.remeasure_queue and not self.cancel.is_set():
            i = self.remeasure_queue.pop(0)
            row = self.rows[i]
            if not self.sweep.budget_allows(i, self.rows, []):
                row.fail("inconclusive", f"{untrusted_because(row.client_bound)}; not measured again: "
                         f"max_cost_usd {self.spec.max_cost_usd:g} would be passed")
                self._line(i)
                continue
            run_dir = self.sweep.run_dir(self.sweep.configuration(i))
            first = run_dir.with_name(run_dir.name + FIRST_SUFFIX)
            if first.exists():
                shutil.rmtree(first)
            if run_dir.exists():
                run_dir.rename(first)
            teardown = row.teardown
            report = first / "report.html"
            row.remeasure = Remeasure(first_reason=row.client_bound or "", first_run_dir=first.name,
                                      first_cost_usd=teardown.cost_usd if teardown else None,
                                      first_billed_s=teardown.billed_s if teardown else None,
                                      first_report=f"{first.name}/report.html" if report.is_file() else None)
            say(self.printer, f"[{i}/{self.total}] {row.label}: measuring it again by itself (the first measurement "
                             f"was not trusted: {untrusted_because(row.client_bound)}; kept in "
                             f"{first.name})")
            row.status, row.reason, row.figures, row.client_bound, row.marks = "pending", None, None, None, None
            row.resumed = False
            self.torn_down.discard(i)
            self.finished.discard(i)
            self.pipeline = Pipeline([i], 1)
            self._loop(self.pipeline)

    def _confirm(self) -> None:
        """The leader and the runner-up (the closest call), when their intervals tell them apart, each
        deployed and tested once more, in the reverse order of their first measurement (sweep/replicates.py).
        Ranked again on both replicates, a new leader or closest call measured once gets a second round
        (`CONFIRM_ROUNDS`); a configuration measured twice is never measured a third time."""
        if not self.spec.confirm:
            return
        for _ in range(CONFIRM_ROUNDS):
            if self.cancel.is_set():
                return
            pair = self.sweep.contenders(self.rows)
            todo = [i for i in pair if self.rows[i].confirm is None]
            if len(pair) < 2 or not todo:
                return
            labels = " and ".join(self.rows[i].label for i in pair)
            say(self.printer, f"confirming the ranking: {labels} are told apart by their intervals; measuring "
                             f"{'both' if len(todo) == 2 else self.rows[todo[0]].label} again in the reverse order "
                             "(`confirm: false` skips this)")
            for i in sorted(todo, reverse=True):
                if self.cancel.is_set():
                    return
                if not self.sweep.budget_allows(i, self.rows, []):
                    say(self.printer, f"[{i}/{self.total}] {self.rows[i].label}: not measured again: max_cost_usd "
                                     f"{self.spec.max_cost_usd:g} would be passed")
                    return
                self._replicate(i)

    def _replicate(self, i: int) -> None:
        """Configuration `i` measured a second time; its first run folder kept as `<run_dir>.replicate-1`. A
        second measurement that fails or is client-bound is dropped: the first stands alone."""
        row = self.rows[i]
        run_dir = self.sweep.run_dir(self.sweep.configuration(i))
        first = run_dir.with_name(run_dir.name + REPLICATE_SUFFIX)
        if first.exists():
            shutil.rmtree(first)
        if run_dir.exists():
            run_dir.rename(first)
        saved = (row.figures, row.teardown, row.timing, row.marks, row.report_gaps)
        teardown = row.teardown
        row.confirm = Confirm(first_run_dir=first.name, figures=row.figures,
                              first_cost_usd=teardown.cost_usd if teardown else None,
                              first_billed_s=teardown.billed_s if teardown else None)
        row.status, row.reason, row.figures, row.client_bound, row.marks = "pending", None, None, None, None
        row.resumed = False
        self.torn_down.discard(i)
        self.finished.discard(i)
        self.confirming = i
        self.replicating = (i, run_dir, first, saved)
        try:
            self.pipeline = Pipeline([i], 1)
            self._loop(self.pipeline)
        finally:
            self.confirming = None
        self.replicating = None  # finished (an interruption leaves it set: `_put_back_first_replicate`)
        if i in self.remeasure_queue:
            self.remeasure_queue.remove(i)
        if row.status == "ok" and not row.client_bound:
            return
        why = row.client_bound or row.reason or row.status
        say(self.printer, f"[{i}/{self.total}] {row.label}: the second measurement is not used ({why}); the first "
                         "stands alone")
        self._first_stands_alone(i, run_dir, first, saved)

    def _first_stands_alone(self, i: int, run_dir: Path, first: Path, saved: tuple) -> None:
        """The second measurement's folder deleted, the first's put back under the configuration's own name,
        and the row's first figures with it (both deployments billed)."""
        row = self.rows[i]
        if run_dir.exists():
            shutil.rmtree(run_dir)
        first.rename(run_dir)
        cost = row.teardown.cost_usd if row.teardown else None
        row.figures, row.teardown, row.timing, row.marks, row.report_gaps = saved
        if row.teardown is not None and cost is not None:  # both deployments were billed
            row.teardown.cost_usd = round(cost, 6)
        row.status, row.reason, row.client_bound, row.confirm = "ok", None, None, None

    def _put_back_first_replicate(self) -> None:
        """A confirmation measurement cut short (Ctrl-C, SIGTERM, an error), once its test is stopped and its
        endpoint deleted: the first measurement stands alone, as when the second fails. No `.replicate-1`
        folder is left behind, and a resumed sweep takes the configuration as measured before (its folder is
        complete) and confirms the ranking afresh."""
        if self.replicating is None:
            return
        i, run_dir, first, saved = self.replicating
        self.replicating = None
        if not first.is_dir():
            return
        try:
            self._first_stands_alone(i, run_dir, first, saved)
        except OSError as exc:
            say(self.printer, f"[{i}/{self.total}] {self.rows[i].label}: the second measurement was cut short, and "
                             f"the first could not be put back ({exc}): it is in {first.name}")
            return
        say(self.printer, f"[{i}/{self.total}] {self.rows[i].label}: the second measurement was cut short; the "
                         "first stands alone")

    def _loop(self, pipeline: Pipeline) -> None:
        while not pipeline.finished:
            self._drain()  # creations and deletions that ended meanwhile
            self._start_deploys(pipeline)
            i = pipeline.next_test()
            if i is not None:
                pipeline.start_test(i)
                self._test(i)
                pipeline.tested(i)
                self.executor.submit(self._teardown_job, i)
                self._measured(i)
                continue
            if pipeline.finished:
                break
            try:
                event = self.events.get(timeout=0.5)  # a timeout keeps Ctrl-C responsive everywhere
            except queue.Empty:
                continue
            self._handle(event)

    def _start_deploys(self, pipeline: Pipeline) -> None:
        for i in pipeline.deploys_to_start():
            if not self.sweep.budget_allows(i, self.rows, self._in_flight()):
                for j in pipeline.in_state(WAITING):
                    pipeline.skip(j)
                    self.rows[j].fail("skipped", f"max_cost_usd {self.spec.max_cost_usd:g} would be passed "
                                      "(spent so far + estimates)")
                    self._measured(j)
                return
            pipeline.start_deploy(i)
            self.rows[i].status = "running"
            self.deployments[i] = self.sweep.new_deployment(i)
            self.timing[i] = {"start": time.monotonic()}
            self.executor.submit(self._deploy_job, i)

    def _in_flight(self) -> list[int]:
        return self.pipeline.in_state(DEPLOYING, READY, TESTING, DELETING)

    def _handle(self, event: tuple[str, int, Any]) -> None:
        kind, i, payload = event
        if kind == "deployed":
            self.timing[i]["deploy_s"] = payload
            self.pipeline.deployed(i)
        elif kind == "deploy_failed":
            status, reason = payload
            self.rows[i].fail(status, reason)
            self.pipeline.deploy_failed(i)
            self.executor.submit(self._teardown_job, i)  # whatever was created before the failure
            self._measured(i)
        elif kind == "deleted":
            self._deleted(i, payload)
            self.pipeline.deleted(i)
            self.sweep.write_progress(self.rows)

    def _drain(self) -> None:
        """Handle the events already queued, without waiting (during the final cleanup: record only)."""
        while True:
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                return
            if not self.cancel.is_set():
                self._handle(event)
            elif event[0] == "deleted":
                self._deleted(event[1], event[2])
            elif event[0] == "deploy_failed" and self.rows[event[1]].status == "running":
                self.rows[event[1]].fail(*event[2])

    def _progress(self, i: int):
        return lambda text: say(self.printer, f"[{i}/{self.total}] {text}")

    def _deploy_job(self, i: int) -> None:
        d = self.deployments[i]
        t0 = time.monotonic()
        try:
            self.deployer.deploy(d, self.cancel, self._progress(i))
            self.events.put(("deployed", i, time.monotonic() - t0))
        except Cancelled as exc:
            self.events.put(("deploy_failed", i, ("interrupted", str(exc))))
        except DeployError as exc:
            self.events.put(("deploy_failed", i, ("failed", str(exc))))
        except Exception as exc:  # a deployer bug or an unexpected client error: the sweep goes on
            self.events.put(("deploy_failed", i, ("failed", f"{type(exc).__name__}: {exc}")))

    def _teardown_job(self, i: int) -> None:
        try:
            left = self.deployer.teardown(self.deployments[i], self._progress(i))
        except Exception as exc:
            left = [f"teardown failed: {type(exc).__name__}: {exc}"]
        self.events.put(("deleted", i, left))

    def _teardown(self, i: int) -> None:
        """Synchronous teardown (the cleanup after an interruption)."""
        try:
            left = self.deployer.teardown(self.deployments[i], self._progress(i))
        except Exception as exc:
            left = [f"teardown failed: {type(exc).__name__}: {exc}"]
        self._deleted(i, left)

    def _deleted(self, i: int, left: list[str]) -> None:
        if i in self.torn_down:
            return
        self.torn_down.add(i)
        d = self.deployments[i]
        row = self.rows[i]
        teardown = Teardown(deployed={"endpoint_name": d.endpoint_name, "resources": dict(d.resources),
                                      **{k: v for k, v in d.info.items() if k != "sweep_id"}}, left_behind=list(left))
        before = [m for m in (row.remeasure, row.confirm) if m is not None]  # earlier deployments, billed too
        if d.created_at is not None:
            billed = (d.deleted_at or time.time()) - d.created_at
            teardown.billed_s = round(billed + sum(m.first_billed_s or 0.0 for m in before), 1)
            price = self.sweep.prices[i]
            if price.usd_per_hour is not None:
                cost = price.usd_per_hour * price.instance_count * billed / 3600.0
                teardown.cost_usd = round(cost + sum(m.first_cost_usd or 0.0 for m in before), 6)
        row.teardown = teardown
        if left:
            say(self.printer, f"[{i}/{self.total}] NOT cleaned up: {'; '.join(left)} "
                             f"(sm-locust sweep --cleanup {self.spec.sweep_id})")

    # -- one test ---------------------------------------------------------------------------------
    def _test(self, i: int) -> None:
        sweep = self.sweep
        d = self.deployments[i]
        run_dir = sweep.run_dir(sweep.configuration(i))
        row = self.rows[i]
        t0 = time.monotonic()
        try:
            self.run_configuration(i, d, run_dir)
        except Interrupted as exc:  # execute() forwarded Ctrl-C / SIGTERM to Locust, which stopped
            self.signum = exc.signum
            row.fail("interrupted", exc.message)
            raise SweepInterrupted() from None
        except SmLocustError as exc:
            row.fail("failed", exc.message)
        finally:
            self.timing[i]["test_s"] = time.monotonic() - t0
        if row.status == "running":
            if sweep.spec.report:
                self._report(i, sweep.quoted_dir(run_dir), d)
            row.status = "ok"
            self._write_marker(i, run_dir, d)

    def run_configuration(self, i: int, d: Deployment, run_dir: Path) -> None:
        """One normal run into `run_dir` (what `sm-locust run` does); SmLocustError when it fails."""
        plan = self.sweep.plan
        region = d.region or self.spec.region
        # the configuration's own options beside the load's (a mix's S and N)
        options = plan.run_options(d.endpoint_name, d.endpoint_url, region, **self.sweep.run_options(i))
        settings = SageMakerSettings.from_options(options).validate()
        with contextlib.redirect_stdout(StepEcho(self.printer, f"{'':>4}[{i}/{self.total}] ")):
            extra_env = preflight(settings)
            if plan.repeat <= 1:
                execute(settings, plan.load, run_dir, extra_env, options=options)
                return
            summaries: list[dict] = []
            folders: list[str] = []
            for k in range(1, plan.repeat + 1):  # the same test again on the same deployment (record/repeat.py)
                folders.append(f"{RUN_PREFIX}{k}")
                run = execute(settings, plan.load, run_dir / folders[-1], extra_env, options=options)
                summaries.append(run.to_json())
                write_json(run_dir / REPEAT_JSON, repeat_document(summaries, folders))

    def _report(self, i: int, run_dir: Path, d: Deployment) -> None:
        """The run's report (report.html, steps.csv; CloudWatch when on AWS); gaps are noted, never fatal."""
        # lazy: report/ loads pandas (~400-470 ms, python -X importtime), which a sweep with
        # `report: false`, and every --plan, never needs
        from sm_locust.report.pipeline import ReportOptions, build_report

        price = self.sweep.prices[i]
        objective = self.spec.objective
        options = ReportOptions(
            endpoint_name=d.endpoint_name, region=d.region or self.spec.region, profile=self.spec.aws_profile,
            instance_type=price.instance_type, instance_count=price.instance_count, price_per_hour=price.usd_per_hour,
            prices_file=self.spec.prices, target_rps=objective.target_rps, safety_factor=objective.safety_factor)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                result = build_report(run_dir, options)
            self.rows[i].report_gaps = list(result.gaps)
        except Exception as exc:  # the run is measured; a report that cannot be drawn is only noted
            self.rows[i].report_gaps = [f"report not written: {exc}"]

    def _write_marker(self, i: int, run_dir: Path, d: Deployment) -> None:
        c = self.sweep.configuration(i)
        remeasure, confirm = self.rows[i].remeasure, self.rows[i].confirm
        marker = {"sweep_id": self.spec.sweep_id, "key": self.sweep.keys[i], "index": i, "label": c.label,
                  "settings": c.settings, "deploy": self.spec.deploy, "endpoint_name": d.endpoint_name,
                  "status": "ok", "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "result": self.result_file, "remeasure": remeasure.as_dict() if remeasure else None,
                  "confirm": confirm.as_dict() if confirm else None}
        write_atomic(run_dir / MARKER, json.dumps(marker, indent=1, default=str))

    # -- results ----------------------------------------------------------------------------------
    def _measured(self, i: int) -> None:
        """A configuration is done (tested, failed, skipped or measured before): its figures, its
        line, sweep.json so far, the progress bar."""
        sweep = self.sweep
        row = self.rows[i]
        timing = self.timing.get(i, {})
        if "start" in timing:
            row.timing = Timing(wall_s=round(time.monotonic() - timing["start"], 1),
                                deploy_s=round(timing["deploy_s"], 1) if "deploy_s" in timing else None,
                                test_s=round(timing["test_s"], 1) if "test_s" in timing else None)
        if row.status == "ok":
            self._measure(i, sweep.run_dir(sweep.configuration(i)))
            if not row.resumed:
                self.measured += 1
            self._judge_client(i)
        self._line(i)
        sweep.write_progress(self.rows)
        self.finished.add(i)
        self._progress_bar()

    def _progress_bar(self) -> None:
        """The bar; once every configuration is measured, 'done' only when no other round follows."""
        remaining = self.total - len(self.finished)
        elapsed = time.monotonic() - self.started
        then = None
        if self.rounds_over:
            pass
        elif self.confirming is not None:
            then = "confirming the ranking"
        elif self.remeasure_queue:
            n = len(self.remeasure_queue)
            then = f"next: measuring {count(n, 'configuration')} again by {'itself' if n == 1 else 'themselves'}"
        elif self.spec.confirm and self.sweep.confirms and self.total >= 2:
            then = "next: confirming the ranking, if its leaders need it"
        self.bar_said_next = self.bar_said_next or (then is not None and not remaining)
        self.printer(progress_line(len(self.finished), self.total, elapsed, eta_s(elapsed, self.measured, remaining),
                                   then))

    def _measure(self, i: int, run_dir: Path) -> None:
        row = self.rows[i]
        try:
            self.sweep.measure_row(i, run_dir, row)
        except (OSError, ValueError, KeyError) as exc:
            row.fail("failed", f"cannot read the results in {run_dir}: {type(exc).__name__}: {exc}")
            return
        row.client_bound = self.sweep.client_bound(run_dir)
        if row.resumed and row.remeasure is None:  # measured again by an earlier run of the sweep?
            try:
                marker = json.loads((run_dir / MARKER).read_text())
            except (OSError, ValueError):
                marker = {}
            row.remeasure = Remeasure.from_dict(marker.get("remeasure"))
        if row.resumed and row.confirm is None:
            self._resume_replicate(i, run_dir)

    def _resume_replicate(self, i: int, run_dir: Path) -> None:
        """A configuration measured twice by an earlier run of the sweep: its first replicate's figures,
        read back from the folder its marker names (gone or unreadable: the second stands alone)."""
        try:
            marker = json.loads((run_dir / MARKER).read_text())
        except (OSError, ValueError):
            return
        confirm = Confirm.from_dict(marker.get("confirm"))
        if confirm is None or not (run_dir.parent / confirm.first_run_dir).is_dir():
            return
        row = self.rows[i]
        other = copy.copy(row)
        try:
            self.sweep.measure_row(i, run_dir.parent / confirm.first_run_dir, other)
        except (OSError, ValueError, KeyError):
            return
        if other.status == row.status and other.figures is not None:
            confirm.figures = other.figures
            row.confirm = confirm

    def _judge_client(self, i: int) -> None:
        """A client-bound measurement: queued to be measured again by itself, or (already measured again)
        INCONCLUSIVE."""
        row = self.rows[i]
        if row.status != "ok" or not row.client_bound:
            return
        if row.remeasure is None:
            if i not in self.remeasure_queue:
                self.remeasure_queue.append(i)
            return
        row.fail("inconclusive", inconclusive_reason(row.remeasure.first_reason, row.client_bound))

    def _line(self, i: int) -> None:
        row = self.rows[i]
        line = self.sweep.configuration_line(i, self.total, row)
        if row.status == "ok" and row.client_bound and i in self.remeasure_queue:
            why = untrusted_because(row.client_bound, short=True)
            line += f" - NOT TRUSTED: {why}; measuring it again by itself once the others are done"
        elif row.status == "ok" and self.confirming == i:
            line += " (second measurement, confirming the ranking)"
        elif row.status == "ok" and row.remeasure is not None:
            line += (f" (measured again by itself: the first measurement was not trusted: "
                     f"{row.remeasure.first_reason}; kept in {row.remeasure.first_run_dir})")
        self.printer(line)


def inconclusive_reason(first: str, again: str) -> str:
    """Why a configuration is INCONCLUSIVE after its second measurement."""
    words = untrusted_words(f"{first} {again}")
    figures = ("its figures are the client's" if "load generator" in words
               else "its figures were measured with less load than asked" if words.startswith(WORKER_LOST)
               else "its figures are not decided")
    return (f"{words} in both measurements (first: {first}; again by itself: {again}); {figures}: not ranked, "
            "not recommended")
