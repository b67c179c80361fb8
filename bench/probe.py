"""The hardening probe: bad input and faults across every command, each judged "ends well".

Issue 23 asked for a fresh probe of the kind that found its items: ~150+ bad inputs and faults,
the way a new user types them and a CI script or container stops them. Each case runs
`python -m sm_locust ...` as a child process (or a shell that starts it in the background, for
signals) in a scene folder, and ends well when:

- its exit code is the one expected (2 bad input, 1 a run that failed, 128 + N a signal);
- stderr holds exactly one line, from sm-locust, naming the problem (the case's needles), and no
  traceback (a signal case: the line says the signal; a case that succeeds may print nothing);
- nothing it started is left running (20 s grace for a killed parent's children to notice);
- no folder was clobbered: the scene is unchanged except for the outputs the case may write;
- a case marked `bounded` (round 4, issue 32) ends within 10 s under a 3 GB address-space limit
  (RLIMIT_AS), and a case marked `inert` prints no terminal control (ESC, BEL, C1 CSI, a bidi override)
  on stdout or stderr.

    .venv/bin/python bench/probe.py               # all cases (~6 min on the 2-core box)
    .venv/bin/python bench/probe.py -k sweep      # the cases whose name contains "sweep"

It prints one line per case that did not end well, then the table (cases per command, ended well,
share). Needs root for the full and read-only file-system cases (a tmpfs mount); they are skipped
otherwise. Figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from sm_locust.testing.mounts import mount_tmpfs, unmount

BOUNDED_S = 10.0
BOUNDED_AS = 3 << 30
CONTROLS = ("\x1b", "\x07", "\x9b", "\x9d", "\u202e")
HOSTILE = "boom \x1b]0;pwned-title\x07 \x1b[2J\x1b[H \x1b]52;c;ZXZpbA==\x07 \u202eevil \x9b31m"
ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = str(ROOT / "sm_locust" / "data" / "ranking_10rows.json")
PY = sys.executable


@dataclass
class Case:
    name: str
    argv: list[str]
    code: int | tuple[int, ...]
    needles: tuple[str, ...] = ()
    env: dict[str, str | None] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()  # scene paths the case may create or change
    signal_after: str | None = None  # "TERM", "INT", "KILL": start in the background, signal once `ready` exists
    ready: str = ""  # a glob in the scene that says the command is under way
    timeout: float = 60.0
    needs_root: bool = False
    shell: str | None = None  # a whole shell line instead of argv (pipes, two commands at once)
    group: str = ""  # the command a shell case is about
    bounded: bool = False  # ends within BOUNDED_S under an address space of BOUNDED_AS bytes
    inert: bool = False  # stdout and stderr hold no terminal control

    @property
    def command(self) -> str:
        return self.group or self.argv[0]


def build_scene(work: Path) -> None:
    """The files and folders bad input points at."""
    (work / "afile").write_text("not a folder\n")
    (work / "blob.bin").write_bytes(os.urandom(4096))
    (work / "empty_dir").mkdir()
    run = work / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"schema": 1, "endpoint": "ep", "totals": {
        "requests": 100, "failures": 0, "rps": 10.0, "p50_ms": 5.0, "p95_ms": 9.0, "p99_ms": 12.0, "errors": {}},
        "steps": [], "plateau": None}))
    shapes = {"shape_totals": {"schema": 1, "totals": []},
              "shape_requests": {"schema": 1, "totals": {"requests": "many", "failures": 0, "rps": 1.0}},
              "shape_steps": {"schema": 1, "totals": {"requests": 1, "failures": 0, "rps": 1.0},
                              "steps": [{"users": 2, "rps": "fast"}]},
              "shape_plateau": {"schema": 1, "totals": {"requests": 1, "failures": 0, "rps": 1.0}, "steps": [],
                                "plateau": 5},
              "shape_time": {"schema": 1, "started_at": "yesterday", "totals": {"requests": 1, "failures": 0}}}
    for name, summary in shapes.items():
        (work / name).mkdir()
        (work / name / "summary.json").write_text(json.dumps(summary))
    (work / "not_json").mkdir()
    (work / "not_json" / "summary.json").write_text("{not json")
    (work / "evil.pkl").write_bytes(b"cos\nsystem\n(Vtouch pwned\ntR.")
    (work / "list.pkl").write_bytes(pickle.dumps(42))
    os.mkfifo(work / "fifo")
    with open(work / "seven_mb.json", "wb") as fh:
        fh.truncate(7_000_000)
    (work / "empty.json").write_bytes(b"")
    (work / "bad.jsonl").write_text('{"Body": "1"}\n{"Bdy": "2"}\n')
    (work / "crlf.jsonl").write_text(json.dumps({"Body": "1,2", "CustomAttributes": "a=b\r\nX-Evil: 1"}) + "\n")
    (work / "neg_prices.json").write_text('{"instances": {"ml.c5.xlarge": {"usd_per_hour": -0.2}}}')
    (work / "nan_prices.json").write_text('{"instances": {"ml.c5.xlarge": NaN}}')
    (work / "other_sweep").mkdir()
    (work / "other_sweep" / "sweep.json").write_text('{"sweep_id": "someone-else"}')
    sweep = ("name: probe\nendpoint: {service_time_ms: 10}\ngrid: {max_concurrency: [1, 2]}\n"
             f"load: {{payload: {PAYLOAD}, users: 2, run_time: 3s}}\nobjective: {{target_rps: 10, slo_ms: 100}}\n"
             "price_per_hour: 0.2\n")
    (work / "sweep.yaml").write_text(sweep)
    (work / "long.yaml").write_text(sweep.replace("run_time: 3s", "run_time: 60s").replace("name: probe", "name: long"))
    (work / "broken.yaml").write_text("name: [unclosed\n")
    (work / "sm.yaml").write_text(
        "name: smk\ndeploy: sagemaker\nendpoint: {model_name: my-model, instance_type: ml.c5.xlarge}\n"
        "grid: {environment.WORKERS: [1, 2]}\n"
        f"load: {{payload: {PAYLOAD}, users: 1, run_time: 2s}}\nobjective: {{target_rps: 10, slo_ms: 100}}\n")
    (work / "sls_grid.yaml").write_text("name: sg\nserverless: {memory_size_mb: [2048], max_concurrency: [2]}\n"
                                        f"grid: {{max_concurrency: [1, 2]}}\nload: {{payload: {PAYLOAD}}}\n")
    (work / "sls_mem.yaml").write_text("name: sm\nserverless: {memory_size_mb: [1500], max_concurrency: [2]}\n"
                                       f"load: {{payload: {PAYLOAD}}}\n")
    import numpy

    numpy.save(work / "wide.npy", numpy.ones((10, 1000)))
    # -- round 4 (issue 32) --
    laughs = ["l0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
    laughs += [f"l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * 9) + "]" for n in range(1, 9)]  # 9^9 values expanded
    (work / "bomb_traffic.yaml").write_text("".join(f"- {line}\n" for line in laughs))
    (work / "bomb_sweep.yaml").write_text("\n".join(laughs) + "\nname: bomb\nload: {users: *l8}\n")
    (work / "stairs.json").write_text(json.dumps({"TrafficType": "STAIRS", "Stairs": {
        "DurationInSeconds": 1, "NumberOfSteps": 100_000_000, "UsersPerStep": 1}}))
    (work / "traffic.yaml").write_text("[{duration_s: 10, rps: 5}, {duration_s: 10, rps: 10}]\n")
    (work / "huge_weights.csv").write_text("a,1e308\nb,1e308\n")
    (work / "excel.csv").write_text("name,weight\r\nmodel-0001.tar.gz,3\r\nmodel-0002.tar.gz,1\r\n",
                                    encoding="utf-8-sig")  # Excel's "CSV UTF-8"
    os.mkfifo(work / "mix_fifo.csv")
    (work / "sweep.bin").write_bytes(os.urandom(4096))


def cases(urls: dict[str, str], busy_port: int) -> list[Case]:
    up, slow, failing = urls["up"], urls["slow"], urls["failing"]
    local = ["--endpoint-name", "ep", "--endpoint-url", up, "--payload", PAYLOAD]
    run = ["run", *local, "-t", "2s", "-q"]
    table: list[Case] = []

    def add(name: str, argv: list[str], code: int | tuple[int, ...] = 2, *needles: str, **extra) -> None:
        table.append(Case(name, argv, code, needles, **extra))

    # -- serve -------------------------------------------------------------------------------
    for flag, value, needle in (("--port", "-5", "--port"), ("--port", "70000", "--port"), ("--port", "abc", "--port"),
                                ("--workers", "0", "--workers"), ("--workers", "1.5", "--workers"),
                                ("--threads", "0", "--threads"), ("--throttle-ratio", "2", "--throttle-ratio"),
                                ("--throttle-ratio", "nan", "--throttle-ratio"),
                                ("--error-ratio", "-0.1", "--error-ratio"),
                                ("--latency-ms", "inf", "--latency-ms"), ("--latency-ms", "-1", "--latency-ms"),
                                ("--service-time-ms", "nan", "--service-time-ms"),
                                ("--jitter-ms", "abc", "--jitter-ms"),
                                ("--max-concurrency", "-1", "--max-concurrency"),
                                ("--batch-item-cost", "3", "--batch-item-cost"),
                                ("--stream-error-ratio", "2", "--stream-error-ratio"),
                                ("--endpoint-name", "ep/1", "--endpoint-name"), ("--endpoint-name", "e" * 64, "63"),
                                ("--variant-name", "All Traffic", "--variant-name"),
                                ("--serverless-memory-mb", "1500", "1500"),
                                ("--serverless-max-concurrency", "0", "MaxConcurrency"),
                                ("--idle-timeout-s", "5", "--idle-timeout-s"), ("--metrics-interval", "0", "interval"),
                                ("--llm-format", "bogus", "--llm-format"), ("--seed", "x", "--seed")):
        add(f"serve {flag} {value}", ["serve", flag, value], 2, needle)
    add("serve --llm-max-sequences 0", ["serve", "--llm", "--llm-max-sequences", "0"], 2, "--llm-max-sequences")
    add("serve --llm-step-ms nan", ["serve", "--llm", "--llm-step-ms", "nan"], 2, "--llm-step-ms")
    add("serve port in use", ["serve", "--port", str(busy_port)], 1, "already in use")
    add("serve SIGTERM from a script", ["serve", "--port", "0"], 143, "SIGTERM", signal_after="TERM", ready="-")

    # -- run: options ------------------------------------------------------------------------
    add("run no endpoint", ["run", "--payload", PAYLOAD], 2, "--endpoint-name")
    add("run no payload", ["run", "--endpoint-name", "ep"], 2, "--payload")
    for name, extra, needle in (
            ("users 0", ["-u", "0"], "--users"), ("users nan", ["-u", "nan"], "--users"),
            ("users -1", ["-u", "-1"], "--users"),
            ("spawn rate 0", ["-r", "0"], "--spawn-rate"), ("spawn rate inf", ["-r", "inf"], "--spawn-rate"),
            ("run time abc", ["-t", "abc"], "--run-time"), ("think time nan", ["--think-time", "nan"], "--think-time"),
            ("think time -1", ["--think-time", "-1"], "--think-time"),
            ("connect timeout 0", ["--connect-timeout", "0"], "--connect-timeout"),
            ("read timeout inf", ["--read-timeout", "inf"], "--read-timeout"),
            ("processes 0", ["--processes", "0"], "--processes"),
            ("processes -5", ["--processes", "-5"], "--processes"),
            ("shape unknown", ["--shape", "stairz"], "stairz"),
            ("transport unknown", ["--transport", "pigeon"], "pigeon"),
            ("stop at knee maybe", ["--stop-at-knee", "maybe"], "--stop-at-knee"),
            ("max in flight 0", ["--shape", "open", "--target-rps", "5", "--max-in-flight", "0"], "--max-in-flight"),
            ("rate per user -1", ["--shape", "open", "--target-rps", "5", "--rate-per-user", "-1"], "--rate-per-user"),
            ("arrival unknown", ["--shape", "open", "--target-rps", "5", "--arrival", "zigzag"], "zigzag"),
            ("target rps nan", ["--target-rps", "nan"], "--target-rps"),
            ("batch size 0", ["--batch-size", "0"], "--batch-size"), ("split 0", ["--split", "0"], "--split"),
            ("payload seed -1", ["--payload-seed", "-1"], "--payload-seed"),
            ("unknown serializer", ["--serializer", "jsn"], "jsn"),
            ("unknown flag", ["--bogus-flag", "1"], "--bogus-flag"),
            ("endpoint name slash", ["--endpoint-name", "ep/x"], "'ep/x'"),
            ("endpoint name 64", ["--endpoint-name", "e" * 64], "at most 63"),
            ("endpoint name dot", ["--endpoint-name", "my.ep"], "'my.ep'"),
            ("custom attributes CRLF", ["--custom-attributes", "a=b\r\nX: 1"], "--custom-attributes"),
            ("target variant bad", ["--target-variant", "all_traffic"], "--target-variant"),
            ("inference id 65", ["--inference-id", "i" * 65], "--inference-id"),
            ("inference component bad", ["--inference-component", "ic-"], "--inference-component"),
            ("content type CRLF", ["--content-type", "a/b\r\nX: 1"], "--content-type"),
            ("upload not s3", ["--upload", "http://bucket/x"], "s3://")):
        add(f"run {name}", [*run, *extra], 2, needle)
    for name, source, needle in (("payload missing", "nope.json", "nope.json"), ("payload /dev/zero", "/dev/zero",
                                 "not a regular file"), ("payload fifo", "fifo", "not a regular file"),
                                 ("payload 7 MB", "seven_mb.json", "6 MB"), ("payload empty", "empty.json", "empty"),
                                 ("payload empty folder", "empty_dir", "no files"),
                                 ("malicious pickle", "evil.pkl", "plain-data pickle"),
                                 ("pickle of an int", "list.pkl", "holds int"),
                                 ("bad jsonl", "bad.jsonl", "bad.jsonl:2"),
                                 ("jsonl header CRLF", "crlf.jsonl", "crlf.jsonl:1"),
                                 ("serializer with a file", "blob.bin", "--serializer")):
        extra = ["--serializer", "json"] if "serializer" in name else []
        add(f"run {name}", ["run", *local[:-1], source, *extra, "-t", "2s", "-q"], 2, needle)
    add("run batch 2000 rows", ["run", *local[:-1], "wide.npy", "--batch-size", "2000", "-q"], 2, "6,291,456")
    add("run prompts fifo", ["run", *local[:-2], "--prompts", "fifo", "-q"], 2, "not a regular file")
    add("run url scheme", ["run", "--endpoint-name", "ep", "--endpoint-url", "ftp://x", "--payload", PAYLOAD], 2,
        "--endpoint-url")
    add("run region with a space", ["run", "--endpoint-name", "ep", "--payload", PAYLOAD, "--region", "us east-1"], 2,
        "--region")
    add("run region not aws", ["run", "--endpoint-name", "ep", "--payload", PAYLOAD, "--region", "useast1",
                               "--transport", "boto3"], 2, "not an AWS region")
    add("run no region", ["run", "--endpoint-name", "ep", "--payload", PAYLOAD], 2, "no AWS region",
        env={"AWS_DEFAULT_REGION": None, "AWS_REGION": None})
    add("run no credentials", ["run", "--endpoint-name", "ep", "--payload", PAYLOAD], 2, "no AWS credentials",
        env={"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None})
    add("run unknown profile", ["run", "--endpoint-name", "ep", "--payload", PAYLOAD, "--aws-profile", "nobody"], 2,
        "nobody")
    add("run out is a file", [*run, "--out", "afile"], 2, "a file is in the way")
    add("run out under a file", [*run, "--out", "afile/x"], 2, "is a file")
    add("run out in /proc", [*run, "--out", "/proc/sm-locust-probe"], 2, "cannot be created")
    add("run out holds a run", [*run, "--out", "run"], 2, "already holds a run")
    add("run env think time abc", run, 2, "SM_LOCUST_THINK_TIME", env={"SM_LOCUST_THINK_TIME": "abc"})
    add("run env split two", run, 2, "SM_LOCUST_SPLIT", env={"SM_LOCUST_SPLIT": "two"})
    add("run env transport", run, 2, "SM_LOCUST_TRANSPORT", env={"SM_LOCUST_TRANSPORT": "pigeon"})
    add("run locust rejects a flag", [*run, "--out", "rj", "--", "--bogus-locust-flag"], 2, "Locust rejected")
    add("run connection refused", ["run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--payload",
                                   PAYLOAD], 1, "connection refused")
    # -- run: faults -------------------------------------------------------------------------
    add("run every request in flight", ["run", "--endpoint-name", "ep", "--endpoint-url", slow, "--payload", PAYLOAD,
                                        "-u", "2", "-r", "20", "-t", "2s", "-q", "--out", "slow"], 1,
        "no request completed", outputs=("slow",))
    add("run every request fails", ["run", "--endpoint-name", "ep", "--endpoint-url", failing, "--payload", PAYLOAD,
                                    "-u", "2", "-t", "2s", "-q", "--out", "failing"], 1, "every request failed",
        outputs=("failing",))
    long_run = ["run", *local, "-u", "2", "-t", "60s", "-q", "--out", "bg"]
    add("run SIGTERM from a script", long_run, 143, "SIGTERM", signal_after="TERM", ready="bg/summary.json",
        outputs=("bg",))
    add("run SIGINT", long_run, 130, "SIGINT", signal_after="INT", ready="bg/summary.json", outputs=("bg",))
    add("run SIGKILL", long_run, 137, signal_after="KILL", ready="bg/summary.json", outputs=("bg",))
    add("smoke SIGTERM from a script", ["smoke", *local, "-t", "60s", "--out", "bg", "--max-p95-ms", "1000"], 143,
        "SIGTERM", signal_after="TERM", ready="bg/summary.json", outputs=("bg",))
    add("demo SIGTERM from a script", ["demo", "--out", "bg", "--no-cloudwatch", "--step-seconds", "30"], 143,
        "SIGTERM", signal_after="TERM", ready="bg/summary.json", outputs=("bg",))
    add("demo SIGKILL", ["demo", "--out", "bg", "--no-cloudwatch", "--step-seconds", "30"], 137, signal_after="KILL",
        ready="bg/summary.json", outputs=("bg",))
    add("sweep SIGTERM from a script", ["sweep", "long.yaml", "--out", "bg"], 143, "SIGTERM", signal_after="TERM",
        ready="bg/*/summary.json", outputs=("bg",))
    add("sweep SIGKILL", ["sweep", "long.yaml", "--out", "bg"], 137, signal_after="KILL", ready="bg/*/summary.json",
        outputs=("bg",))
    add("run full disk", [*run, "--out", "{full}/run"], 2, "file system is full", needs_root=True)
    add("report next to a read-only run", ["report", "{ro}/run", "--no-cloudwatch"], 2, "read-only", needs_root=True)
    add("report fills the disk", ["report", "run", "--no-cloudwatch", "--out", "{small}/rep"], 1,
        "No space left on device", needs_root=True)
    add("sweep --plan | head", [], (0, 141), shell="set -o pipefail; {sm} sweep sweep.yaml --plan | head -1 >/dev/null",
        group="sweep")

    # -- demo --------------------------------------------------------------------------------
    for name, extra, needle in (("out holds a run", ["--out", "run"], "already holds a run"),
                                ("out under a file", ["--out", "afile/demo"], "is a file"),
                                ("out is a file", ["--out", "afile"], "a file is in the way"),
                                ("out in /proc", ["--out", "/proc/x"], "cannot be created"),
                                ("step users 0", ["--step-users", "0"], "--step-users"),
                                ("step seconds nan", ["--step-seconds", "nan"], "--step-seconds"),
                                ("service time 0", ["--service-time-ms", "0"], "--service-time-ms"),
                                ("max concurrency 0", ["--max-concurrency", "0"], "--max-concurrency"),
                                ("max users 0", ["--max-users", "0"], "--max-users"),
                                ("port -1", ["--port", "-1"], "--port")):
        add(f"demo {name}", ["demo", *extra], 2, needle)

    # -- report ------------------------------------------------------------------------------
    for name, extra, needle in (("no folder", ["nowhere"], "not a folder"), ("a file", ["afile"], "afile"),
                                ("not a run", ["empty_dir"], "empty_dir"),
                                ("summary not json", ["not_json"], "summary"),
                                ("totals list", ["shape_totals"], "totals"),
                                ("steps rps text", ["shape_steps"], "'fast'"),
                                ("plateau number", ["shape_plateau"], "plateau"),
                                ("bad time", ["shape_time"], "started_at"),
                                ("out under a file", ["run", "--out", "afile/x"], "is a file"),
                                ("period 90", ["run", "--period", "90"], "--period"),
                                ("safety factor 2", ["run", "--safety-factor", "2"], "--safety-factor"),
                                ("price nan", ["run", "--price-per-hour", "nan"], "--price-per-hour"),
                                ("price -1", ["run", "--price-per-hour", "-1"], "--price-per-hour"),
                                ("wait timeout inf", ["run", "--wait-timeout", "inf"], "--wait-timeout"),
                                ("instance count 0", ["run", "--instance-count", "0"], "--instance-count"),
                                ("negative prices", ["run", "--prices", "neg_prices.json"], "at least 0"),
                                ("NaN prices", ["run", "--prices", "nan_prices.json"], "finite"),
                                ("prices missing", ["run", "--prices", "nope.json"], "nope.json"),
                                ("endpoint name", ["run", "--endpoint-name", "ep-"], "--endpoint-name"),
                                ("variant name", ["run", "--variant-name", "a b"], "--variant-name"),
                                ("s3 url", ["s3://"], "s3://"),
                                ("serverless memory 0", ["run", "--serverless-memory-mb", "0"],
                                                                 "--serverless-memory-mb")):
        add(f"report {name}", ["report", *extra, *([] if "--no-cloudwatch" in extra else ["--no-cloudwatch"])], 2,
            needle)

    # -- compare -----------------------------------------------------------------------------
    for name, extra, needle in (("wrong shape", ["run", "shape_totals", "--out", "cmp"], "shape_totals"),
                                ("no such run", ["nowhere", "--out", "cmp"], "nowhere"),
                                ("out under a file", ["run", "--out", "afile/cmp"], "is a file"),
                                ("out is a file", ["run", "--out", "afile"], "a file is in the way"),
                                ("safety factor 2", ["run", "--safety-factor", "2"], "--safety-factor"),
                                ("safety factor nan", ["run", "--safety-factor", "nan"], "--safety-factor"),
                                ("target rps inf", ["run", "--target-rps", "inf"], "--target-rps"),
                                ("negative prices", ["run", "--prices", "neg_prices.json", "--out", "cmp"],
                                 "at least 0")):
        add(f"compare {name}", ["compare", *extra], 2, needle)

    # -- smoke -------------------------------------------------------------------------------
    for name, extra, needle in (("negative p95", ["--run-dir", "run", "--max-p95-ms", "-1"], "--max-p95-ms"),
                                ("p99 nan", ["--run-dir", "run", "--max-p99-ms", "nan"], "--max-p99-ms"),
                                ("error rate 2", ["--run-dir", "run", "--max-error-rate", "2"], "between 0 and 1"),
                                ("min rps -1", ["--run-dir", "run", "--min-rps", "-1"], "--min-rps"),
                                ("not a run", ["--run-dir", "afile"], "afile"),
                                ("summary wrong shape", ["--run-dir", "shape_requests"], "totals.requests"),
                                ("baseline wrong shape", ["--run-dir", "run", "--baseline", "shape_steps"], "steps[0]"),
                                ("tolerance -1", ["--run-dir", "run", "--baseline", "run", "--tolerance", "-1"],
                                 "--tolerance"),
                                ("junit is a folder", ["--run-dir", "run", "--junit", "run"], "is a folder"),
                                ("junit under a file", ["--run-dir", "run", "--junit", "afile/j.xml"], "afile"),
                                ("run dir and endpoint", ["--run-dir", "run", "--endpoint-name", "ep"], "--run-dir"),
                                ("out holds a run", [*local, "--out", "run"], "already holds a run"),
                                ("junit before the test", [*local, "--junit", "run"], "is a folder"),
                                ("payload /dev/zero", [*local[:-1], "/dev/zero"], "not a regular file"),
                                ("spawn rate nan", [*local, "-r", "nan"], "--spawn-rate")):
        add(f"smoke {name}", ["smoke", *extra], 2, needle)

    # -- sweep -------------------------------------------------------------------------------
    plan = ["sweep", "sweep.yaml", "--plan"]
    for name, kv, needle in (("price -1", "price_per_hour=-1", "price_per_hour"),
                             ("price nan", "price_per_hour=.nan", "price_per_hour"),
                             ("service time nan", "endpoint.service_time_ms=.nan", "--service-time-ms"),
                             ("slo inf", "objective.slo_ms=.inf", "objective.slo_ms"),
                             ("target rps -3", "objective.target_rps=-3", "objective.target_rps"),
                             ("think time nan", "load.think_time=.nan", "load.think_time"),
                             ("users inf", "load.users=.inf", "load.users"),
                             ("max parallel 0", "max_parallel_endpoints=0", "max_parallel_endpoints"),
                             ("max cost -5", "max_cost_usd=-5", "max_cost_usd"),
                             ("percentile 101", "objective.percentile=101", "objective.percentile"),
                             ("throttle ratio nan", "endpoint.throttle_ratio=.nan", "--throttle-ratio"),
                             ("unknown key", "objectiv.slo_ms=5", "objectiv"),
                             ("empty grid", "grid.max_concurrency=[]", "grid.max_concurrency"),
                             ("unknown deploy", "deploy=kubernetes", "kubernetes"),
                             ("set without =", "price_per_hour", "--set")):
        add(f"sweep --set {name}", [*plan, "--set", kv], 2, needle)
    add("sweep no file", ["sweep"], 2, "give a sweep file")
    add("sweep file missing", ["sweep", "nope.yaml"], 2, "nope.yaml")
    add("sweep yaml broken", ["sweep", "broken.yaml", "--plan"], 2, "broken.yaml")
    add("sweep out another sweep", [*plan, "--out", "other_sweep"], 2, "holds another sweep")
    add("sweep out holds a run", ["sweep", "sweep.yaml", "--out", "run"], 2, "holds a run")
    add("sweep out is a file", [*plan, "--out", "afile"], 2, "a file is in the way")
    add("sweep serverless and grid", ["sweep", "sls_grid.yaml", "--plan"], 2, "serverless.max_concurrency")
    add("sweep serverless memory 1500", ["sweep", "sls_mem.yaml", "--plan"], 2, "1500")
    add("sweep sagemaker without --yes", ["sweep", "sm.yaml", "--out", "smo"], 2, "--yes")
    add("sweep sagemaker no credentials", ["sweep", "sm.yaml", "--yes", "--out", "smo"], 2, "credentials",
        env={"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None})
    add("sweep cleanup no region", ["sweep", "--cleanup", "abc"], 2, "no AWS region",
        env={"AWS_DEFAULT_REGION": None, "AWS_REGION": None})
    add("sweep cleanup bad region", ["sweep", "--cleanup", "abc", "--region", "zz-nowhere-9"], (1, 2), "zz-nowhere-9")
    add("sweep into a running sweep's folder", [], 2, "being written by another",
        shell="{sm} sweep long.yaml --out bg >/dev/null 2>&1 & p=$!; "
              "for i in $(seq 300); do ls bg/*/summary.json >/dev/null 2>&1 && break; sleep 0.2; done; "
              "{sm} sweep long.yaml --out bg; rc=$?; kill -TERM $p; wait $p; exit $rc", outputs=("bg",), timeout=120,
        group="sweep")
    # -- round 4 (issue 32): each within 10 s under a 3 GB address space ---------------------------
    hostile, mme = urls["hostile"], urls["mme"]
    four = {"bounded": True, "timeout": BOUNDED_S}
    add("run endpoint escape sequences", ["run", "--endpoint-name", "ep", "--endpoint-url", hostile, "--payload",
                                          PAYLOAD, "-u", "2", "-t", "2s", "--out", "esc"], 1, "every request failed",
        outputs=("esc",), inert=True, **four)
    add("smoke endpoint escape sequences", ["smoke", "--endpoint-name", "ep", "--endpoint-url", hostile, "--payload",
                                            PAYLOAD, "-u", "2", "-t", "2s", "--out", "esc"], (1, 2), outputs=("esc",),
        inert=True, **four)
    add("sweep --cleanup of a running sweep", [], 2, "that sweep is running right now",
        shell="{sm} sweep long.yaml --out bg >/dev/null 2>&1 & p=$!; "
              "for i in $(seq 300); do ls bg/*/summary.json >/dev/null 2>&1 && break; sleep 0.2; done; "
              "{sm} sweep --cleanup long; a=$?; {sm} sweep --cleanup long --out bg; b=$?; "
              "kill -TERM $p; wait $p; s=$?; [ $s = 143 ] && [ $a = 2 ] && exit $b; exit 99", outputs=("bg",),
        timeout=120, group="sweep")
    add("serve --model-count 1e9", ["serve", "--multi-model", "--model-count", "1000000000"], 2, "--model-count",
        **four)
    add("serve --max-instances 1e9", ["serve", "--instances", "1", "--target-value", "5", "--max-instances",
                                      "1000000000"], 2, "--max-instances", **four)
    add("serve --instances 1e9", ["serve", "--instances", "1000000000"], 2, "--instances", **four)
    add("serve --workers 1e5", ["serve", "--workers", "100000"], 2, "--workers", **four)
    add("serve --time-scale 1e300", ["serve", "--instances", "2", "--time-scale", "1e300"], 2, "--time-scale", **four)
    add("run IR stairs 1e8 steps", [*run, "--shape", "phases", "--traffic-pattern", "stairs.json"], 2,
        "NumberOfSteps", **four)
    add("run --prompts synthetic:1e6", ["run", *local[:-2], "--prompts", "synthetic:1000000", "-q"], 2, "--prompts",
        **four)
    add("run traffic alias bomb", [*run, "--traffic", "bomb_traffic.yaml"], 2, "--traffic", **four)
    add("sweep alias bomb", ["sweep", "bomb_sweep.yaml", "--plan"], 2, "bomb_sweep.yaml", **four)
    add("sweep binary file", ["sweep", "sweep.bin", "--plan"], 2, "not UTF-8", **four)
    add("run mix weights overflow", [*run, "--target-models", "a=1e308,b=1e308"], 2, "--target-models", **four)
    add("run mix file weights overflow", [*run, "--target-models", "huge_weights.csv"], 2, "--target-models", **four)
    add("env mix weights overflow", run, 2, "--target-models", env={"SM_LOCUST_TARGET_MODELS": "a=1e308,b=1e308"},
        **four)
    add("plain locust mix weights overflow", [], 2, "--target-models",
        shell=f"{shlex.quote(PY)} -m locust -f {shlex.quote(str(ROOT / 'locustfiles' / 'sagemaker.py'))} --headless "
              f"-t 5s --endpoint-name ep --endpoint-url {up} --payload {PAYLOAD} --target-models a=1e308,b=1e308",
        group="run", **four)
    add("run mix fifo csv", [*run, "--target-models", "mix_fifo.csv"], 2, "not a regular file", **four)
    add("run mix non-ascii name", [*run, "--target-models", "modèle.tar.gz"], 2, "TargetModel", **four)
    add("run mix component a.b", [*run, "--inference-components", "a.b,c"], 2, "InferenceComponentName", **four)
    add("run mix 2000-character name", [*run, "--target-models", "m" * 2000], 2, "2000 characters", **four)
    add("run mix Excel CSV UTF-8 works", ["run", "--endpoint-name", "ep", "--endpoint-url", mme, "--payload", PAYLOAD,
                                          "-u", "2", "-t", "1s", "-q", "--target-models", "excel.csv", "--out", "bom"],
        0, outputs=("bom",), **four)
    add("run --processes 64 -u 2", [*run, "--processes", str(max(64, 4 * (os.cpu_count() or 1) + 1)), "-u", "2"], 2,
        "--processes", **four)
    add("run --time-scale 1e300", [*run, "--traffic", "traffic.yaml", "--time-scale", "1e300"], 2, "--time-scale",
        **four)
    add("compare --target-rps=-5", ["compare", "run", "--target-rps=-5"], 2, "--target-rps", **four)
    add("run disk fills mid-run", [], 0, needs_root=True, group="run",
        shell="{sm} run --endpoint-name ep --endpoint-url " + up + " --payload " + PAYLOAD + " -u 2 -t 4s -q "
              "--out {disk}/run >/dev/null 2>&1 & p=$!; "
              "for i in $(seq 300); do [ -f {disk}/run/summary.json ] && break; sleep 0.1; done; "
              "python3 -c \"import os; s=os.statvfs('{disk}'); open('{disk}/filler','wb').write(b'x'*max(0, "
              "s.f_bavail*s.f_frsize-16384))\"; wait $p; "
              "ls -a {disk}/run | grep -q -e '^locust_report.html$' -e '.partial$' && exit 3; "
              "for f in {disk}/run/*.json; do "
              "python3 -c \"import json,sys; json.load(open(sys.argv[1]))\" $f || exit 4; done; exit 0")
    api = ("import sys; import sm_locust; from sm_locust.errors import UsageError\ntry:\n    {call}\n"
           "except UsageError as exc:\n    print('sm-locust: error:', exc, file=sys.stderr); sys.exit(2)")
    for name, call, needle in (
            ("report price_per_hour=-1", "sm_locust.load('run').report(cloudwatch=False, price_per_hour=-1)",
             "--price-per-hour"),
            ("report price_per_hour=nan", "sm_locust.load('run').report(cloudwatch=False, price_per_hour=float('nan'))",
             "--price-per-hour"),
            ("report instance_count=0", "sm_locust.load('run').report(cloudwatch=False, instance_count=0)",
             "--instance-count"),
            ("report target_rps=inf", "sm_locust.load('run').report(cloudwatch=False, target_rps=float('inf'))",
             "--target-rps"),
            ("load(None)", "sm_locust.load(None)", "load()"), ("load(123)", "sm_locust.load(123)", "load()"),
            ("sweep(123)", "sm_locust.sweep(123)", "sweep"),
            ("compare('run')", "sm_locust.compare('run')", "compare()"),
            ("run locust_args='--bogus'", f"sm_locust.run('ep', endpoint_url='{up}', payload='{PAYLOAD}', "
             "run_time='1s', locust_args='--bogus', out='api_run', progress=False)", "locust_args=")):
        add(f"api {name}", [], 2, needle, shell=f"{shlex.quote(PY)} -c {shlex.quote(api.format(call=call))}",
            group="api", **four)
    add("run into a running run's folder", [], 2, "being written by another",
        shell=f"{{sm}} {shlex.join(long_run)} >/dev/null 2>&1 & p=$!; "
              "for i in $(seq 300); do [ -f bg/summary.json ] && break; sleep 0.2; done; "
              f"{{sm}} {shlex.join(long_run)} --overwrite; rc=$?; kill -TERM $p; wait $p; exit $rc", outputs=("bg",),
        group="run")
    add("report a run in progress", [], 2, "run in progress",
        shell=f"{{sm}} {shlex.join(long_run)} >/dev/null 2>&1 & p=$!; "
              "for i in $(seq 300); do [ -f bg/summary.json ] && break; sleep 0.2; done; "
              "{sm} report bg --no-cloudwatch; rc=$?; kill -TERM $p; wait $p; exit $rc", outputs=("bg",),
        group="report")
    return table


def hostile_endpoint():
    """A runtime stand-in on 127.0.0.1 that answers every invocation ModelError 424 whose message carries OSC 0
    (title), CSI 2J (clear screen), OSC 52 (clipboard), a bidi override and an 8-bit CSI (no signature check)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args) -> None:
            pass

        def do_GET(self) -> None:  # /ping
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"message": HOSTILE, "OriginalStatusCode": 500, "OriginalMessage": HOSTILE,
                               "LogStreamArn": "arn"}).encode()
            self.send_response(424)
            self.send_header("x-amzn-ErrorType", "ModelError:")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def snapshot(folder: Path, skip: tuple[str, ...]) -> dict[str, tuple[int, float]]:
    out = {}
    for path in folder.rglob("*"):
        rel = str(path.relative_to(folder))
        if any(rel == s or rel.startswith(s.rstrip("/") + "/") for s in skip) or path.is_fifo():
            continue
        out[rel] = (path.stat().st_size if path.is_file() else -1, path.stat().st_mtime if path.is_file() else 0.0)
    return out


