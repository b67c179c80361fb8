"""`RunResult`: a finished run folder as Python objects, and `load()` for one on disk or in S3.

The run folder stays the one record of a run (what `sm-locust run` writes, what `report`, `compare`
and the gates read); a `RunResult` is a view of it for notebooks, built from the same readers:

    .run_dir     the folder                         .summary   summary.json (a dict, docs/summary.md)
    .record      summary.json as typed records (`sm_locust.record.model.Summary`: .totals.p95_ms, .steps[0].load)
    .verdict     the line the CLI prints at the end .plateau   summary.json's plateau (a pandas Series) or None
    .inconclusive  True when the load generator, not the endpoint, decided the answer (.inconclusive_reason)
    .steps       one row per load held (summary.json steps; start/end as UTC timestamps)
    .timeline    one row per second (timeline.jsonl: users, requests, failures, rps, goodput, p50/p95/p99)
    .errors      failures by error code (error, count)
    .interrupted the one line saying the run was stopped early, else None
    .report(...) report.html (report/pipeline.py: CloudWatch, cost), its path
    .figures(...) the report's plotly figures by id ("fig-throughput", "fig-latency-users", ...)

In a notebook the object shows itself: the verdict, then throughput and latency vs users, drawn from
the run folder alone (never CloudWatch: a display must be quick and offline). In Jupyter each chart is
displayed by plotly (`_ipython_display_`), so plotly.js is not copied into every result; other HTML
front ends get `_repr_html_`, one fragment. Frames are read when first asked for and kept.
"""

from __future__ import annotations

import html
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd

from sm_locust.aws.clients import AwsClient
from sm_locust.aws.s3 import fetch_run, s3_client
from sm_locust.core.verdict import inconclusive_reason, verdict_line
from sm_locust.errors import UsageError
from sm_locust.measure.steady import histogram_percentile
from sm_locust.record.model import Summary
from sm_locust.record.runfolder import FAILURES_CSV, interrupted_line, read_failures, read_summary
from sm_locust.record.timeline import iter_seconds, read_seconds, timeline_path
from sm_locust.report.merge import errors_by_code, interval_columns
from sm_locust.util.arguments import require_bool
from sm_locust.util.outputs import check_output_dir, refuse_in_progress

TIMELINE_COLUMNS = ["time", "users", "spawning", "requests", "failures", "rps", "goodput_rps", "p50_ms", "p95_ms",
                    "p99_ms", "client_cpu_pct", "backoffs", "target_rate", "sent", "late", "dropped"]
OPEN_LOOP_COLUMNS = ("target_rate", "sent", "late", "dropped")
INLINE_FIGURES = ("fig-throughput", "fig-latency-users")  # what a notebook shows under the verdict


