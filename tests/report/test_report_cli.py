"""`sm-locust report` / `compare` end to end on the golden run: exit codes, outputs, summary.json
write-back, the CloudWatch default rule, and an HTML page that works offline and holds the charts."""

from __future__ import annotations

import base64
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sm_locust.cli import main
from sm_locust.report.pipeline import ReportOptions, cloudwatch_default, is_local_run, resolve_defaults

GOLDEN = Path(__file__).parent.parent / "data" / "report" / "golden"


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", "http://127.0.0.1:9")  # never real AWS


@pytest.fixture
def run_dir(tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(GOLDEN, dst)
    return dst


class _Scripts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.srcs, self.ids, self.links = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.srcs.append(a["src"])
        if tag == "link" and a.get("href"):
            self.links.append(a["href"])
        if a.get("id"):
            self.ids.append(a["id"])


def _plot_data(page: str, div_id: str) -> list[dict]:
    """The `data` argument of Plotly.newPlot for one div (plotly 7 may encode arrays as base64)."""
    m = re.search(r'Plotly\.newPlot\(\s*"' + re.escape(div_id) + r'",\s*(\[.*?\]),\s*\{', page, re.S)
    assert m, f"no plot for {div_id}"
    traces = json.loads(m.group(1))
    for t in traces:
        for k in ("x", "y"):
            v = t.get(k)
            if isinstance(v, dict) and "bdata" in v:
                t[k] = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"])).tolist()
    return traces


def test_report_no_cloudwatch_writes_everything(run_dir, capsys):
    before = json.loads((run_dir / "summary.json").read_text())
    code = main(["report", str(run_dir), "--no-cloudwatch", "--instance-type", "ml.c5.xlarge", "--target-rps", "100"])
    out, err = capsys.readouterr()
    assert code == 1  # the cut last line of the history is missing data
    assert "missing: Locust history: the last line" in err
    assert "sm-locust report: $ per 1M inferences: $2.83 (" in out
    sizing = next(line for line in out.splitlines() if "Instances needed for 100 rps" in line)
    assert sizing.startswith("sm-locust report: Instances needed for 100 rps: ") and "with safety factor 0.5" in sizing
    assert "sm-locust report: Autoscaling target (SageMakerVariantInvocationsPerInstance): " in out
    for name in ("merged_timeseries.csv", "steps.csv", "report.html"):
        assert (run_dir / name).is_file() and str(run_dir / name) in out
    after = json.loads((run_dir / "summary.json").read_text())
    for key, value in before.items():
        assert after[key] == value  # existing keys untouched
    assert after["cloudwatch"]["source"] == "none" and after["cloudwatch"]["notes"] == ["CloudWatch off "
                                                                                        "(--no-cloudwatch)"]
    assert after["cost"]["usd_per_million"] == pytest.approx(0.204 / (20 * 3600) * 1e6)
    assert after["cost"]["transactions_per_hour"] == 72000
    assert after["report"]["sustainable"]["rps"] == 20.0
    merged = pd.read_csv(run_dir / "merged_timeseries.csv")
    assert len(merged) == 10 and merged.columns[0] == "time"
    assert not [c for c in merged.columns if c.startswith("cw_")]


def test_html_is_self_contained_and_holds_the_figures(run_dir, capsys):
    main(["report", str(run_dir), "--no-cloudwatch", "--instance-type", "ml.c5.xlarge"])
    capsys.readouterr()
    page = (run_dir / "report.html").read_text()
    parser = _Scripts()
    parser.feed(page)
    assert parser.srcs == [] and parser.links == []  # nothing fetched: works offline
    assert "Plotly.newPlot" in page and len(page) > 3_000_000  # plotly.js inline
    for div in ("fig-throughput", "fig-throughput-time", "fig-latency-users", "fig-latency-time",
                "fig-endpoint-load", "fig-errors", "fig-decomposition", "gaps", "summary", "steps"):
        assert div in parser.ids
    thr = _plot_data(page, "fig-throughput")
    attempted = next(t for t in thr if t["name"] == "client rps (attempted)")
    assert attempted["y"] == [8.0, 20.0] and attempted["x"] == [1, 2]
    assert thr[0]["name"].startswith("goodput") and thr[0]["x"] == [1, 2]
    knee = next(t for t in thr if t["name"] == "knee")
    assert knee["x"] == [2] and knee["y"] == [thr[0]["y"][1]]  # on the line it belongs to
    errors = _plot_data(page, "fig-errors")
    assert errors[0]["y"] == [1, 1]
    # without CloudWatch the endpoint charts say why instead of drawing nothing
    assert re.search(r'id="fig-endpoint-load" class="missing">.*?no CloudWatch data', page, re.S)
    gaps = re.search(r'<section id="gaps">(.*?)</section>', page, re.S).group(1)
    assert "cut off mid-write" in gaps
    assert "$2.83" in page and "Transactions per hour" in page


def test_clean_run_without_cloudwatch_exits_0(run_dir, capsys):
    hist = run_dir / "locust_stats_history.csv"
    hist.write_text(hist.read_text().rsplit("\n", 1)[0] + "\n")
    assert main(["report", str(run_dir), "--no-cloudwatch", "--out", str(run_dir / "out")]) == 0
    assert (run_dir / "out" / "report.html").is_file()
    capsys.readouterr()


def test_auto_cloudwatch_unreachable_is_reported_not_fatal(run_dir, capsys):
    # AWS configuration present (conftest placeholders), CloudWatch URL = a closed loopback port
    code = main(["report", str(run_dir)])
    _, err = capsys.readouterr()
    assert code == 1 and "missing: CloudWatch: cannot connect" in err
    assert (run_dir / "report.html").is_file()


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    (other / "locust_stats_history.csv").write_text("when,what\n1,2\n")
    assert main(["report", str(other), "--no-cloudwatch"]) == 2
    assert "missing column(s) 'Timestamp'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["report", str(tmp_path), "--price-per-hour", "-1"])
    assert exc.value.code == 2
    capsys.readouterr()


def test_compare(run_dir, tmp_path, capsys):
    second = tmp_path / "run2"
    shutil.copytree(GOLDEN, second)
    main(["report", str(run_dir), "--no-cloudwatch", "--instance-type", "ml.c5.xlarge"])
    out = tmp_path / "cmp"
    code = main(["compare", str(run_dir), str(second), "--out", str(out)])
    stdout, _ = capsys.readouterr()
    assert code == 1  # both runs carry the cut-line gap
    table = pd.read_csv(out / "compare.csv")
    assert list(table["run"]) == ["run", "run2"]
    assert list(table["max_sustainable_rps"]) == [20.0, 20.0]
    assert table.loc[0, "usd_per_million"] == pytest.approx(2.83333, rel=1e-4)  # priced by the earlier report
    assert pd.isna(table.loc[1, "usd_per_million"])
    page = (out / "compare.html").read_text()
    assert 'id="cmp-throughput"' in page and "<script src" not in page
    assert str(out / "compare.html") in stdout
    assert main(["compare", str(tmp_path / "nothing")]) == 2
    capsys.readouterr()


def test_compare_sanitises_the_missing_lines(tmp_path, capsys):
    # a folder's name (and the gap text that quotes it) is untrusted: the CLI's TerminalStream lets no terminal
    # control reach stderr (the "missing:" lines print gap text unchanged)
    hostile = tmp_path / "run\x1b]0;pwned\x07\x1b[2J"
    shutil.copytree(GOLDEN, hostile)
    assert main(["compare", str(hostile), "--out", str(tmp_path / "cmp")]) == 1  # the golden run's cut-line gap
    out, err = capsys.readouterr()
    missing = [line for line in err.splitlines() if "missing:" in line]
    assert missing and all("\x1b" not in line and "\x07" not in line for line in missing), missing
    assert "\x1b" not in out


def test_compare_leaves_a_run_loaded_by_rate_phases_out_of_the_charts_vs_users(run_dir, tmp_path, capsys):
    watched = tmp_path / "watched"
    shutil.copytree(GOLDEN, watched)
    summary = json.loads((watched / "summary.json").read_text())
    summary["traffic"] = {"phases": [{"duration_s": 60, "rps": 20}]}
    (watched / "summary.json").write_text(json.dumps(summary))
    main(["compare", str(run_dir), str(watched), "--out", str(tmp_path / "cmp")])
    capsys.readouterr()
    page = (tmp_path / "cmp" / "compare.html").read_text()
    assert page.count("watched: its load was rate phases") == 2 and '"name":"run"' in page


def test_cloudwatch_default_rule(tmp_path):
    home = {"HOME": str(tmp_path)}
    summary = {"endpoint": "ep"}
    opts = resolve_defaults(ReportOptions(), summary, {})
    assert cloudwatch_default(opts, summary, {}, {**home, "AWS_PROFILE": "p"})[0] is True
    on, why, gap = cloudwatch_default(opts, summary, {}, home)
    assert (on, gap) == (False, True) and "no AWS configuration" in why
    local = {"sm_locust": {"endpoint_name": "ep", "endpoint_url": "http://127.0.0.1:8080"}}
    assert is_local_run({}, local)
    assert cloudwatch_default(opts, summary, local, {**home, "AWS_PROFILE": "p"})[:3:2] == (False, False)
    assert cloudwatch_default(opts, summary, local, {**home, "AWS_ENDPOINT_URL_CLOUDWATCH": "http://127.0.0.1:5000"})[0]
    assert cloudwatch_default(ReportOptions(cloudwatch=False), summary, {}, {"AWS_PROFILE": "p"})[0] is False
    assert cloudwatch_default(ReportOptions(cloudwatch=True), {}, local, home)[0] is True
    assert cloudwatch_default(ReportOptions(), {}, {}, {"AWS_PROFILE": "p"})[0] is False  # no endpoint name


def test_defaults_come_from_the_run():
    summary = {"endpoint": "ep-a", "region": "eu-west-1"}
    options = {"sm_locust": {"endpoint_name": "ep-b", "target_variant": "blue", "aws_profile": "dev"}}
    r = resolve_defaults(ReportOptions(instance_type="ml.m5.large"), summary, options)
    assert (r.endpoint_name, r.region, r.variant_name, r.profile, r.instance_type) == ("ep-a", "eu-west-1", "blue",
                                                                                       "dev", "ml.m5.large")
    r = resolve_defaults(ReportOptions(endpoint_name="mine"), summary, {})
    assert (r.endpoint_name, r.variant_name) == ("mine", "AllTraffic")