def ours(since: float, exclude: set[int], where: Path) -> list[psutil.Process]:
    """Processes started since `since` in `where` (the scene: the command's children inherit it) that run
    sm-locust or Locust; not this probe's own, not other users of the machine."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "create_time"]):
        try:
            if p.pid in exclude or (p.info["create_time"] or 0) < since - 0.5:
                continue
            line = " ".join(p.info["cmdline"] or [])
            if ("sm_locust" in line or "-m locust" in line) and p.cwd().startswith(str(where)):
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def command_line(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())[:80]
    except psutil.Error:  # gone, or a zombie meanwhile
        return "?"


def judge(case: Case, code: int | None, err: str, left: list[psutil.Process], changed: list[str],
          elapsed: float = 0.0, out: str = "") -> str | None:
    """Why the case did not end well, or None."""
    wanted = case.code if isinstance(case.code, tuple) else (case.code,)
    if case.bounded and (code is None or elapsed > BOUNDED_S):
        return f"not within {BOUNDED_S:g} s under {BOUNDED_AS >> 30} GB: exit {code} after {elapsed:.1f} s"
    if case.inert and any(c in out + err for c in CONTROLS):
        found = sorted({repr(c) for c in CONTROLS if c in out + err})
        return f"terminal controls reached the terminal: {', '.join(found)}"
    if code not in wanted:
        return f"exit {code}, expected {'/'.join(map(str, wanted))}: {err.strip()[-300:]}"
    if "Traceback" in err:
        return "a traceback: " + err.strip().splitlines()[-1][:200]
    lines = [line for line in err.splitlines() if line.strip()]
    if case.signal_after == "KILL" or case.shell:
        lines = [line for line in lines if line.startswith("sm-locust")]  # the shell's own "Killed" line
        if case.shell and lines:
            lines = lines[-1:]
    if case.needles or case.signal_after not in (None, "KILL"):
        if len(lines) != 1:
            return f"{len(lines)} stderr lines: {' | '.join(lines)[:300]}"
        if not lines[0].startswith("sm-locust"):
            return f"not sm-locust's line: {lines[0][:200]}"
        missing = [n for n in case.needles if n not in lines[0]]
        if missing:
            return f"the line lacks {missing}: {lines[0][:200]}"
    if left:
        return f"left running: {[(p.pid, command_line(p)) for p in left]}"
    if changed:
        return f"changed in the scene: {changed[:5]}"
    return None


def _bounded() -> None:
    """preexec_fn of a bounded case: the address space the issue allows (3 GB)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (BOUNDED_AS, BOUNDED_AS))


