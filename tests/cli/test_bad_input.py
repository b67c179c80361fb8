"""Bad input over every command, as a new user types it: each case ends with its exit code, exactly
one line on stderr (`sm-locust: error: ...`, or the command's own usage line), no traceback, and
nothing left behind (no half run folder, no child process). Most cases call `sm_locust.cli.main`
in this process; plain `locust -f locustfiles/sagemaker.py` runs as a process. Also here: the
plain-data unpickler for the serverless toolkit's `.pkl` invoke args, refusing a malicious pickle,
and the history CSV's malformed rows."""

from __future__ import annotations

import csv
import io
import json
import os
import pickle
import pickletools
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy
import psutil
import pytest

from sm_locust.cli import main
from sm_locust.errors import UsageError
from sm_locust.payloads import load_payloads
from sm_locust.payloads.pickles import loads_plain
from sm_locust.record.schema import drop_malformed_rows
from sm_locust.testing.mounts import mount_tmpfs, unmount
from sm_locust.util.ports import free_port
from tests.conftest import ROOT, SAMPLE_PAYLOAD, assert_one_line_error, run_cli

HISTORY_HEADER = ("Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,95%,Total Request Count,"
                  "Total Failure Count,Total Median Response Time,Total Average Response Time")


def billion_laughs(item: str) -> str:
    """YAML whose 9 levels of aliases expand to 9^9 values (`item`: "- " for list entries, "" for keys)."""
    lines = [f"{item}l0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"{item}l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * 9) + "]" for n in range(1, 9)]
    return "\n".join(lines) + "\n"


def history_row(t: int) -> str:
    return f"{t},2,,Aggregated,40.0,0.0,20,30,{40 * (t - 999)},0,20,21"


class Evil:
    """Unpickling this runs `os.system(...)` (what a hostile .pkl does)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def scene(tmp_path, monkeypatch):
    """A working folder with the things bad input points at; the command runs in it."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "afile").write_text("not a folder\n")
    (work / "blob.bin").write_bytes(os.urandom(4096))
    run = work / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"schema": 1, "endpoint": "ep", "totals": {
        "requests": 100, "failures": 0, "rps": 10.0, "p50_ms": 5.0, "p95_ms": 9.0, "p99_ms": 12.0, "errors": {}},
        "steps": [], "plateau": None}))
    for name, summary in {
        "shape_totals": {"schema": 1, "totals": []},
        "shape_requests": {"schema": 1, "totals": {"requests": "many", "failures": 0, "rps": 1.0}},
        "shape_steps": {"schema": 1, "totals": {"requests": 1, "failures": 0, "rps": 1.0},
                        "steps": [{"users": 2, "rps": "fast"}]},
        "shape_plateau": {"schema": 1, "totals": {"requests": 1, "failures": 0, "rps": 1.0}, "steps": [], "plateau": 5},
        "shape_time": {"schema": 1, "started_at": "yesterday", "totals": {"requests": 1, "failures": 0, "rps": 1.0}},
    }.items():
        (work / name).mkdir()
        (work / name / "summary.json").write_text(json.dumps(summary))
    damaged = work / "damaged"
    damaged.mkdir()
    rows = [history_row(1000), history_row(1001), '1002,2,,"Aggregated,40.0,0.0,20,30,80,0,20,21',
            "1003,2,Aggregated,40.0,0.0,20,30,120,0,20,21", history_row(1004)]  # an open quote, a shifted row
    (damaged / "locust_stats_history.csv").write_text("\n".join([HISTORY_HEADER, *rows]) + "\n")
    (work / "evil.pkl").write_bytes(pickle.dumps([{"Body": b"x", "ContentType": Evil(work / "pwned")}]))
    os.mkfifo(work / "fifo")  # a payload that would block the read forever
    os.mkfifo(work / "fifo.csv")  # a traffic mix named like a CSV (round 4: the read hung)
    os.mkfifo(work / "fifo.yaml")
    (work / "loop").symlink_to("loop")
    (work / "deep_summary").mkdir()
    (work / "deep_summary" / "summary.json").write_text("[" * 100_000 + "]" * 100_000)  # a RecursionError
    (work / "stairs.json").write_text(json.dumps({"TrafficType": "STAIRS", "Stairs": {
        "DurationInSeconds": 1, "NumberOfSteps": 100_000_000, "UsersPerStep": 1}}))  # round 4: 2.7 GB
    (work / "traffic.yaml").write_text("[{duration_s: 10, rps: 5}, {duration_s: 10, rps: 10}]\n")
    (work / "bomb.yaml").write_text(billion_laughs("- "))  # 9^9 values once its aliases expand
    (work / "bomb_sweep.yaml").write_text(billion_laughs("") + "name: bomb\nload: {users: *l8}\n")
    with open(work / "seven_mb.json", "wb") as fh:  # over SageMaker's 6 MB body limit (sparse: cheap)
        fh.truncate(7_000_000)
    numpy.save(work / "wide.npy", numpy.ones((10, 1000)))  # 2000 rows per body: ~10 MB of JSON
    (work / "negative_prices.json").write_text('{"instances": {"ml.c5.xlarge": {"usd_per_hour": -0.2}}}')
    (work / "nan_prices.json").write_text('{"instances": {"ml.c5.xlarge": NaN}}')  # Python's json reads NaN
    (work / "sweep.yaml").write_text("name: bad\nendpoint: {service_time_ms: 10}\ngrid: {max_concurrency: [1, 2]}\n"
                                     f"load: {{payload: {SAMPLE_PAYLOAD}, users: 2, run_time: 3s}}\n"
                                     "objective: {target_rps: 10, slo_ms: 100}\nprice_per_hour: 0.2\n")
    (work / "other_sweep").mkdir()
    (work / "other_sweep" / "sweep.json").write_text('{"sweep_id": "someone-else", "configurations": []}')
    (work / "serverless_grid.yaml").write_text(
        "name: both\nserverless: {memory_size_mb: [2048], max_concurrency: [2]}\n"
        f"grid: {{max_concurrency: [1, 2]}}\nload: {{payload: {SAMPLE_PAYLOAD}}}\n")
    (work / "not_json").mkdir()
    (work / "not_json" / "summary.json").write_text("{not json")
    (work / "crlf.jsonl").write_text(json.dumps({"Body": "1,2", "CustomAttributes": "a=b\r\nX-Evil: 1"}) + "\n")
    monkeypatch.chdir(work)
    return work


def snapshot(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): (p.stat().st_size if p.is_file() else -1) for p in folder.rglob("*")}


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


PAYLOAD = str(SAMPLE_PAYLOAD)
LOCAL = ["--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:{port}", "--payload", PAYLOAD]

