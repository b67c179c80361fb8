"""`sm-locust report` and `compare` write the same bytes for the same run folder: report.html,
steps.csv, merged_timeseries.csv, hourly.csv, summary.json's additions, the closing lines and
compare.csv / compare.html, against the files the dict readers wrote (tests/data/report/bytes/).

The run folders cover the readers' branches: the first schema-1 writer's folder (no intervals, no
verdict), today's builder's search and constant runs, an LLM run with a model mix and an inconclusive
verdict, a watched rate run (autoscaling, traffic phases) and a soak run's hours. Only what changes
from one report to the next is masked: the time it was generated, the temporary folder, plotly.js.
`python -m tests.report.test_report_bytes` writes the expected files again (after a wanted change).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from sm_locust.report.compare import compare_runs, compare_table, terminal_table
from sm_locust.report.pipeline import ReportOptions, build_report

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN = DATA / "report" / "golden"
EXPECTED = DATA / "report" / "bytes"
CSVS = ("locust_stats.csv", "locust_stats_history.csv", "locust_failures.csv")
OUTPUTS = ("report.html", "steps.csv", "merged_timeseries.csv", "hourly.csv", "summary.json")


def _built(name: str) -> dict:
    return json.loads((DATA / "summaries" / f"built-2026-12-07-{name}.json").read_text())


def _llm_mix() -> dict:
    summary = _built("search")
    summary["verdict"] = {"status": "inconclusive", "reason": "the load generator's CPU was over 90 % at step 2"}
    summary["targets"] = [{"name": "model-a.tar.gz", "requests": 60, "failures": 1, "p50_ms": 20, "p95_ms": 40,
                           "p99_ms": 60, "cold": 3},
                          {"name": "model-b.tar.gz", "requests": 30, "failures": 0, "p50_ms": 25, "p95_ms": 55,
                           "p99_ms": 70, "cold": 2},
                          {"name": "others", "requests": 10, "failures": 0, "p50_ms": 30, "p95_ms": 70, "p99_ms": 90,
                           "cold": 4, "targets": 7}]
    summary["mix"] = {"field": "target_model", "spec": "zipf:9", "kind": "zipf", "targets": 9, "seed": 7, "zipf_s": 1.1}
    summary["model_cache"] = {"source": "endpoint", "requests": 99, "hit_rate": 0.91, "hit_rate_ci95": [0.85, 0.95],
                              "threshold_ms": None, "cold": {"requests": 9, "p50_ms": 400, "p95_ms": 900,
                                                             "p99_ms": 1100, "wait_p50_ms": 350, "wait_p95_ms": 800},
                              "warm": {"requests": 90, "p50_ms": 20, "p95_ms": 45, "p99_ms": 60}}
    return summary


def _rate() -> dict:
    def step(start_s: float, end_s: float, goodput: float, p95: float) -> dict:
        def iso(s: float) -> str:
            return f"2024-01-01T12:{int(s // 60):02d}:{s % 60:06.3f}Z"
        return {"users": 2, "start": iso(start_s), "end": iso(end_s), "rps": goodput, "goodput_rps": goodput,
                "p50_ms": p95 / 2, "p95_ms": p95, "p99_ms": p95 * 1.2, "error_rate": 0.0, "client_bound": False,
                "ci95": {"p95_ms": [p95 * 0.9, p95 * 1.1]}}
    block = {"time_scale": 30.0, "instances": [{"t_s": 0.0, "desired": 1, "in_service": 1},
                                               {"t_s": 480.0, "desired": 3, "in_service": 1},
                                               {"t_s": 720.0, "desired": 3, "in_service": 3}],
             "peak_instances": 3, "instance_hours": 0.73, "cost_usd": None,
             "slo": {"slo_ms": 250.0, "percentile": 95.0}, "slo_breach_s": 781.0, "breach_client_bound_s": 0.0,
             "scale_events": [{"t_s": 480.0, "direction": "out", "from": 1, "to": 3, "reaction_s": 180.0,
                               "ready_s": 420.0}], "failed": 0, "throttled": 0, "flaps": 0}
    return {"schema": 1, "endpoint": "golden-ep", "started_at": "2024-01-01T12:00:55.000Z",
            "ended_at": "2024-01-01T12:01:06.000Z", "steps": [step(56, 60, 20.0, 54), step(61, 66, 45.0, 600)],
            "totals": {"requests": 140, "failures": 2, "rps": 14.0, "p50_ms": 50, "p95_ms": 140, "p99_ms": 150},
            "autoscaling": block, "traffic": {"phases": [{"duration_s": 300, "rps": 20}], "time_scale": 30.0}}


def _soak() -> dict:
    summary = _built("constant")
    summary["started_at"] = "2024-01-01T12:00:55.000Z"
    summary["hours"] = [{"hour": 1, "start": "2024-01-01T12:00:55.000Z", "end": "2024-01-01T13:00:55.000Z",
                         "duration_s": 3600, "users": 2, "requests": 72000, "failures": 36, "rps": 20.0,
                         "goodput_rps": 19.99, "error_rate": 0.0005, "p50_ms": 40, "p95_ms": 90, "p99_ms": 120,
                         "errors": {"ModelError": 30, "ThrottlingException": 6}, "client_cpu_pct": 35.0},
                        {"hour": 2, "start": "2024-01-01T13:00:55.000Z", "end": "2024-01-01T13:30:55.000Z",
                         "duration_s": 1800, "users": 2, "requests": 34000, "failures": 0, "rps": 18.9,
                         "goodput_rps": 18.9, "error_rate": 0.0, "p50_ms": 44, "p95_ms": 101, "p99_ms": 130,
                         "errors": {}, "client_cpu_pct": 36.0}]
    return summary


SLOS = {"options": {"latency_slo_ms": 120.0, "slo_percentile": 95.0, "ttft_slo_ms": 500.0, "itl_slo_ms": 40.0}}
# case -> (summary.json, options.json, the report's options)
CASES = {
    "golden": (None, None, {"price_per_hour": 1.0, "instance_type": "ml.c5.xlarge", "target_rps": 100.0}),
    "search": (_built("search"), None, {"instance_type": "ml.g5.xlarge", "target_rps": 200.0}),
    "constant": (_built("constant"), None, {}),
    "llm-mix": (_llm_mix(), SLOS, {"price_per_hour": 2.5, "serverless_memory_mb": 4096}),
    "rate": (_rate(), SLOS, {"price_per_hour": 0.23}),
    "soak": (_soak(), None, {"instance_type": "ml.c5.xlarge"}),
}


def _folder(root: Path, case: str) -> Path:
    summary, options, _ = CASES[case]
    folder = root / case
    shutil.copytree(GOLDEN, folder)
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps(copy.deepcopy(summary), indent=2))
    if options is not None:
        merged = {**json.loads((GOLDEN / "options.json").read_text()), **options}
        (folder / "options.json").write_text(json.dumps(merged, indent=2))
    return folder


def _masked(text: str, folder: Path, generated_at: str | None) -> str:
    text = re.sub(r'<script type="text/javascript">.*?</script>', "<script>plotly.js</script>", text, count=1,
                  flags=re.S)
    text = text.replace(str(folder.parent), "RUNS")
    return text.replace(generated_at, "GENERATED") if generated_at else text


def report_outputs(root: Path, case: str) -> dict[str, str]:
    """The report's files and closing lines for `case`, masked (see the module doc)."""
    folder = _folder(root, case)
    result = build_report(folder, ReportOptions(cloudwatch=False, **CASES[case][2]))
    generated = json.loads((folder / "summary.json").read_text())["report"]["generated_at"]
    out = {name: _masked((folder / name).read_text(), folder, generated) for name in OUTPUTS}
    out["closing.txt"] = "\n".join(f"{label}: {value}" for label, value in result.answers) + \
        f"\nexit {result.exit_code}\n" + "".join(f"gap: {g}\n" for g in result.gaps)
    return out