def run_case(case: Case, scene: Path, env: dict[str, str], mounts: dict[str, Path]) -> str | None:
    sm = f"{shlex.quote(PY)} -m sm_locust"
    places = {k: str(v) for k, v in mounts.items()}
    argv = [a.format(**places) for a in case.argv]
    case_env = dict(env)
    for key, value in case.env.items():
        if value is None:
            case_env.pop(key, None)
        else:
            case_env[key] = value
    before = snapshot(scene, case.outputs)
    me = {psutil.Process().pid}
    started = time.time()
    err_path, out_path = scene.parent / "probe.err", scene.parent / "probe.out"
    limit = _bounded if case.bounded else None
    with open(err_path, "w") as err, open(out_path, "w") as out:
        if case.shell:
            proc = subprocess.Popen(["bash", "-c", case.shell.format(sm=sm, **places)], cwd=scene, env=case_env,
                                    stdout=out, stderr=err, start_new_session=True, preexec_fn=limit)
        elif case.signal_after:
            script = f"{sm} {shlex.join(argv)} >/dev/null & echo $! >{scene.parent}/probe.pid; wait $!"
            proc = subprocess.Popen(["bash", "-c", script], cwd=scene, env=case_env, stdout=subprocess.DEVNULL,
                                    stderr=err, start_new_session=True)
        else:
            proc = subprocess.Popen([PY, "-m", "sm_locust", *argv], cwd=scene, env=case_env, stdout=out,
                                    stderr=err, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=limit)
        if case.signal_after:
            deadline = time.monotonic() + 90
            pid_file = scene.parent / "probe.pid"
            while time.monotonic() < deadline and proc.poll() is None:
                under_way = time.time() - started > 4 if case.ready == "-" else bool(list(scene.glob(case.ready)))
                if pid_file.is_file() and pid_file.read_text().strip() and under_way:
                    break
                time.sleep(0.1)
            time.sleep(1.0)
            try:
                os.kill(int(pid_file.read_text()), getattr(signal, f"SIG{case.signal_after}"))
            except (OSError, ValueError):
                pass
        try:
            proc.wait(case.timeout + (90 if case.signal_after else 0))
            code = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    if case.signal_after:  # the command's own exit code (bash's wait returns it)
        code = proc.returncode
    elapsed = time.time() - started
    err_text = err_path.read_text(errors="replace")
    out_text = out_path.read_text(errors="replace")
    leftover = ours(started, me, scene.parent)
    _, alive = psutil.wait_procs(leftover, timeout=20)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    after = snapshot(scene, case.outputs)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    for output in case.outputs:
        shutil.rmtree(scene / output, ignore_errors=True)
    (scene.parent / "probe.pid").unlink(missing_ok=True)
    return judge(case, code, err_text, alive, changed, elapsed, out_text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="match", default="", help="only the cases whose name contains this")
    args = parser.parse_args()
    from sm_locust.endpoint.multimodel import MultiModelConfig
    from sm_locust.endpoint.server import LocalEndpoint

    work = Path(tempfile.mkdtemp(prefix="sm-locust-probe-"))
    scene = work / "scene"
    scene.mkdir()
    build_scene(scene)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SM_LOCUST_"))}
    env.update({"AWS_ACCESS_KEY_ID": "probe", "AWS_SECRET_ACCESS_KEY": "probe", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_CONFIG_FILE": str(work / "aws_config"), "AWS_SHARED_CREDENTIALS_FILE": str(work / "aws_creds"),
                "AWS_EC2_METADATA_DISABLED": "true", "PYTHONUNBUFFERED": "1"})
    mounts = {"full": work / "full", "ro": work / "ro", "small": work / "small", "disk": work / "disk"}
    root = (mount_tmpfs(mounts["full"], "1m", fill=900_000) and mount_tmpfs(mounts["ro"], "4m", read_only=True,
                                                                            copy=scene / "run")
            and mount_tmpfs(mounts["small"], "1500k") and mount_tmpfs(mounts["disk"], "2m"))
    endpoints = {"up": LocalEndpoint(max_concurrency=4, service_time_ms=5), "slow": LocalEndpoint(latency_ms=8000),
                 "failing": LocalEndpoint(model_error_ratio=1.0),
                 "mme": LocalEndpoint(multi_model=MultiModelConfig(model_count=10, download_ms=0.0, load_ms=0.0))}
    hostile = hostile_endpoint()
    busy = None
    results: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    try:
        for ep in endpoints.values():
            ep.start()
        busy = endpoints["up"].config.port
        urls = {k: ep.url for k, ep in endpoints.items()} | {"hostile": f"http://127.0.0.1:{hostile.server_port}"}
        table = [c for c in cases(urls, busy) if args.match in c.name]
        print(f"sm-locust probe: {len(table)} cases in {scene}", flush=True)
        for case in table:
            if case.needs_root and not root:
                results[case.command].append((case.name, "skipped: needs root to mount a tmpfs"))
                continue
            verdict = run_case(case, scene, env, mounts)
            results[case.command].append((case.name, verdict))
            if verdict:
                print(f"  NOT WELL  {case.name}: {verdict}", flush=True)
    finally:
        hostile.shutdown()
        for ep in endpoints.values():
            ep.stop()
        for target in mounts.values():
            unmount(target)
        shutil.rmtree(work, ignore_errors=True)
    print("\ncommand   cases  ended well")
    total = well = 0
    for command in ("serve", "run", "demo", "report", "compare", "smoke", "sweep", "api"):
        rows = [(n, v) for n, v in results.get(command, []) if not (v or "").startswith("skipped")]
        ok = sum(1 for _, v in rows if v is None)
        total, well = total + len(rows), well + ok
        print(f"{command:<8} {len(rows):>6} {ok:>11}")
    share = 100.0 * well / total if total else 0.0
    print(f"{'all':<8} {total:>6} {well:>11}  ({share:.1f} % ended well)")
    skipped = [n for rows in results.values() for n, v in rows if (v or "").startswith("skipped")]
    if skipped:
        print(f"skipped (need root): {', '.join(skipped)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