class RunResult:
    """A finished run (see the module docstring)."""

    def __init__(self, run_dir: str | os.PathLike[str], *, interrupted: str | None = None):
        self.run_dir = Path(run_dir)
        self._summary = read_summary(self.run_dir)
        self.record = Summary.from_json(self._summary)  # summary.json as typed records (held to its shape)
        self.interrupted = interrupted or interrupted_line(self.record)
        self._frames: dict[str, pd.DataFrame] = {}

    def __repr__(self) -> str:
        return f"RunResult({str(self.run_dir)!r}: {self.verdict.splitlines()[0]})"

    # -- summary.json ------------------------------------------------------------------------------
    @property
    def summary(self) -> dict[str, Any]:
        return self._summary

    @property
    def verdict(self) -> str:
        """What `sm-locust run` prints at the end: totals, and the plateau's verdict on a second line."""
        return verdict_line(self.record)

    @property
    def inconclusive(self) -> bool:
        """True when the run's answer cannot be trusted: a step that decides it was measured while the
        load generator was the bottleneck (summary.json `verdict`; the reason in `inconclusive_reason`
        and on `verdict`'s last line). Neither a pass nor a fail of the endpoint."""
        return inconclusive_reason(self.record) is not None

    @property
    def inconclusive_reason(self) -> str | None:
        return inconclusive_reason(self.record)

    @property
    def plateau(self) -> pd.Series | None:
        """summary.json's plateau (capacity_rps, users, rps, p95_ms, reason, reached, text, ...), or
        None when no plateau-finding shape ran."""
        plateau = self.record.plateau
        return None if plateau is None else pd.Series(plateau.to_json(), dtype=object, name="plateau")

    @property
    def steps(self) -> pd.DataFrame:
        """One row per step, as summary.json records them (the figures the search judged, over each
        step's steady window), with each figure's 95 % interval as `<figure>_ci95_low` / `_high`."""
        if "steps" not in self._frames:
            records = [{**{k: v for k, v in step.to_json().items() if k != "ci95"}, **interval_columns(step.ci95)}
                       for step in self.record.steps]
            frame = pd.DataFrame(records)
            for column in ("start", "end"):
                if column in frame.columns:
                    frame[column] = pd.to_datetime(frame[column], utc=True)
            self._frames["steps"] = frame
        return self._frames["steps"]

    @property
    def errors(self) -> pd.DataFrame:
        """Failures by error code, most frequent first (summary.json totals, else Locust's failures CSV)."""
        if "errors" not in self._frames:
            failures = None if self.record.totals.errors else read_failures(self.run_dir / FAILURES_CSV, [])
            counts = errors_by_code(self.record, failures)
            self._frames["errors"] = pd.DataFrame({"error": list(counts), "count": list(counts.values())},
                                                  columns=["error", "count"])
        return self._frames["errors"]

    @property
    def timeline(self) -> pd.DataFrame:
        """One row per second of the run (timeline.jsonl): users, requests, failures (logical
        invocations), rps, goodput_rps, p50/p95/p99 ms of the second's requests, client CPU,
        back-offs; open-loop runs also target_rate, sent, late, dropped. Empty for a folder without one."""
        if "timeline" not in self._frames:
            self._frames["timeline"] = timeline_frame(self.run_dir)
        return self._frames["timeline"]

    # -- the report ----------------------------------------------------------------------------------
    def report(self, cloudwatch: bool | None = None, **options: object) -> Path:
        """Write report.html (+ steps.csv, merged_timeseries.csv, hourly.csv) as `sm-locust report`
        does and return its path. `cloudwatch`: None = the CLI's rule (on for a real endpoint with AWS
        configuration, off for the local one); other keywords are `sm-locust report`'s options
        (`instance_type`, `price_per_hour`, `target_rps`, `region`, `out_dir`, ...). Gaps are printed."""
        from sm_locust.report.pipeline import build_report  # lazy: the report stack, ~120 ms (measured), on demand

        values = report_options(cloudwatch, options)
        check_output_dir(Path(values.out_dir) if values.out_dir else self.run_dir,
                         "out_dir=" if values.out_dir else "run folder")
        result = build_report(self.run_dir, values)
        for gap in result.gaps:
            print(f"sm-locust report: missing: {gap}", flush=True)
        self._summary = read_summary(self.run_dir)  # the report adds cloudwatch / cost / report keys
        self.record = Summary.from_json(self._summary)
        return result.outputs["html"]

    def figures(self, cloudwatch: bool | None = None, **options: object) -> dict[str, Any]:
        """The report's charts as plotly Figures by id (fig-throughput, fig-throughput-time,
        fig-latency-users, fig-latency-time, ...; only those with data), computed as `report()`
        would, without writing anything."""
        # lazy: the report stack (plotly), ~120 ms (measured): load() stays quick until a chart is asked for
        from sm_locust.report.pipeline import prepare_report
        from sm_locust.report.render import figures

        return figures(prepare_report(self.run_dir, report_options(cloudwatch, options)).model)

    def _inline_figures(self) -> tuple[list[Any], str]:
        """The charts a notebook shows under the verdict (never CloudWatch: a display must be quick and
        offline), and a line saying why there are none."""
        try:
            drawn = self.figures(cloudwatch=False)
        except UsageError as exc:  # a folder whose CSVs are not Locust's: say so, show the rest
            return [], f"charts not drawn: {exc.message}"
        return [drawn[key] for key in INLINE_FIGURES if key in drawn], ""

    def _head_html(self, note: str = "") -> str:
        parts = [f"<pre style='white-space:pre-wrap'>{html.escape(self.verdict)}</pre>"]
        if self.inconclusive:  # loudly: the figures above measured the load generator, not the endpoint
            parts.insert(0, f"<p style='color:#b00020;font-weight:bold'>INCONCLUSIVE: "
                            f"{html.escape(self.inconclusive_reason or '')}</p>")
        if self.interrupted:
            parts.append(f"<p style='color:#a15c00'>{html.escape(self.interrupted)}</p>")
        if note:
            parts.append(f"<p>{html.escape(note)}</p>")
        parts.append(f"<p><small>run folder {html.escape(str(self.run_dir))}; <code>.report()</code> writes "
                     "report.html</small></p>")
        return "\n".join(parts)

    def _ipython_display_(self) -> None:
        """In Jupyter: the verdict, then each chart displayed by plotly itself, so its renderer for this
        front end applies (JupyterLab's plotly mime type, or plotly.js embedded once per session in the
        classic notebook): no copy of plotly.js per result."""
        from IPython.display import HTML, display  # lazy: IPython, there only in a notebook

        figures, note = self._inline_figures()
        display(HTML(self._head_html(note)))
        for figure in figures:
            display(figure)

    def _repr_html_(self) -> str:
        """One HTML fragment (for front ends that only take HTML): the verdict and the charts, plotly.js
        from its CDN as plotly's own HTML fallback does."""
        figures, note = self._inline_figures()
        charts = [figure.to_html(full_html=False, include_plotlyjs="cdn" if i == 0 else False)
                  for i, figure in enumerate(figures)]
        return "\n".join([self._head_html(note), *charts])