def compare_outputs(root: Path) -> dict[str, str]:
    """compare.csv, compare.html and the terminal table of the cases side by side."""
    folders = [_folder(root, case) for case in CASES]
    out = root / "compare"
    compare_runs([str(f) for f in folders], out, target_rps=150.0)
    _runs, table = compare_table([str(f) for f in folders], target_rps=150.0)
    return {"compare.csv": (out / "compare.csv").read_text(),
            "compare.html": _masked((out / "compare.html").read_text(), folders[0], None),
            "terminal.txt": "\n".join(terminal_table(table)) + "\n"}


@pytest.mark.parametrize("case", list(CASES))
def test_the_report_writes_the_bytes_the_dict_readers_wrote(case, tmp_path):
    written = report_outputs(tmp_path, case)
    for name, text in written.items():
        assert text == (EXPECTED / case / name).read_text(), f"{case}/{name} differs"


def test_compare_writes_the_bytes_the_dict_readers_wrote(tmp_path):
    for name, text in compare_outputs(tmp_path).items():
        assert text == (EXPECTED / "compare" / name).read_text(), f"compare/{name} differs"


def test_the_cases_reach_the_branches_they_are_for(tmp_path):
    """The expected files show what each case is for (a case that lost its branch would check nothing)."""
    pages = {case: (EXPECTED / case / "report.html").read_text() for case in CASES}
    assert 'id="targets"' in pages["llm-mix"] and "INCONCLUSIVE" in pages["llm-mix"]
    assert "Policy verdict" in pages["rate"] and 'id="hours"' in pages["soak"]
    assert "Capacity" in (EXPECTED / "search" / "closing.txt").read_text()


def _write(root: Path) -> None:  # pragma: no cover - run by hand after a wanted change
    for case in CASES:
        for name, text in report_outputs(root, case).items():
            (EXPECTED / case).mkdir(parents=True, exist_ok=True)
            (EXPECTED / case / name).write_text(text)
        shutil.rmtree(root / case)
    (EXPECTED / "compare").mkdir(parents=True, exist_ok=True)
    for name, text in compare_outputs(root).items():
        (EXPECTED / "compare" / name).write_text(text)


if __name__ == "__main__":  # pragma: no cover
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        _write(Path(tmp))
    sys.exit(0)