# id: (argv, environment changes (None deletes), exit code, needles in the one line)
CASES: dict[str, tuple[list[str], dict, int, list[str]]] = {
    # -- run: options ------------------------------------------------------------------------
    "run no endpoint": (["run", "--payload", PAYLOAD], {}, 2, ["--endpoint-name"]),
    "run no payload": (["run", "--endpoint-name", "ep"], {}, 2, ["--payload"]),
    "run payload missing": (["run", "--endpoint-name", "ep", "--payload", "nope.json"], {}, 2, ["nope.json"]),
    "run unknown shape": (["run", *LOCAL, "--shape", "stairz"], {}, 2, ["stairz", "step"]),
    "run spawn rate inf": (["run", *LOCAL, "-r", "inf"], {}, 2, ["--spawn-rate"]),
    "run spawn rate 0": (["run", *LOCAL, "-r", "0"], {}, 2, ["--spawn-rate"]),
    "run processes -5": (["run", *LOCAL, "--processes", "-5"], {}, 2, ["--processes", "-5"]),
    "run processes 0": (["run", *LOCAL, "--processes", "0"], {}, 2, ["--processes"]),
    "run users 0": (["run", *LOCAL, "-u", "0"], {}, 2, ["--users"]),
    "run run-time abc": (["run", *LOCAL, "-t", "abc"], {}, 2, ["--run-time"]),
    "run think-time abc": (["run", *LOCAL, "--think-time", "abc"], {}, 2, ["--think-time", "abc"]),
    "run think-time nan": (["run", *LOCAL, "--think-time", "nan"], {}, 2, ["--think-time", "finite"]),
    "run think-time -1": (["run", *LOCAL, "--think-time", "-1"], {}, 2, ["--think-time"]),
    "run stop-at-knee maybe": (["run", *LOCAL, "--stop-at-knee", "maybe"], {}, 2, ["--stop-at-knee", "maybe"]),
    "run transport unknown": (["run", *LOCAL, "--transport", "pigeon"], {}, 2, ["--transport", "pigeon"]),
    "run url scheme": (["run", "--endpoint-name", "ep", "--endpoint-url", "ftp://x", "--payload", PAYLOAD], {}, 2,
                       ["--endpoint-url", "http://"]),
    "run url refused": (["run", *LOCAL], {}, 1, ["connection refused"]),
    "run unknown flag": (["run", *LOCAL, "--bogus-flag", "1"], {}, 2, ["--bogus-flag"]),
    "run upload not s3": (["run", *LOCAL, "--upload", "http://bucket/x"], {}, 2, ["--upload", "s3://"]),
    # -- run: the run folder -----------------------------------------------------------------
    "run out under a file": (["run", *LOCAL, "--out", "afile/run"], {}, 2, ["--out", "afile", "is a file"]),
    "run out is a file": (["run", *LOCAL, "--out", "afile"], {}, 2, ["--out", "a file is in the way"]),
    "run out in /proc": (["run", *LOCAL, "--out", "/proc/sm-locust-run"], {}, 2,
                         ["--out", "/proc", "cannot be created"]),
    "run out holds a run": (["run", *LOCAL, "--out", "run"], {}, 2, ["already holds a run", "--overwrite"]),
    # -- run: payloads -----------------------------------------------------------------------
    "run serializer with a file": (["run", *LOCAL[:-1], "blob.bin", "--serializer", "json"], {}, 2,
                                   ["--serializer json does not apply", "blob.bin"]),
    "run malicious pickle": (["run", *LOCAL[:-1], "evil.pkl"], {}, 2,
                             ["evil.pkl", "plain-data pickle", "posix.system"]),
    "run unknown serializer": (["run", *LOCAL, "--serializer", "jsn"], {}, 2, ["serializer", "jsn"]),
    # -- run: AWS ----------------------------------------------------------------------------
    "run region with a space": (["run", "--endpoint-name", "ep", "--payload", PAYLOAD, "--region", "us east-1"], {}, 2,
                                ["--region", "us east-1"]),
    "run region not aws (boto3)": (["run", "--endpoint-name", "ep", "--payload", PAYLOAD, "--region", "useast1",
                                    "--transport", "boto3"], {}, 2, ["--region", "not an AWS region"]),
    "run region unreachable": (["run", "--endpoint-name", "ep", "--payload", PAYLOAD, "--region", "zz-nowhere-9"], {},
                               1,
                               ["cannot connect", "runtime.sagemaker.zz-nowhere-9.amazonaws.com"]),
    "run no region": (["run", "--endpoint-name", "ep", "--payload", PAYLOAD], {"AWS_DEFAULT_REGION": None}, 2,
                      ["--region"]),
    "run no credentials": (["run", "--endpoint-name", "ep", "--payload", PAYLOAD],
                           {"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None}, 2, ["no AWS credentials"]),
    "run unknown profile": (["run", "--endpoint-name", "ep", "--payload", PAYLOAD, "--aws-profile", "nobody"], {}, 2,
                            ["nobody", "--aws-profile"]),
    # -- run: unbounded payloads (issue 23 item 3) ---------------------------------------------
    "run payload /dev/zero": (["run", *LOCAL[:-1], "/dev/zero"], {}, 2, ["/dev/zero", "not a regular file"]),
    "run payload fifo": (["run", *LOCAL[:-1], "fifo"], {}, 2, ["fifo", "not a regular file"]),
    "run payload over 6 MB": (["run", *LOCAL[:-1], "seven_mb.json"], {}, 2,
                              ["seven_mb.json", "6,291,456 bytes (6 MB)"]),
    "run batch over 6 MB": (["run", *LOCAL[:-1], "wide.npy", "--batch-size", "2000"], {}, 2,
                            ["wide.npy batch 1", "6,291,456", "--batch-size"]),
    "run prompts fifo": (["run", *LOCAL[:-2], "--prompts", "fifo"], {}, 2, ["--prompts", "fifo", "not a regular file"]),
    "smoke payload /dev/zero": (["smoke", *LOCAL[:-1], "/dev/zero"], {}, 2, ["/dev/zero", "not a regular file"]),
    # -- names and header values SageMaker refuses (issue 23 item 6) --------------------------
    "run endpoint name slash": (["run", *LOCAL, "--endpoint-name", "ep/x"], {}, 2,
                                ["--endpoint-name 'ep/x'", "EndpointName"]),
    "run endpoint name 64": (["run", *LOCAL, "--endpoint-name", "e" * 64], {}, 2, ["64 characters", "at most 63"]),
    "run endpoint name dot": (["run", *LOCAL, "--endpoint-name", "my.ep"], {}, 2,
                              ["'my.ep'", "letters, digits and hyphens"]),
    "run custom attributes CRLF": (["run", *LOCAL, "--custom-attributes", "a=b\r\nX-Evil: 1"], {}, 2,
                                   ["--custom-attributes", "'\\r'", "CustomAttributes"]),
    "run target variant": (["run", *LOCAL, "--target-variant", "all_traffic"], {}, 2,
                           ["--target-variant", "TargetVariant"]),
    "run inference component": (["run", *LOCAL, "--inference-component", "ic-"], {}, 2,
                                ["--inference-component", "'ic-'"]),
    "run inference id too long": (["run", *LOCAL, "--inference-id", "i" * 65], {}, 2, ["--inference-id", "at most 64"]),
    "run jsonl header CRLF": (["run", *LOCAL[:-1], "crlf.jsonl"], {}, 2, ["crlf.jsonl:1", "CustomAttributes", "'\\r'"]),
    "smoke endpoint name": (["smoke", *LOCAL, "--endpoint-name", "ep ep"], {}, 2, ["--endpoint-name 'ep ep'"]),
    "serve endpoint name": (["serve", "--endpoint-name", "ep/1"], {}, 2, ["--endpoint-name 'ep/1'"]),
    "serve variant name": (["serve", "--variant-name", "All Traffic"], {}, 2, ["--variant-name", "TargetVariant"]),
    "report endpoint name": (["report", "run", "--endpoint-name", "ep-"], {}, 2, ["--endpoint-name 'ep-'"]),
    # -- numbers: finite, in range, one line naming the option (issue 23 item 5) --------------
    "run users nan": (["run", *LOCAL, "-u", "nan"], {}, 2, ["--users", "whole number", "'nan'"]),
    "run read timeout inf": (["run", *LOCAL, "--read-timeout", "inf"], {}, 2, ["--read-timeout", "'inf'"]),
    "run connect timeout 0": (["run", *LOCAL, "--connect-timeout", "0"], {}, 2, ["--connect-timeout", "more than 0"]),
    "run batch size 0": (["run", *LOCAL, "--batch-size", "0"], {}, 2, ["--batch-size", "at least 1"]),
    "run payload seed -1": (["run", *LOCAL, "--payload-seed", "-1"], {}, 2, ["--payload-seed", "at least 0"]),
    "env think time nan": (["run", *LOCAL], {"SM_LOCUST_THINK_TIME": "nan"}, 2, ["SM_LOCUST_THINK_TIME", "finite"]),
    "smoke tolerance -1": (["smoke", "--run-dir", "run", "--baseline", "run", "--tolerance", "-1"], {}, 2,
                           ["--tolerance", "at least 0"]),
    "smoke spawn rate nan": (["smoke", *LOCAL, "-r", "nan"], {}, 2, ["--spawn-rate", "'nan'"]),
    "serve service time nan": (["serve", "--service-time-ms", "nan"], {}, 2, ["--service-time-ms", "'nan'"]),
    "serve latency inf": (["serve", "--latency-ms", "inf"], {}, 2, ["--latency-ms", "'inf'"]),
    "serve workers 1.5": (["serve", "--workers", "1.5"], {}, 2, ["--workers", "whole number"]),
    "demo service time 0": (["demo", "--service-time-ms", "0"], {}, 2, ["--service-time-ms", "more than 0"]),
    "demo step seconds nan": (["demo", "--step-seconds", "nan"], {}, 2, ["--step-seconds", "'nan'"]),
    "report price nan": (["report", "run", "--price-per-hour", "nan"], {}, 2, ["--price-per-hour", "'nan'"]),
    "report price -1": (["report", "run", "--price-per-hour", "-1"], {}, 2, ["--price-per-hour", "more than 0"]),
    "report wait timeout inf": (["report", "run", "--wait-timeout", "inf"], {}, 2, ["--wait-timeout", "'inf'"]),
    "report prices negative": (["report", "run", "--no-cloudwatch", "--prices", "negative_prices.json"], {}, 2,
                               ["negative_prices.json", "usd_per_hour", "at least 0"]),
    "report prices NaN": (["report", "run", "--no-cloudwatch", "--prices", "nan_prices.json"], {}, 2,
                          ["nan_prices.json", "usd_per_hour", "finite"]),
    "compare target rps inf": (["compare", "run", "--target-rps", "inf"], {}, 2, ["--target-rps", "'inf'"]),
    "compare prices negative": (["compare", "run", "--prices", "negative_prices.json", "--out", "cmp"], {}, 2,
                                ["negative_prices.json", "at least 0"]),
    # -- SM_LOCUST_* environment -------------------------------------------------------------
    "env think time": (["run", *LOCAL], {"SM_LOCUST_THINK_TIME": "abc"}, 2, ["SM_LOCUST_THINK_TIME", "abc"]),
    "env bool": (["run", *LOCAL], {"SM_LOCUST_STOP_AT_KNEE": "maybe"}, 2, ["SM_LOCUST_STOP_AT_KNEE"]),
    "env choice": (["run", *LOCAL], {"SM_LOCUST_TRANSPORT": "pigeon"}, 2, ["SM_LOCUST_TRANSPORT", "boto3, fast"]),
    "env whole number": (["smoke", *LOCAL], {"SM_LOCUST_MAX_USERS": "1.5"}, 2, ["SM_LOCUST_MAX_USERS", "whole number"]),
    "env split": (["run", *LOCAL], {"SM_LOCUST_SPLIT": "two"}, 2, ["SM_LOCUST_SPLIT"]),
    # -- smoke -------------------------------------------------------------------------------
    "smoke negative p95": (["smoke", "--run-dir", "run", "--max-p95-ms", "-1"], {}, 2, ["--max-p95-ms"]),
    "smoke error rate 2": (["smoke", "--run-dir", "run", "--max-error-rate", "2"], {}, 2, ["between 0 and 1"]),
    "smoke not a run": (["smoke", "--run-dir", "afile"], {}, 2, ["afile"]),
    "smoke summary wrong shape": (["smoke", "--run-dir", "shape_requests"], {}, 2, ["totals.requests", "'many'"]),
    "smoke baseline wrong shape": (["smoke", "--run-dir", "run", "--baseline", "shape_steps"], {}, 2,
                                   ["steps[0].rps", "docs/summary.md"]),
    "smoke out holds a run": (["smoke", *LOCAL, "--out", "run"], {}, 2, ["already holds a run"]),
    # -- report ------------------------------------------------------------------------------
    "report no folder": (["report", "nowhere"], {}, 2, ["nowhere", "not a folder"]),
    "report summary not json": (["report", "not_json", "--no-cloudwatch"], {}, 2,
                                ["not_json is not a readable run folder", "not valid JSON"]),
    "report totals list": (["report", "shape_totals", "--no-cloudwatch"], {}, 2,
                           ["totals is [] (a JSON list)", "not an object"]),
    "report step rps text": (["report", "shape_steps", "--no-cloudwatch"], {}, 2, ["steps[0].rps", "'fast'"]),
    "report plateau number": (["report", "shape_plateau", "--no-cloudwatch"], {}, 2, ["plateau is 5"]),
    "report bad time": (["report", "shape_time", "--no-cloudwatch"], {}, 2, ["started_at", "ISO-8601"]),
    "report history damaged": (["report", "damaged", "--no-cloudwatch"], {}, 2,
                               ["2 of 5 rows are malformed", "lines 4, 5"]),
    "report out under a file": (["report", "run", "--out", "afile/x"], {}, 2, ["--out", "is a file"]),
    "report period": (["report", "run", "--period", "90"], {}, 2, ["--period 90"]),
    "smoke junit is a folder": (["smoke", "--run-dir", "run", "--junit", "run"], {}, 2, ["--junit run is a folder"]),
    "smoke junit under a file": (["smoke", "--run-dir", "run", "--junit", "afile/j.xml"], {}, 2,
                                 ["--junit afile/j.xml", "afile is a file"]),
    "smoke junit before the test": (["smoke", *LOCAL, "--junit", "run"], {}, 2, ["--junit run is a folder"]),
    # -- compare -----------------------------------------------------------------------------
    "compare wrong shape": (["compare", "run", "shape_totals", "--out", "cmp"], {}, 2, ["shape_totals", "totals"]),
    "compare out under a file": (["compare", "run", "--out", "afile/cmp"], {}, 2, ["--out", "is a file"]),
    "compare safety factor": (["compare", "run", "--safety-factor", "2"], {}, 2, ["--safety-factor"]),
    # -- demo, serve, sweep ------------------------------------------------------------------
    "demo out holds a run": (["demo", "--out", "run"], {}, 2, ["already holds a run", "--overwrite"]),
    "demo out under a file": (["demo", "--out", "afile/demo"], {}, 2, ["is a file"]),
    "demo step users 0": (["demo", "--step-users", "0"], {}, 2, ["--step-users"]),
    "serve ratio 2": (["serve", "--throttle-ratio", "2"], {}, 2, ["--throttle-ratio"]),
    "serve port": (["serve", "--port", "-5"], {}, 2, ["--port"]),
    "serve workers 0": (["serve", "--workers", "0"], {}, 2, ["--workers"]),
    "sweep no file": (["sweep", "nope.yaml"], {}, 2, ["nope.yaml"]),
    "sweep out holds another sweep": (["sweep", "sweep.yaml", "--plan", "--out", "other_sweep"], {}, 2,
                                      ["--out other_sweep holds another sweep", "'someone-else'"]),
    "sweep out holds a run": (["sweep", "sweep.yaml", "--out", "run"], {}, 2, ["--out run holds a run"]),
    "sweep out is a file": (["sweep", "sweep.yaml", "--plan", "--out", "afile"], {}, 2, ["a file is in the way"]),
    "sweep cleanup no region": (["sweep", "--cleanup", "abc"], {"AWS_DEFAULT_REGION": None, "AWS_REGION": None}, 2,
                                ["no AWS region for SageMaker", "AWS_REGION"]),
    "sweep serverless and grid concurrency": (["sweep", "serverless_grid.yaml", "--plan"], {}, 2,
                                              ["grid.max_concurrency: a serverless sweep's max_concurrency is "
                                               "serverless.max_concurrency"]),
    "sweep price negative": (["sweep", "sweep.yaml", "--plan", "--set", "price_per_hour=-1"], {}, 2,
                             ["sweep.yaml: price_per_hour: must be at least 0, got -1"]),
    "sweep service time nan": (["sweep", "sweep.yaml", "--plan", "--set", "endpoint.service_time_ms=.nan"], {}, 2,
                               ["--service-time-ms must be a finite number"]),
    "sweep slo inf": (["sweep", "sweep.yaml", "--plan", "--set", "objective.slo_ms=.inf"], {}, 2,
                      ["objective.slo_ms: must be a finite number, got inf"]),
    "sweep think time nan": (["sweep", "sweep.yaml", "--plan", "--set", "load.think_time=.nan"], {}, 2,
                             ["load.think_time: must be a finite number"]),
    # -- round 4: sizes that allocated without bound (issue 32 item 3, 6) --------------------------
    "serve model count 1e9": (["serve", "--multi-model", "--model-count", "1000000000"], {}, 2,
                              ["--model-count", "at most 1,000,000"]),
    "serve max instances 1e9": (["serve", "--instances", "1", "--target-value", "5", "--max-instances", "1000000000"],
                                {}, 2, ["--max-instances", "at most 1,000"]),
    "serve instances 1e9": (["serve", "--instances", "1000000000"], {}, 2, ["--instances", "at most 1,000"]),
    "serve workers 100000": (["serve", "--workers", "100000"], {}, 2, ["--workers", "at most"]),
    "serve threads 1e6": (["serve", "--threads", "1000000"], {}, 2, ["--threads", "at most 1,000"]),
    "serve time scale 1e300": (["serve", "--instances", "2", "--time-scale", "1e300"], {}, 2, ["--time-scale"]),
    "serve workers from the environment": (["serve"], {"SAGEMAKER_MODEL_SERVER_WORKERS": "100000"}, 2,
                                           ["--workers must be at most"]),
    "run processes 100000": (["run", *LOCAL, "--processes", "100000", "-u", "2"], {}, 2,
                             ["--processes", "at most"]),  # names --processes, not --users
    "run time scale 1e300": (["run", *LOCAL, "--traffic", "traffic.yaml", "--time-scale", "1e300"], {}, 2,
                             ["--time-scale", "at most 1,000"]),
    "env time scale 5000": (["run", *LOCAL, "--traffic", "traffic.yaml"], {"SM_LOCUST_TIME_SCALE": "5000"}, 2,
                            ["SM_LOCUST_TIME_SCALE", "at most 1,000"]),
    "run prompts synthetic 1e6": (["run", *LOCAL[:-2], "--prompts", "synthetic:1000000"], {}, 2,
                                  ["--prompts synthetic:1000000", "at most 131,072 tokens"]),
    "run IR stairs 1e8 steps": (["run", *LOCAL, "--shape", "phases", "--traffic-pattern", "stairs.json"], {}, 2,
                                ["NumberOfSteps is 100,000,000", "at most 18,000"]),
    # -- round 4: one bounded YAML reader --------------------------------------------------------
    "run traffic alias bomb": (["run", *LOCAL, "--traffic", "bomb.yaml"], {}, 2,
                               ["--traffic 'bomb.yaml'", "more than 100,000 values"]),
    "sweep alias bomb": (["sweep", "bomb_sweep.yaml", "--plan"], {}, 2,
                         ["bomb_sweep.yaml", "more than 100,000 values"]),
    "sweep binary file": (["sweep", "blob.bin", "--plan"], {}, 2, ["sweep file blob.bin", "not UTF-8 text"]),
    "sweep fifo file": (["sweep", "fifo.yaml", "--plan"], {}, 2, ["fifo.yaml", "not a regular file"]),
    "sweep set alias bomb is text": (["sweep", "sweep.yaml", "--plan", "--set", "load.users=&a [*a]"], {}, 2,
                                     ["load.users"]),
    # -- round 4: traffic mixes follow the single-target rules (issue 32 item 4) -----------------
    "mix weights overflow": (["run", *LOCAL, "--target-models", "a=1e308,b=1e308"], {}, 2,
                             ["--target-models", "sum past the largest number"]),
    "env mix weights overflow": (["run", *LOCAL], {"SM_LOCUST_TARGET_MODELS": "a=1e308,b=1e308"}, 2,
                                 ["--target-models", "sum past the largest number"]),
    "mix fifo csv": (["run", *LOCAL, "--target-models", "fifo.csv"], {}, 2, ["'fifo.csv' is not a regular file"]),
    "mix non-ascii name": (["run", *LOCAL, "--target-models", "modèle.tar.gz"], {}, 2,
                           ["--target-models", "'modèle.tar.gz'", "TargetModel takes printable ASCII"]),
    "mix component a.b": (["run", *LOCAL, "--inference-components", "a.b=1,c=1"], {}, 2,
                          ["--inference-components", "'a.b'", "InferenceComponentName"]),
    "mix 2000-character name": (["run", *LOCAL, "--target-models", "m" * 2000], {}, 2,
                                ["--target-models", "2000 characters; TargetModel takes at most 1024"]),
    "compare target rps -5": (["compare", "run", "--target-rps=-5"], {}, 2, ["--target-rps", "more than 0"]),
    # -- round 4's own probe (bench/probe_round4.py): what it found --------------------------------
    "run users 1e9": (["run", *LOCAL, "-u", "1000000000"], {}, 2, ["--users", "at most 100,000"]),
    "run step max users 1e9": (["run", *LOCAL, "--shape", "step", "--max-users", "1000000000"], {}, 2,
                               ["--max-users", "at most 100,000"]),
    "run open loop 1e308 rps": (["run", *LOCAL, "--shape", "open", "--target-rps", "1e308"], {}, 2,
                                ["--target-rps 1e+308 req/s", "open-loop users; at most 100,000"]),
    "run open loop 1e-300 rps per user": (["run", *LOCAL, "--shape", "open", "--target-rps", "5", "--rate-per-user",
                                           "1e-300"], {}, 2, ["--rate-per-user 1e-300", "at most 100,000"]),
    "demo max users 1e9": (["demo", "--max-users", "1000000000"], {}, 2, ["--max-users", "at most 100,000"]),
    "report summary nested 100,000 deep": (["report", "deep_summary", "--no-cloudwatch"], {}, 2,
                                           ["deep_summary", "nested too deeply"]),
    "smoke summary nested 100,000 deep": (["smoke", "--run-dir", "deep_summary"], {}, 2, ["nested too deeply"]),
    "report prices a fifo": (["report", "run", "--no-cloudwatch", "--prices", "fifo"], {}, 2,
                             ["price file fifo", "not a regular file"]),
    "run out a symlink loop": (["run", *LOCAL, "--out", "loop"], {}, 2, ["--out loop", "symbolic links"]),
    "report out a symlink loop": (["report", "run", "--no-cloudwatch", "--out", "loop"], {}, 2, ["--out loop"]),
    "sweep out a symlink loop": (["sweep", "sweep.yaml", "--out", "loop"], {}, 2, ["--out loop"]),
    "run out 300 characters": (["run", *LOCAL, "--out", "x" * 300], {}, 2, ["--out", "File name too long"]),
    "report run dir 300 characters": (["report", "r" * 300, "--no-cloudwatch"], {}, 2, ["File name too long"]),
    "run payload 300 characters": (["run", *LOCAL[:-1], "p" * 300], {}, 2, ["File name too long"]),
    "smoke junit a fifo": (["smoke", "--run-dir", "run", "--junit", "fifo"], {}, 2,
                           ["--junit fifo is not a regular file"]),
    "run locust.conf not UTF-8": (["run", *LOCAL], {"LOCUST_CONFIG": "blob.bin"}, 2,
                                  ["Locust config file blob.bin", "not UTF-8 text"]),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_bad_input_is_one_line_and_leaves_nothing(case, scene, monkeypatch, capsys, refused_url):
    argv, env, code, needles = CASES[case]
    argv = [a.format(port=refused_url.rsplit(":", 1)[1]) for a in argv]
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    before, before_children = snapshot(scene), children()
    try:
        exit_code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        exit_code = exc.code
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert exit_code == code, err + out
    assert len(lines) == 1, err
    assert lines[0].startswith("sm-locust") and ": error: " in lines[0], lines[0]
    assert "Traceback" not in out + err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert snapshot(scene) == before  # no half folder, nothing rewritten
    assert children() <= before_children
    assert not (scene / "pwned").exists()


def test_the_table_covers_every_command():
    from sm_locust.cli import COMMANDS

    assert len(CASES) >= 40
    assert {argv[0] for argv, *_ in CASES.values()} == set(COMMANDS)


# -- plain Locust: quits at once, exit 2, one line --------------------------------------------

PLAIN = {
    "missing payload": (["--endpoint-name", "ep", "--payload", "nope.json"], ["nope.json"]),
    "no endpoint name": (["--payload", PAYLOAD], ["--endpoint-name"]),
    "unknown serializer": (["--endpoint-name", "ep", "--payload", PAYLOAD, "--serializer", "jsn"], ["jsn"]),
    "bad url": (["--endpoint-name", "ep", "--payload", PAYLOAD, "--endpoint-url", "ftp://x"], ["--endpoint-url"]),
    "sm-out is a file": (["--endpoint-name", "ep", "--payload", PAYLOAD, "--sm-out", "/proc/version"],
                         ["--sm-out /proc/version", "a file is in the way"]),
    "mix weights overflow": (["--endpoint-name", "ep", "--payload", PAYLOAD, "--target-models", "a=1e308,b=1e308"],
                             ["--target-models", "sum past the largest number"]),
}


@pytest.mark.e2e
def test_plain_locust_with_bad_settings_quits_at_once_with_exit_2(tmp_path):
    """Each case used to stay up with 0 users until -t ended (or forever); they run side by side. -t is an
    hour: a case that waited for it would still run when communicate() gives up, instead of exiting 2."""
    plain_http = subprocess.Popen(  # and, beside them, a good run whose signed requests would go over plain http
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "sagemaker.py"), "--headless", "-t", "1s",
         "-u", "1", "--endpoint-name", "ep", "--payload", PAYLOAD, "--endpoint-url", "http://192.0.2.1:9",
         "--connect-timeout", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    procs = {}
    for case, (args, _) in PLAIN.items():
        cwd = tmp_path / case.replace(" ", "_")
        cwd.mkdir()
        procs[case] = (cwd, subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "sagemaker.py"), "--headless", "-t",
             "1h", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd))
    for case, (cwd, proc) in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 2, (case, stderr[-2000:])
        ours = [line for line in stderr.splitlines() if line.startswith("sm-locust")]
        assert len(ours) == 1 and ours[0].startswith("sm-locust: error: "), (case, stderr)
        assert "Traceback" not in stderr + stdout
        for needle in PLAIN[case][1]:
            assert needle in ours[0], (case, ours[0])
        assert list(cwd.iterdir()) == []
    _, stderr = plain_http.communicate(timeout=60)
    warnings = [line for line in stderr.splitlines() if line.startswith("sm-locust: warning:")]
    expected = ("sm-locust: warning: --endpoint-url http://192.0.2.1:9 is plain http to another machine: the signed "
                "requests and any session token travel unencrypted; use https:// (or a loopback "
                "address for a local endpoint)")
    assert warnings == [expected], stderr[-2000:]


def test_plain_http_is_warned_only_off_this_machine():
    from sm_locust.config.preflight import plain_http_warning

    for url in ("http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:8080", "https://10.0.0.5", "", None):
        assert plain_http_warning(url) is None, url
    assert "plain http" in plain_http_warning("http://10.0.0.5:8080")
    assert "plain http" in plain_http_warning("HTTP://runtime.example.com")


@pytest.mark.e2e
def test_locust_rejecting_an_argument_leaves_no_run_folder(endpoint, tmp_path):
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "sm_locust", "run", "--endpoint-name", "ep", "--endpoint-url",
                             endpoint.url, "--payload", PAYLOAD, "--out", str(out), "-q", "--", "--bogus-locust-flag"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["sm-locust: error: Locust rejected the run: locust: error: unrecognized arguments: "
                     "--bogus-locust-flag"]
    assert not out.exists()


# -- .pkl invoke args: plain data only --------------------------------------------------------

def test_the_serverless_toolkits_pickle_is_read(tmp_path):
    """convert_invoke_args_to_pkl: pickle.dump(list of invoke-args dicts), binary bodies as bytes."""
    args = [{"Body": b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "ContentType": "image/png"},
            {"Body": "1,2,3,4,5", "ContentType": "text/csv", "Weight": 3},
            {"Body": b"raw", "ContentType": "application/octet-stream", "CustomAttributes": "a=b"}]
    path = tmp_path / "invoke_args_examples.pkl"
    path.write_bytes(pickle.dumps(args))
    pool = load_payloads(path)
    assert [(i.body, i.content_type) for i in pool.invocations] == [
        (args[0]["Body"], "image/png"), (b"1,2,3,4,5", "text/csv"), (b"raw", "application/octet-stream")]
    assert pool.invocations[2].custom_attributes == "a=b"
    assert pool.selection == "weighted"
    plain = {"a": [1, 2.5, None, True, "text"], "b": (b"x", frozenset({1}), {2}), "c": bytearray(b"y")}
    assert loads_plain(pickle.dumps(plain, protocol=5)) == plain  # protocol 5: bytearray without a global


def _hostile_pickles(marker: Path) -> dict[str, bytes]:
    command = f"touch {marker}".encode()
    return {
        "reduce os.system": pickle.dumps(Evil(marker)),
        "protocol 0 GLOBAL + REDUCE": b"cos\nsystem\n(V" + command + b"\ntR.",
        "INST opcode": b"(S'" + command + b"'\nios\nsystem\n.",
        "builtins eval": b"cbuiltins\neval\n(V__import__('os').system('" + command + b"')\ntR.",
        "inside an invoke-args dict": pickle.dumps([{"Body": b"x", "Weight": Evil(marker)}]),
        "persistent id": b"P0\n.",
    }


def test_a_malicious_pickle_is_refused_before_anything_is_called(tmp_path):
    marker = tmp_path / "pwned"
    for name, data in _hostile_pickles(marker).items():
        pickletools.dis(data, out=io.StringIO())  # well-formed pickles: the refusal is ours
        path = tmp_path / f"{name.replace(' ', '_')}.pkl"
        path.write_bytes(data)
        with pytest.raises(UsageError, match="not a plain-data pickle") as info:
            load_payloads(path)
        assert "JSONL" in str(info.value), name
        assert not marker.exists(), name


def test_a_pickle_that_is_not_invoke_args_is_one_line(tmp_path):
    for data, needle in ((pickle.dumps(42), "holds int"), (pickle.dumps([]), "an empty list"),
                         (pickle.dumps([{"Bdy": b"x"}]), "unknown key 'Bdy'"), (b"not a pickle", "plain-data pickle")):
        path = tmp_path / "args.pkl"
        path.write_bytes(data)
        with pytest.raises(UsageError, match=needle):
            load_payloads(path)


# -- the history CSV --------------------------------------------------------------------------

def test_a_few_malformed_history_rows_are_dropped_and_counted(tmp_path):
    rows = [history_row(1000 + i) for i in range(100)]
    rows[40] = rows[40].replace(",2,,", ",2,")  # shifted: one field short
    text = "\n".join([HISTORY_HEADER, *rows]) + "\n"
    gaps: list[str] = []
    kept = drop_malformed_rows(text, tmp_path / "locust_stats_history.csv", "Locust history", gaps)
    assert kept.count("\n") == 100 and "\n1040,2," not in kept
    assert gaps == ["Locust history: dropped 1 malformed row(s) of 100 in locust_stats_history.csv (line 42)"]
    clean = "\n".join([HISTORY_HEADER, *(history_row(1000 + i) for i in range(3))]) + "\n"
    assert drop_malformed_rows(clean, tmp_path / "h.csv", "h", gaps) == clean and len(gaps) == 1


# -- stopped by scripts, killed outright (issue 23 items 1, 2, 11) ------------------------------
# Each command is started the way scripts start it: a background job of a non-interactive shell
# (`bash -c 'sm-locust ... & wait'`), which starts it with SIGINT ignored, and its children with it.

RUN_ARGS = ["--endpoint-name", "ep", "--endpoint-url", "{url}", "--payload", PAYLOAD, "-u", "2", "-t", "1h",
            "--out", "{out}"]
SCRIPTED: dict[str, tuple[list[str], str | None]] = {  # argv, the file that says the test is under way
    "run": (["run", *RUN_ARGS, "-q"], "summary.json"),
    "smoke": (["smoke", *RUN_ARGS, "--max-p95-ms", "1000"], "summary.json"),
    "demo": (["demo", "--out", "{out}", "--no-cloudwatch", "--step-seconds", "30", "--max-users", "3"], "summary.json"),
    "serve": (["serve", "--port", "{port}"], None),
    "sweep": (["sweep", "{sweep}", "--out", "{out}"], "*/summary.json"),  # a configuration's run under way
}
LONG_SWEEP = ("name: long\nendpoint: {{service_time_ms: 5}}\ngrid: {{max_concurrency: [1, 2]}}\n"
              "load: {{payload: {payload}, users: 2, run_time: 1h}}\nobjective: {{target_rps: 10, slo_ms: 100}}\n")


class ScriptedCommand:
    """`bash -c 'sm-locust ARGS >out 2>err & echo $! >pid; wait $!; echo $? >rc'` in `folder`."""

    def __init__(self, argv: list[str], folder: Path):
        self.folder = folder
        command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "sm_locust", *argv])
        script = f"{command} >stdout 2>stderr & echo $! >pid; wait $!; echo $? >rc"
        self.shell = subprocess.Popen(["bash", "-c", script], cwd=folder, start_new_session=True)
        self.pid = 0

    def wait_until(self, ready, timeout: float = 60.0) -> list[psutil.Process]:
        """Wait until `ready()`; return the command and every process it started."""
        deadline = time.monotonic() + timeout
        while not ((self.folder / "pid").is_file() and (self.folder / "pid").read_text().strip() and ready()):
            assert self.shell.poll() is None, self.output()
            assert time.monotonic() < deadline, f"not ready after {timeout} s: {self.output()}"
            time.sleep(0.1)
        self.pid = int((self.folder / "pid").read_text())
        command = psutil.Process(self.pid)
        return [command, *command.children(recursive=True)]

    def exit_code(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while not (self.folder / "rc").is_file() or not (self.folder / "rc").read_text().strip():
            if time.monotonic() > deadline:
                return None
            time.sleep(0.1)
        return int((self.folder / "rc").read_text())

    def output(self) -> str:
        files = [self.folder / name for name in ("stdout", "stderr")]
        return "".join(path.read_text() for path in files if path.is_file())

    def stderr_lines(self) -> list[str]:
        return [line for line in (self.folder / "stderr").read_text().splitlines() if line.strip()]

    def close(self) -> None:
        if self.shell.poll() is None:
            os.killpg(self.shell.pid, signal.SIGKILL)
            self.shell.wait(10)


def assert_gone(processes: list[psutil.Process], timeout: float) -> None:
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    for process in alive:
        process.kill()
    assert not alive, [p.pid for p in alive]


def _ready(name: str, folder: Path, marker: str | None, port: int):
    if marker is None:
        return lambda: _answers(port)
    return lambda: any((folder / "out").glob(marker))


def _argv(argv: list[str], endpoint, tmp_path: Path, port: int) -> list[str]:
    sweep = tmp_path / "long.yaml"
    sweep.write_text(LONG_SWEEP.format(payload=PAYLOAD))
    return [a.format(url=endpoint.url, out=tmp_path / "out", port=port, sweep=sweep) for a in argv]


def _answers(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.e2e
@pytest.mark.parametrize("name", list(SCRIPTED), ids=list(SCRIPTED))
def test_sigterm_to_a_command_started_from_a_script_stops_it_now(name, endpoint, tmp_path):
    """Was: Locust ignored the forwarded SIGINT and ran on until -t (an hour here: a command that waited
    for it would not have exited when `exit_code` gives up); `serve` exited 0."""
    argv, marker = SCRIPTED[name]
    port = free_port()
    command = ScriptedCommand(_argv(argv, endpoint, tmp_path, port), tmp_path)
    try:
        processes = command.wait_until(_ready(name, tmp_path, marker, port))
        time.sleep(1.0)  # under way: a second of load
        os.kill(command.pid, signal.SIGTERM)
        code = command.exit_code(timeout=90)
        assert code == 143, (code, command.output())
        assert_gone(processes, timeout=60)
        assert "Traceback" not in command.output()
        assert "SIGTERM" in command.output(), command.output()
        if marker:
            summary = json.loads(next((tmp_path / "out").glob(marker)).read_text())
            assert summary["complete"] is True and summary["totals"]["requests"] > 0
    finally:
        command.close()


@pytest.mark.e2e
@pytest.mark.parametrize("name", ["run", "demo", "sweep"])
def test_sigkill_to_a_command_leaves_nothing_running(name, endpoint, tmp_path):
    """Was: Locust went on loading the endpoint until -t, and a demo's or a local sweep's endpoint stayed
    up (and `sweep --cleanup ID` did not find it)."""
    argv, marker = SCRIPTED[name]
    command = ScriptedCommand(_argv(argv, endpoint, tmp_path, 0), tmp_path)
    try:
        processes = command.wait_until(_ready(name, tmp_path, marker, 0))
        assert len(processes) >= (2 if name == "run" else 3), processes  # sm-locust, Locust (and the endpoint)
        time.sleep(1.0)
        os.kill(command.pid, signal.SIGKILL)
        assert_gone(processes, timeout=60)  # the lifeline: seconds; a busy machine: more
        if name == "run":  # Locust stopped as on Ctrl+C: the endpoint is left alone, the results are whole
            served = endpoint.stats()["requests"]
            time.sleep(0.5)
            assert endpoint.stats()["requests"] == served
            summary = json.loads((tmp_path / "out" / "summary.json").read_text())
            assert summary["complete"] is True and summary["totals"]["requests"] > 0
            assert "is gone; stopping" in (tmp_path / "out" / "locust.log").read_text()
    finally:
        command.close()


@pytest.mark.e2e
def test_a_second_sweep_into_a_running_sweeps_folder_is_refused(endpoint, tmp_path):
    """Was: both wrote the folder. And --cleanup of a local sweep stops its endpoints."""
    argv, marker = SCRIPTED["sweep"]
    first = ScriptedCommand(_argv(argv, endpoint, tmp_path, 0), tmp_path)
    try:
        first.wait_until(_ready("sweep", tmp_path, marker, 0))
        second = run_cli("sweep", str(tmp_path / "long.yaml"), "--out", str(tmp_path / "out"))
        assert_one_line_error(second, 2, f"--out {tmp_path / 'out'}", "being written by another sm-locust run")
        os.kill(first.pid, signal.SIGTERM)
        assert first.exit_code(timeout=60) == 143
    finally:
        first.close()


@pytest.mark.e2e
def test_sweep_cleanup_stops_a_local_sweeps_endpoint_left_running(tmp_path, monkeypatch):
    """An endpoint of sweep `long` that is still up (its lifeline has a live parent: this test) is found by
    its tag and stopped; nothing else is touched."""
    from sm_locust.endpoint.server import LocalEndpoint
    from sm_locust.sweep.deployers.local import SWEEP_ENV

    monkeypatch.chdir(tmp_path)
    (tmp_path / "long.yaml").write_text(LONG_SWEEP.format(payload=PAYLOAD))
    tagged = LocalEndpoint(env={SWEEP_ENV: "long"}).start()
    other = LocalEndpoint(env={SWEEP_ENV: "another"}).start()
    try:
        result = run_cli("sweep", "long.yaml", "--cleanup", "long", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"deleted 1 (local endpoint pid {tagged.process.pid})" in result.stdout
        assert tagged.process.wait(10) is not None and other.ping()
        again = run_cli("sweep", "--cleanup", "long", cwd=tmp_path)  # no file, no folder: local, then SageMaker
        assert "stopping local endpoint" not in again.stdout
    finally:
        tagged.stop()
        other.stop()


# -- honest totals (issue 23 item 9) -------------------------------------------------------------

@pytest.mark.e2e
def test_requests_in_flight_at_the_stop_are_reported_and_nothing_completed_exits_1(endpoint_factory, tmp_path):
    """Was: "0 requests, 0 failures", exit 0, for a run whose every request was still waiting."""
    slow = endpoint_factory(latency_ms=8000)
    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", slow.url, "--payload", PAYLOAD, "-u", "3",
                     "-r", "30", "-t", "2s", "--out", str(out), "-q")
    assert_one_line_error(result, 1, "no request completed: 3 were in flight at the stop")
    assert "0 requests" in result.stdout and "3 requests in flight at the stop" in result.stdout
    totals = json.loads((out / "summary.json").read_text())["totals"]
    assert (totals["requests"], totals["in_flight_at_stop"]) == (0, 3)


@pytest.mark.e2e
def test_locusts_csvs_hold_the_final_totals_of_summary_json(endpoint_factory, tmp_path):
    """Was: locust_stats.csv lagged the final totals by 2-3 % (Locust's writer stops before its last write)."""
    ep = endpoint_factory(throttle_ratio=0.3, seed=1)
    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", PAYLOAD, "-u", "4",
                     "-r", "40", "-t", "3s", "--out", str(out), "-q")
    assert result.returncode == 0, result.stderr
    totals = json.loads((out / "summary.json").read_text())["totals"]
    with open(out / "locust_stats.csv", newline="") as fh:
        aggregated = next(row for row in csv.DictReader(fh) if row["Name"] == "Aggregated")
    with open(out / "locust_failures.csv", newline="") as fh:
        failures = sum(int(row["Occurrences"]) for row in csv.DictReader(fh))
    assert totals["requests"] > 100 and totals["failures"] > 0
    assert int(aggregated["Request Count"]) == totals["requests"]
    assert int(aggregated["Failure Count"]) == totals["failures"] == failures


# -- output places: full, read-only, in use (issue 23 item 4) -------------------------------------

@pytest.fixture
def mount(tmp_path):
    """mount(name, size, read_only=False, copy=None): a tmpfs of `size` under tmp_path (root only; else
    the test is skipped), holding `copy` (a folder) when given; unmounted after the test."""
    mounted: list[Path] = []

    def make(name: str, size: str, read_only: bool = False, copy: Path | None = None, fill: int = 0) -> Path:
        target = tmp_path / name
        if not mount_tmpfs(target, size, read_only=read_only, fill=fill, copy=copy):
            pytest.skip("mounting a tmpfs needs root")
        mounted.append(target)
        return target

    yield make
    for target in reversed(mounted):
        unmount(target)


FULL_CASES = {  # argv (FULL = a file system with 100 KB free), the needles of the one line
    "run --out": (["run", *LOCAL, "--out", "{full}/run"], ["--out", "file system is full"]),
    "demo --out": (["demo", "--out", "{full}/demo"], ["--out", "file system is full"]),
    "report --out": (["report", "run", "--no-cloudwatch", "--out", "{full}/report"], ["--out", "file system is full"]),
    "compare --out": (["compare", "run", "--out", "{full}/cmp"], ["--out", "file system is full"]),
    "smoke --junit": (["smoke", "--run-dir", "run", "--junit", "{full}/j.xml"], ["--junit", "file system is full"]),
    "smoke --out": (["smoke", *LOCAL, "--out", "{full}/smoke"], ["--out", "file system is full"]),
}


@pytest.mark.e2e
@pytest.mark.parametrize("case", list(FULL_CASES), ids=list(FULL_CASES))
def test_a_full_file_system_is_refused_before_anything_runs(case, scene, mount, capsys):
    """Was: a traceback, for --junit after the whole test had run."""
    full = mount("full", "1m", fill=900_000)
    argv, needles = FULL_CASES[case]
    argv = [a.format(port=free_port(), full=full) for a in argv]
    before = snapshot(scene)
    code = main(argv)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, lines
    assert all(needle in lines[0] for needle in needles), lines[0]
    assert snapshot(scene) == before and sorted(p.name for p in full.iterdir()) == ["filler"]


@pytest.mark.e2e
def test_a_report_next_to_a_read_only_run_is_refused_before_it_reads(scene, mount, capsys):
    read_only = mount("ro", "4m", read_only=True, copy=scene / "run")
    assert main(["report", str(read_only / "run"), "--no-cloudwatch"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"sm-locust: error: RUN_DIR {read_only / 'run'}: the folder is not writable (a read-only file "
                   "system); pass --out DIR to write the report elsewhere")


@pytest.mark.e2e
def test_a_disk_that_fills_up_mid_way_is_one_line(scene, mount):
    """The checks passed (1.4 MB free), then report.html (~4 MB with plotly inline) filled the disk."""
    small = mount("small", "1500k")
    result = run_cli("report", "run", "--no-cloudwatch", "--out", str(small / "report"), cwd=scene)
    assert_one_line_error(result, 1, "No space left on device", "free some space")


@pytest.mark.e2e
def test_two_runs_into_one_folder_at_once_the_second_is_refused(endpoint, tmp_path):
    """Was: both claimed it. The second is refused in one line, with or without --overwrite, and the
    first run's files are untouched; a report of the folder meanwhile says it is in progress."""
    out = tmp_path / "run"
    first = ScriptedCommand(["run", *[a.format(url=endpoint.url, out=out) for a in RUN_ARGS], "-q"], tmp_path)
    try:
        first.wait_until(lambda: (out / "summary.json").is_file())
        options = (out / "options.json").read_bytes()
        for extra in ([], ["--overwrite"]):
            second = run_cli("run", *[a.format(url=endpoint.url, out=out) for a in RUN_ARGS], "-q", *extra)
            assert_one_line_error(second, 2, f"--out {out}", "being written by another sm-locust run")
        report = run_cli("report", str(out), "--no-cloudwatch")
        assert_one_line_error(report, 2, "being written by a run in progress")
        assert (out / "options.json").read_bytes() == options and (out / "summary.json").is_file()
        os.kill(first.pid, signal.SIGTERM)
        assert first.exit_code(timeout=30) == 143
        again = run_cli("run", *[a.format(url=endpoint.url, out=out) for a in RUN_ARGS], "-q")
        assert_one_line_error(again, 2, "already holds a run", "--overwrite")  # ended: an ordinary earlier run
    finally:
        first.close()


def test_the_folder_lock_is_held_once_per_run_and_released():
    import threading

    from sm_locust.util.outputs import locked_folder, run_in_progress

    folder = Path(tempfile.mkdtemp())
    refused: list[str] = []

    def other_run() -> None:
        try:
            with locked_folder(folder):
                pass
        except UsageError as exc:
            refused.append(exc.message)

    with locked_folder(folder):
        with locked_folder(folder):  # the same run, again (start_run, then execute): not refused
            pass
        worker = threading.Thread(target=other_run)
        worker.start()
        worker.join()
        assert not run_in_progress(folder)  # this process's own run does not count
    assert len(refused) == 1 and "being written by another sm-locust run" in refused[0]
    other_run()
    assert len(refused) == 1  # released
    shutil.rmtree(folder)


# -- one region rule for every command (issue 23 item 8) ----------------------------------------

def test_the_region_rule_flag_then_aws_region_then_aws_default_region_then_the_profile(tmp_path, monkeypatch):
    from sm_locust.aws.region import region_source

    config = tmp_path / "aws_config"
    config.write_text("[default]\nregion = ap-south-1\n[profile other]\nregion = sa-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    both = {"AWS_REGION": "eu-west-3", "AWS_DEFAULT_REGION": "us-west-2"}
    assert region_source("ca-central-1", environ=both) == ("ca-central-1", "--region")
    assert region_source(None, environ=both) == ("eu-west-3", "AWS_REGION")
    assert region_source(None, environ={"AWS_DEFAULT_REGION": "us-west-2"}) == ("us-west-2", "AWS_DEFAULT_REGION")
    assert region_source(None, environ={}) == ("ap-south-1", "profile default")
    assert region_source(None, "other", environ={}) == ("sa-east-1", "profile other")
    with pytest.raises(UsageError, match="'nobody' not found"):
        region_source(None, "nobody", environ={})


@pytest.mark.parametrize("make", ["cloudwatch", "s3", "runtime", "autoscaling"])
def test_aws_region_alone_reaches_every_client(make, monkeypatch):
    """Was: report --cloudwatch and sweep --cleanup said "set AWS_REGION", then ignored it (botocore
    reads only AWS_DEFAULT_REGION and the profile)."""
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    if make == "cloudwatch":
        from sm_locust.report.cloudwatch import make_client

        region = make_client().meta.region_name
    elif make == "s3":
        from sm_locust.aws.s3 import s3_client

        region = s3_client(None, None).meta.region_name
    elif make == "autoscaling":
        from sm_locust.scaling.aws import clients

        region = clients()[1].meta.region_name
    else:
        from sm_locust.config.endpoint import SageMakerSettings
        from sm_locust.config.preflight import aws_environment

        extra = aws_environment(SageMakerSettings(endpoint_name="ep", payload=PAYLOAD))
        region = extra["AWS_DEFAULT_REGION"] if extra["AWS_REGION"] == extra["AWS_DEFAULT_REGION"] else "differs"
    assert region == "eu-west-3"


# -- messages (issue 23 item 10) --------------------------------------------------------------------

def test_a_serverless_sweep_without_its_stability_test_is_priced_from_the_lightest_concurrency_phase():
    """Was: "no configuration meets the objective" (no warm latency, no cost). Synthetic: x0.5 = 1 user at
    60 ms for 5 s, then x1 = 2 users with throttles; the lightest phase's successes stand in."""
    from sm_locust.measure.timeline import Second
    from sm_locust.sweep.serverless.measure import Phase, load_figures

    def second(t: float, users: int, hist: dict[int, int], failures: int = 0) -> Second:
        return Second(t=t, users=users, spawning=False, requests=sum(hist.values()), failures=failures, hist=hist)

    seconds = [second(101 + k, 1, {60: 10}) for k in range(5)]
    seconds += [second(106 + k, 2, {12: 5, 70: 15}, failures=5) for k in range(5)]
    phases = [Phase("concurrency", 1, 5, 0.5), Phase("concurrency", 2, 5, 1.0)]
    figures = load_figures(seconds, phases, {"failures": 25, "errors": {"ThrottlingException": 25}})
    stand_in = figures.stability
    assert stand_in is not None and stand_in.source == "concurrency x0.5"
    assert (stand_in.warm_p95_ms, stand_in.warm_mean_ms) == (60.0, 60.0)  # what serverless bills
    assert figures.stability_window == (100.0, 105.0)


# -- round 4 (issue 32): hostile endpoint text, a live sweep's cleanup, a disk that fills mid-run --------

HOSTILE = ("boom \x1b]0;pwned-title\x07 \x1b[2J\x1b[H \x1b]52;c;ZXZpbA==\x07 \u202eevil \x9b31m")


@pytest.mark.e2e
def test_an_endpoints_escape_sequences_never_reach_the_terminal(tmp_path):
    """Was: a ModelError message with OSC 0 (title), CSI 2J (clear screen) and OSC 52 (clipboard) printed raw
    in `sm-locust run`'s closing line. The endpoint here answers every request with that message."""
    from tests.fakes import ACCESS_KEY, SECRET_KEY, FakeRuntime, json_error

    with FakeRuntime() as server:
        server.routes["ep"] = lambda environ, body: json_error(424, "ModelError", HOSTILE, OriginalStatusCode=500,
                                                               OriginalMessage=HOSTILE)
        result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", server.url, "--payload", PAYLOAD, "-u", "2",
                         "-t", "2s", "--out", str(tmp_path / "run"),
                         env={"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY})
    assert server.hits  # the requests reached it
    terminal = result.stdout + result.stderr  # not -q: Locust's tables, with their failure rows, are echoed too
    assert result.returncode == 1 and "every request failed" in result.stderr, terminal[-2000:]
    for byte in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert byte not in terminal
    assert "\\x1b]0;pwned-title\\x07" in result.stderr  # shown, made inert
    for name in ("locust_failures.csv", "summary.json", "locust.log"):
        assert "\x1b" not in (tmp_path / "run" / name).read_text(), name


@pytest.mark.e2e
def test_cleanup_refuses_a_sweep_that_is_running_and_stops_nothing(endpoint, tmp_path):
    """Was: `sweep --cleanup ID` killed the live sweep's endpoint (exit 0); the sweep then measured that
    configuration as failing and recommended from it. With or without --out, it is refused now."""
    argv, marker = SCRIPTED["sweep"]
    sweep = ScriptedCommand(_argv(argv, endpoint, tmp_path, 0), tmp_path)
    try:
        processes = sweep.wait_until(_ready("sweep", tmp_path, marker, 0))
        assert len(processes) >= 3, processes  # the sweep, its endpoint (and its workers), Locust
        elsewhere = tmp_path / "cwd"
        elsewhere.mkdir()
        for extra in ([], ["--out", str(tmp_path / "out")]):  # the default folder is not where it runs; --out is
            refused = run_cli("sweep", "--cleanup", "long", *extra, cwd=elsewhere)
            assert_one_line_error(refused, 2, "--cleanup long: that sweep is running right now", "nothing was stopped")
        assert all(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in processes)
        os.kill(sweep.pid, signal.SIGTERM)
        assert sweep.exit_code(timeout=60) == 143
    finally:
        sweep.close()
    assert_gone(processes, timeout=15)


@pytest.mark.e2e
def test_a_disk_that_fills_mid_run_leaves_no_half_written_file(endpoint, mount, tmp_path):
    """Was: locust_report.html half-written. Every file of the run folder is whole (or absent): JSON parses,
    no temporary file is left, Locust's report is promoted only once complete."""
    disk = mount("disk", "2m")
    out = disk / "run"
    run = ScriptedCommand(["run", *[a.format(url=endpoint.url, out=out) for a in RUN_ARGS[:-4]], "-u", "2", "-t", "4s",
                           "-q", "--out", str(out)], tmp_path)
    try:
        run.wait_until(lambda: (out / "summary.json").is_file())
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        (disk / "filler").write_bytes(b"x" * max(0, free - 16_384))  # room for summary.json, not for the report
        code = run.exit_code(timeout=60)
    finally:
        run.close()
    assert code in (0, 1), run.output()
    names = sorted(p.name for p in out.iterdir())
    assert "locust_report.html" not in names and not [n for n in names if n.endswith(".partial")], names
    for path in out.glob("*.json"):
        json.loads(path.read_text())
    if code == 1:
        lines = run.stderr_lines()
        assert len(lines) == 1 and "No space left on device" in lines[0], lines