def report_options(cloudwatch: bool | None, options: dict[str, Any]):
    """`ReportOptions` from keywords; a one-line UsageError for a name that is no report option, or a
    value the CLI would refuse (`sm-locust report`'s own checks)."""
    # lazy: the report stack, ~120 ms (measured), only when a report is asked for
    from sm_locust.report.pipeline import ReportOptions

    require_bool("cloudwatch", cloudwatch, optional=True)
    known = {f.name for f in fields(ReportOptions)}
    for name in options:
        if name not in known:
            raise UsageError(f"unknown report option {name}=; choose from {', '.join(sorted(known - {'cloudwatch'}))}")
    given = {name: value for name, value in options.items() if name != "write_summary"}  # each by its OptionSpec
    return ReportOptions.parse(given, cloudwatch=cloudwatch, write_summary=options.get("write_summary", True))


def timeline_frame(run_dir: Path) -> pd.DataFrame:
    """timeline.jsonl as one row per second (see `RunResult.timeline`)."""
    path = timeline_path(run_dir)
    if path is None:
        return pd.DataFrame(columns=TIMELINE_COLUMNS)
    rows = []
    for s in iter_seconds(path) if path.suffix == ".jsonl" else _json_seconds(path):
        interval = s.interval or 1.0
        rows.append({"time": s.t, "users": s.users, "spawning": s.spawning, "requests": s.requests,
                     "failures": s.failures, "rps": s.requests / interval, "goodput_rps": s.successes / interval,
                     "p50_ms": histogram_percentile(s.hist, 50.0), "p95_ms": histogram_percentile(s.hist, 95.0),
                     "p99_ms": histogram_percentile(s.hist, 99.0), "client_cpu_pct": s.client_cpu_pct,
                     "backoffs": s.backoffs, "target_rate": s.target_rate, "sent": s.sent, "late": s.late,
                     "dropped": s.dropped})
    frame = pd.DataFrame(rows, columns=TIMELINE_COLUMNS)
    frame["time"] = pd.to_datetime(frame["time"], unit="s", utc=True)
    for column in ("p50_ms", "p95_ms", "p99_ms", "client_cpu_pct"):
        frame[column] = pd.to_numeric(frame[column])
    empty = [c for c in OPEN_LOOP_COLUMNS if frame[c].isna().all()]  # closed loop: no open-loop columns
    return frame.drop(columns=empty)


def _json_seconds(path: Path):
    return read_seconds(path)


def run_folder(value: object, caller: str, also: str = "") -> str | os.PathLike[str]:
    """`value` when it can name a run folder (a path, an s3:// URL), else a one-line UsageError naming the call
    (`also`: what else it takes)."""
    if isinstance(value, str | os.PathLike) and not isinstance(value, bytes):
        return value
    raise UsageError(f"{caller} takes a run folder (a path or an s3:// URL){also}, not {type(value).__name__} "
                     f"{value!r}")


def load(run_dir: str | os.PathLike[str], *, out: str | os.PathLike[str] | None = None, profile: str | None = None,
         region: str | None = None, s3: AwsClient = None) -> RunResult:
    """A finished run as a RunResult: a local run folder, or an s3:// one (`sm-locust run --upload`),
    downloaded first to `out` (default reports/<run-id>/) as `sm-locust report s3://...` does.
    UsageError when the folder is not a run."""
    text = os.fspath(run_folder(run_dir, "load()"))
    if isinstance(text, str) and text.startswith("s3://"):
        local, _ = fetch_run(text, out=out, s3=s3 if s3 is not None else s3_client(profile, region))
        return RunResult(local)
    refuse_in_progress(Path(text))  # a run still writing it would read as one that crashed
    return RunResult(text)
