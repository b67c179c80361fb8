"""The round-5 probe (issue 38): hostile but realistic inputs on the surfaces round 4 did not try, each judged
"ends well" by bench/probe.py's rules, plus in-process checks where a command line cannot show the answer.

Areas: planted symlinks where an output goes; terminal controls in names a command echoes; error-name
cardinality (CloudWatch, Prometheus); hostile streams (an event that never ends, a frame claiming 4 GB, a bad
CRC then endless bytes, token counts of Infinity / NaN / 1e300); archives (.npz bombs, lying shapes, stray
members, huge batches); prompts files; sweep grids; run folders' JSON (size, schema); answers (Triton's 200
{"error"}, nested requests to the local Triton endpoint); the Python API's argument types and threads;
environment variables; signals.

A command case ends well as in bench/probe.py (exit code, one sm-locust line naming the problem, no traceback,
nothing left running, the scene unchanged but for its outputs: a symlink's target is part of the scene, so a
write through it is caught; `bounded`: within 10 s under 3 GB; `inert`: no terminal control printed). A check
case is a function that returns why it did not end well, or None; it is timed, and more than 10 s fails it.

    .venv/bin/python bench/probe_round5.py             # every case (~6 min on the 2-core box)
    .venv/bin/python bench/probe_round5.py -k links    # the cases whose name contains "links"

Prints one line per case that did not end well, then the table per area (cases, ended well, share).
Figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections import defaultdict
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/probe.py: the case runner and its judge
import probe as base  # noqa: E402
from probe import BOUNDED_S, PAYLOAD, PY, Case  # noqa: E402

AREAS = ("links", "terminal", "cardinality", "streams", "archives", "prompts", "sweeps", "run folders", "answers",
         "python api", "environment", "signals")
ESC_NAMES = {"osc title": "run\x1b]0;pwned\x07", "osc 52": "run\x1b]52;c;ZXZpbA==\x07", "csi clear": "run\x1b[2J",
             "8-bit csi": "run\x9b31m", "bidi": "run\u202eevil"}
RUN_OUTPUTS = ("locust_stats.csv", "locust_stats_history.csv", "locust_failures.csv", "locust_exceptions.csv",
               ".locust_report.html.partial", "locust.log", "options.json", "timeline.jsonl")
REPORT_OUTPUTS = ("report.html", "steps.csv", "merged_timeseries.csv", "hourly.csv")
SUMMARY = {"schema": 1, "endpoint": "ep", "totals": {"requests": 100, "failures": 0, "rps": 10.0, "p50_ms": 5.0,
                                                     "p95_ms": 9.0, "p99_ms": 12.0, "errors": {}},
           "steps": [], "plateau": None}


def npy(array) -> bytes:
    import numpy

    buffer = io.BytesIO()
    numpy.save(buffer, array)
    return buffer.getvalue()


def build_scene(work: Path) -> None:
    import numpy

    (work / "secret").write_text("the link's target: must stay as it is\n")
    run = work / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(SUMMARY))
    # -- links: one folder per planted output
    for name in ("compare.html", "compare.csv"):
        (work / f"cmp_{name}").mkdir()
        (work / f"cmp_{name}" / name).symlink_to(work / "secret")
    for name in REPORT_OUTPUTS:
        shutil.copytree(run, work / f"rep_{name}")
        (work / f"rep_{name}" / name).symlink_to(work / "secret")
        (work / f"repout_{name}").mkdir()
        (work / f"repout_{name}" / name).symlink_to(work / "secret")
    for name in (*RUN_OUTPUTS, "summary.json"):
        (work / f"runout_{name}").mkdir()
        (work / f"runout_{name}" / name).symlink_to(work / ("secret" if name != "summary.json" else "nowhere"))
    (work / "junit_link.xml").symlink_to(work / "secret")
    (work / "junit_dangling.xml").symlink_to(work / "nowhere.xml")
    (work / "sweep_out").mkdir()
    (work / "sweep_out" / "sweep.html").symlink_to(work / "secret")
    sweep = ("name: probe5\nendpoint: {service_time_ms: 5}\ngrid: {max_concurrency: [2]}\n"
             f"load: {{payload: {PAYLOAD}, users: 1, run_time: 2s}}\nobjective: {{target_rps: 1, slo_ms: 1000}}\n")
    (work / "sweep.yaml").write_text(sweep)
    # -- terminal: run folders named with controls
    shutil.copytree(run, work / "rep_run")
    for name in ESC_NAMES.values():
        shutil.copytree(run, work / name)
        shutil.copytree(run, work / f"{name}_r")
        (work / f"{name}.yaml").write_text(sweep)
    # -- archives
    with zipfile.ZipFile(work / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("x.npy", "w", force_zip64=True) as fh:
            header = io.BytesIO()  # 1.2 GB of float64, all there: a real bomb, not a lying directory
            numpy.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                             "shape": (150_000_000,)})
            fh.write(header.getvalue())
            zeros = bytes(1 << 24)
            for _ in range(72):  # 72 x 16 MB: 1.2 GB of zeros, ~1.2 MB deflated
                fh.write(zeros)
    (work / "shape.npz").write_bytes(b"")
    with zipfile.ZipFile(work / "shape.npz", "w") as archive:
        archive.writestr("x.npy", npy(numpy.ones(4)).replace(b"(4,), }" + b" " * 12, b"(1000000000000,), }"))
    with zipfile.ZipFile(work / "readme.npz", "w") as archive:
        archive.writestr("x.npy", npy(numpy.ones((4, 3))))
        archive.writestr("readme.txt", "hello\n")
    with zipfile.ZipFile(work / "members.npz", "w") as archive:
        for i in range(2_000):
            archive.writestr(f"a{i}.npy", npy(numpy.ones(2)))
    with zipfile.ZipFile(work / "deflate_lies.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("x.npy", npy(numpy.ones((8, 3))))
    data = bytearray((work / "deflate_lies.npz").read_bytes())
    data[60:70] = b"\x00" * 10  # a corrupt member: a one-line refusal, not a traceback
    (work / "deflate_lies.npz").write_bytes(bytes(data))
    numpy.savez(work / "rows.npz", a=numpy.ones((50, 3)), b=numpy.ones((50, 2)))
    numpy.savez(work / "names.npz", **{"ü\x1b]0;x\x07": numpy.ones((5, 2))})
    # -- prompts
    with open(work / "prompts_3m.jsonl", "w") as fh:
        line = json.dumps({"prompt": "hello"}) + "\n"
        for _ in range(30):
            fh.write(line * 100_000)
    with open(work / "prompts_101k.jsonl", "w") as fh:
        fh.write(json.dumps({"prompt": "hi there"}) + "\n" * 1 + (json.dumps({"prompt": "x"}) + "\n") * 100_000)
    with open(work / "prompts_300mb.jsonl", "wb") as fh:
        fh.truncate(300 << 20)  # one line of NULs, no newline: sparse on disk
    (work / "prompts_7mb.jsonl").write_text(json.dumps({"prompt": "word " * 1_400_000}) + "\n")
    (work / "prompts_ok.jsonl").write_text("".join(json.dumps({"prompt": f"p {i}"}) + "\n" for i in range(10)))
    # -- sweeps
    values = ", ".join(str(i + 1) for i in range(1000))
    (work / "grid_1000x1000.yaml").write_text(sweep.replace("grid: {max_concurrency: [2]}",
                                                            f"grid: {{max_concurrency: [{values}], workers: "
                                                            f"[{values}]}}"))
    listed = "".join(f"  - {{max_concurrency: {i + 1}}}\n" for i in range(1001))
    (work / "listed_1001.yaml").write_text(sweep.replace("grid: {max_concurrency: [2]}\n",
                                                         "configurations:\n" + listed))
    (work / "grid_10x10.yaml").write_text(sweep.replace("grid: {max_concurrency: [2]}", "grid: {max_concurrency: "
                                                        "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], seed: [1, 2, 3, 4, 5, 6, "
                                                        "7, 8, 9, 10]}"))
    # -- run folders' JSON
    for name, size in (("huge_summary", 1 << 30), ("big_summary", 100 << 20)):
        (work / name).mkdir()
        with open(work / name / "summary.json", "wb") as fh:
            fh.truncate(size)  # sparse: costs nothing on disk
    for name, schema in (("schema_999", 999), ("schema_2", 2), ("schema_0", 0)):
        (work / name).mkdir()
        (work / name / "summary.json").write_text(json.dumps({**SUMMARY, "schema": schema}))


class Hostile(BaseHTTPRequestHandler):
    """A runtime stand-in: the endpoint's name says how it answers (see `answer`)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *_args) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        from sm_locust.transport import eventstream

        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        name = self.path.split("/")[2] if self.path.count("/") >= 3 else ""
        if name == "triton-error":
            body = b'{"error": "model is not ready"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", eventstream.CONTENT_TYPE)
        self.send_header("X-Amzn-SageMaker-Content-Type", "application/jsonlines")
        self.send_header("Connection", "close")
        self.end_headers()
        part = eventstream.encode_payload_part
        try:
            if name.startswith("tokens-"):
                count = {"tokens-inf": "Infinity", "tokens-nan": "NaN", "tokens-1e300": "1e300"}[name]
                for i in range(4):
                    self.wfile.write(part(json.dumps({"token": {"id": i, "text": " a"}}).encode() + b"\n"))
                self.wfile.write(part(b'{"generated_text": "a a a a", "details": {"generated_tokens": '
                                      + count.encode() + b"}}\n"))
            elif name == "endless-line":
                self.wfile.write(part(b'{"token": {"id": 1, "text": "'))
                filler = part(b"}" * 60_000)
                while True:
                    self.wfile.write(filler)
            elif name == "frame-4gb":
                self.wfile.write(part(b'{"token": {"id": 1, "text": "a"}}\n'))
                self.wfile.write(struct.pack(">II", 0xFFFFFFF0, 0))
                while True:
                    self.wfile.write(b"x" * 65536)
            elif name == "bad-crc":
                bad = bytearray(part(b'{"token": {"id": 1, "text": "a"}}\n'))
                bad[-1] ^= 0xFF
                self.wfile.write(bytes(bad))
                while True:
                    self.wfile.write(b"\x00" * 65536)
        except OSError:  # the client hung up: what it should do
            pass


def hostile_server() -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def cases(urls: dict[str, str]) -> list[Case]:
    up, hostile = urls["up"], urls["hostile"]
    local = ["--endpoint-name", "ep", "--endpoint-url", up, "--payload", PAYLOAD]
    table: list[Case] = []

    def add(area: str, name: str, argv: list[str], code: int | tuple[int, ...] = 2, *needles: str, **extra) -> None:
        if code == 2 and not extra.get("signal_after"):
            extra.setdefault("bounded", True)
            extra.setdefault("timeout", BOUNDED_S)
        extra.setdefault("timeout", 90.0)
        table.append(Case(f"{area}: {name}", argv, code, needles, group=area, **extra))

    area = "links"
    for name in ("compare.html", "compare.csv"):
        add(area, f"compare --out with {name} a link", ["compare", "run", "--out", f"cmp_{name}"], 2,
            "symbolic link")
    for name in REPORT_OUTPUTS:
        add(area, f"report RUN with {name} a link", ["report", f"rep_{name}", "--no-cloudwatch"], 2,
            "symbolic link")
        add(area, f"report --out with {name} a link", ["report", "run", "--no-cloudwatch", "--out",
                                                       f"repout_{name}"], 2, "symbolic link")
    for name in (*RUN_OUTPUTS, "summary.json"):  # a link to a file named as a run's is also "holds a run": refused
        add(area, f"run --out with {name} a link", ["run", *local, "-t", "1s", "-q", "--out", f"runout_{name}"], 2,
            f"runout_{name}")
    add(area, "smoke --junit a link", ["smoke", "--run-dir", "run", "--junit", "junit_link.xml"], 2, "symbolic link")
    add(area, "smoke --junit a dangling link", ["smoke", "--run-dir", "run", "--junit", "junit_dangling.xml"], 2,
        "symbolic link")
    add(area, "sweep --out with sweep.html a link", ["sweep", "sweep.yaml", "--yes", "--out", "sweep_out"], 2,
        "symbolic link", bounded=False, timeout=120.0, outputs=("sweep_out",))
    add(area, "report without links writes", ["report", "rep_run", "--no-cloudwatch", "--out", "rep_plain"], (0, 1),
        outputs=("rep_plain", "rep_run"))

    area = "terminal"
    for label, name in ESC_NAMES.items():
        add(area, f"compare a run named with {label}", ["compare", name, "--out", "cmp_out"], (0, 1), inert=True,
            outputs=("cmp_out",))
        add(area, f"report a run named with {label}", ["report", f"{name}_r", "--no-cloudwatch", "--out", "rep_out"],
            (0, 1), inert=True, outputs=("rep_out", f"{name}_r"))  # report adds to the run's summary.json
        add(area, f"smoke a run named with {label}", ["smoke", "--run-dir", name], (0, 1), inert=True)
        add(area, f"compare a missing run named with {label}", ["compare", f"{name}/nope"], 2, "nope", inert=True)
        add(area, f"sweep --plan of a file named with {label}", ["sweep", f"{name}.yaml", "--plan"], 0, inert=True)

    area = "streams"
    for transport in ("fast", "boto3"):
        stream = ["run", "--endpoint-url", hostile, "--prompts", "synthetic:8", "--stream", "true", "--transport",
                  transport, "-u", "1", "-t", "2s", "-q", "--out", "st_out"]
        for name, code in (("endless-line", 1), ("frame-4gb", 1), ("bad-crc", 1), ("tokens-inf", 0),
                           ("tokens-nan", 0), ("tokens-1e300", 0)):
            add(area, f"{name} ({transport})", ["run", "--endpoint-name", name, *stream[1:]], code, timeout=25.0,
                outputs=("st_out",))

    area = "archives"
    npz_run = ["run", "--endpoint-name", "ep", "--endpoint-url", up, "-t", "1s", "-q", "--out", "ar_out"]
    for name, extra_args, needle in (("a 1.2-GB zip bomb", ["--payload", "bomb.npz"], "inflates to"),
                                     ("a member of shape (10^12,)", ["--payload", "shape.npz"], "declares shape"),
                                     ("a readme.txt member", ["--payload", "readme.npz"], "readme.txt"),
                                     ("2,000 members", ["--payload", "members.npz"], "2,000 members"),
                                     ("a corrupt member", ["--payload", "deflate_lies.npz"], "deflate_lies.npz"),
                                     ("--batch-size 1e9", ["--payload", "rows.npz", "--batch-size", "1000000000"],
                                      "--batch-size 1,000,000,000"),
                                     ("--batch-size 2e6", ["--payload", "rows.npz", "--batch-size", "2000000"],
                                      "--batch-size 2,000,000")):
        add(area, name, [*npz_run, *extra_args], 2, needle, outputs=("ar_out",))
    add(area, "--batch-size 8 runs", [*npz_run, "--payload", "rows.npz", "--batch-size", "8"], (0, 1),
        outputs=("ar_out",))  # (the local ranking model answers these arrays 400: the run ends 1, as it should)
    add(area, "an array named with controls", [*npz_run, "--payload", "names.npz"], (0, 1, 2), inert=True,
        outputs=("ar_out",))

    area = "prompts"
    llm = ["run", "--endpoint-name", "ep", "--endpoint-url", up, "-t", "1s", "-q", "--out", "pr_out"]
    for name, source, needle in (("3,000,000 lines", "prompts_3m.jsonl", "more than 100,000 prompts"),
                                 ("100,001 prompts", "prompts_101k.jsonl", "more than 100,000 prompts"),
                                 ("300 MB on one line", "prompts_300mb.jsonl", "is over 256 MB"),
                                 ("a 7 MB prompt", "prompts_7mb.jsonl", "over 6,291,456")):
        add(area, name, [*llm, "--prompts", source], 2, needle, outputs=("pr_out",))
    add(area, "ten prompts work", [*llm, "--prompts", "prompts_ok.jsonl"], (0, 1), outputs=("pr_out",))

    area = "sweeps"
    add(area, "a 1000 x 1000 grid --plan", ["sweep", "grid_1000x1000.yaml", "--plan"], 2, "1,000,000 configurations")
    add(area, "a 1000 x 1000 grid run", ["sweep", "grid_1000x1000.yaml", "--yes"], 2, "1,000,000 configurations")
    add(area, "1,001 listed configurations", ["sweep", "listed_1001.yaml", "--plan"], 2, "1,001 configurations")
    add(area, "a 10 x 10 grid plans", ["sweep", "grid_10x10.yaml", "--plan"], 0)

    area = "run folders"
    for name, argv, needle in (
            ("smoke --baseline of 1 GB", ["smoke", "--run-dir", "run", "--baseline", "huge_summary"], "over 64 MB"),
            ("smoke --run-dir of 100 MB", ["smoke", "--run-dir", "big_summary"], "over 64 MB"),
            ("report of a 1 GB summary", ["report", "huge_summary", "--no-cloudwatch"], "over 64 MB"),
            ("compare of a 1 GB summary", ["compare", "huge_summary"], "over 64 MB"),
            ("smoke --baseline schema 999", ["smoke", "--run-dir", "run", "--baseline", "schema_999"], "schema is 999"),
            ("smoke --run-dir schema 2", ["smoke", "--run-dir", "schema_2"], "schema is 2"),
            ("report schema 999", ["report", "schema_999", "--no-cloudwatch", "--out", "rf_out"], "schema is 999"),
            ("compare schema 0", ["compare", "schema_0", "--out", "rf_out"], "schema is 0")):
        add(area, name, argv, 2, needle, outputs=("rf_out",))

    area = "answers"
    add(area, "Triton 200 {\"error\"} fails --validate-response on",
        ["run", "--endpoint-name", "triton-error", "--endpoint-url", hostile, "--payload", PAYLOAD, "--serializer",
         "triton-json", "--input-names", "x", "--validate-response", "on", "-u", "1", "-t", "1s", "-q", "--out",
         "an_out"], 1, timeout=30.0, outputs=("an_out",))

    area = "environment"
    for variable, value in (("SM_LOCUST_TARGET_MODELS", "a=1e308,b=1e308"),
                            ("SM_LOCUST_INFERENCE_COMPONENTS", "a=1e308,b=1e308"),
                            ("SM_LOCUST_TARGET_MODELS", "zipf:1.1:0")):
        add(area, f"{variable}={value}", ["run", *local, "-t", "1s", "-q", "--out", "env_out"], 2, variable,
            env={variable: value}, outputs=("env_out",))
    return table


# -- checks: functions, each why it did not end well, or None -------------------------------------------------

def cardinality_checks() -> list[tuple[str, str, Callable[[], str | None]]]:
    def cloudwatch_249_codes() -> str | None:
        from sm_locust.publish.error_names import ErrorNames
        from sm_locust.publish.interval import Interval
        from sm_locust.publish.metric_data import ERROR_DIMENSION, interval_datums

        names, values = ErrorNames(on_fold=lambda _: None), set()
        for period in range(6):
            codes = {f"E{period * 50 + i:04d}": 1 for i in range(50)}
            interval = Interval(start=1.7e9 + period, elapsed_s=1.0, requests=50, failures=50, hist={5: 50},
                                sum_ms=250.0, run_max_ms=5.0, run_min_ms=5.0, new_max_ms=None, new_min_ms=None,
                                errors=codes)
            for datum in interval_datums(interval, [{"Name": "EndpointName", "Value": "ep"}], 1, names):
                values |= {d["Value"] for d in datum["Dimensions"] if d["Name"] == ERROR_DIMENSION}
        return None if len(values) <= 21 else f"{len(values)} Error values"

    def prometheus_153_codes() -> str | None:
        import locust  # noqa: F401
        from locust.stats import RequestStats

        from prometheus_client import CollectorRegistry, generate_latest

        from sm_locust.invocation import InvocationError
        from sm_locust.publish.prometheus import RunCollector, RunView

        stats = RequestStats()
        for i in range(153):
            stats.log_request("InvokeEndpoint", "ep", 5.0, 10)
            stats.log_error("InvokeEndpoint", "ep", InvocationError(f"Code{i}", "x"))
        registry = CollectorRegistry(auto_describe=False)
        registry.register(RunCollector(RunView(stats=lambda: stats, endpoint=lambda: "ep", users=lambda: 1,
                                               step=lambda: 1, in_flight=lambda: 0.0, llm=lambda: None)))
        labels = {line.split('error="')[1].split('"')[0] for line in generate_latest(registry).decode().splitlines()
                  if line.startswith("sm_locust_failures_total{")}
        return None if len(labels) <= 21 else f"{len(labels)} error labels"

    def long_and_hostile_code() -> str | None:
        from sm_locust.publish.error_names import ErrorNames

        names = ErrorNames().fold({"x" * 10_000: 1, "Model\x1b]0;t\x07Error": 1, "ü" * 100: 1})
        bad = [n for n in names if len(n) > 64 or not all(c.isascii() and (c.isalnum() or c in "_.:/-") for c in n)]
        return f"names {bad!r:.100}" if bad else None

    def other_is_said() -> str | None:
        from sm_locust.publish.error_names import ErrorNames

        said: list[str] = []
        ErrorNames(on_fold=said.append).fold({f"C{i}": 1 for i in range(30)})
        return None if len(said) == 1 and "Other" in said[0] else f"said {said}"

    return [("cardinality", "CloudWatch: 249 codes over a run", cloudwatch_249_codes),
            ("cardinality", "Prometheus: 153 codes in one scrape", prometheus_153_codes),
            ("cardinality", "a 10,000-character code and controls", long_and_hostile_code),
            ("cardinality", "the fold into Other is said once", other_is_said)]


def api_checks(scene: Path, up: str) -> list[tuple[str, str, Callable[[], str | None]]]:
    def raises(call: Callable[[], object], kind: type, needle: str) -> Callable[[], str | None]:
        def check() -> str | None:
            try:
                call()
            except kind as exc:
                return None if needle in str(exc) else f"{type(exc).__name__}: {exc}"
            except Exception as exc:  # noqa: BLE001 - a probe reports what it got
                return f"{type(exc).__name__}: {str(exc)[:200]}"
            return "no error"
        return check

    import sm_locust
    from sm_locust.endpoint.server import LocalEndpoint

    def two_threads_one_folder() -> str | None:
        out = scene / "api_same"
        outcomes: list[object] = []

        def one() -> None:
            try:
                outcomes.append(sm_locust.run("ep", endpoint_url=up, payload=PAYLOAD, run_time="3s", users=1,
                                              out=str(out), progress=False))
            except Exception as exc:  # noqa: BLE001
                outcomes.append(exc)

        threads = [threading.Thread(target=one) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        won = [o for o in outcomes if not isinstance(o, Exception)]
        try:
            if len(won) != 1:
                return f"outcomes {outcomes!r:.200}"
            return None if (out / "summary.json").is_file() else "the winner's folder is gone"
        finally:
            shutil.rmtree(out, ignore_errors=True)

    return [
        ("python api", "run(out=b'x')", raises(lambda: sm_locust.run("ep", endpoint_url=up, payload=PAYLOAD, out=b"x"),
                                               TypeError, "out=")),
        ("python api", "compare(out=123)", raises(lambda: sm_locust.compare([str(scene / "run")], out=123), TypeError,
                                                  "out=")),
        ("python api", "sweep(yes='maybe')", raises(lambda: sm_locust.sweep(str(scene / "sweep.yaml"), yes="maybe"),
                                                    TypeError, "yes=")),
        ("python api", "LocalEndpoint(max_concurrency='x')", raises(lambda: LocalEndpoint(max_concurrency="x"),
                                                                    TypeError, "max_concurrency=")),
        ("python api", "RunResult.figures(cloudwatch='yes')",
         raises(lambda: sm_locust.load(str(scene / "run")).figures(cloudwatch="yes"), TypeError, "cloudwatch=")),
        ("python api", "create_client(None)", raises(lambda: sm_locust.create_client(None, None, "ep"), TypeError,
                                                     "transport name")),
        ("python api", "two run(out=same) from threads", two_threads_one_folder),
    ]


def endpoint_checks(triton_url: str) -> list[tuple[str, str, Callable[[], str | None]]]:
    def nested(depth: int) -> Callable[[], str | None]:
        def check() -> str | None:
            body = b'{"inputs": ' + b"[" * depth + b"]" * depth + b"}"
            request = urllib.request.Request(triton_url + "/invocations", data=body,
                                             headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(request, timeout=10)
                return "answered 2xx"
            except urllib.error.HTTPError as exc:  # the container's 400, as SageMaker's runtime wraps it: ModelError
                text = exc.read()
                try:
                    doc = json.loads(text)
                except ValueError:
                    return f"{exc.code} not in the JSON error format: {text[:80]!r}"
                message = str(doc.get("message") if isinstance(doc, dict) else doc)
                if exc.code == 424 and "client error (400)" in message and "nested more" in message:
                    return None
                return f"status {exc.code}: {text[:120]!r}"
        return check

    return [("answers", f"Triton request nested {d:,} deep", nested(d)) for d in (1_025, 5_000, 50_000)]


def signal_checks() -> list[tuple[str, str, Callable[[], str | None]]]:
    def serve_sighup() -> str | None:
        from sm_locust.util.ports import free_port

        proc = subprocess.Popen([PY, "-m", "sm_locust", "serve", "--port", str(free_port()), "--workers", "2"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        time.sleep(4)
        proc.send_signal(signal.SIGHUP)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            return "still serving 10 s after SIGHUP"
        return None if proc.returncode == 129 and b"Traceback" not in err else f"exit {proc.returncode}"

    return [("signals", "serve on SIGHUP", serve_sighup)]


def all_checks(scene: Path, up: str, triton: str) -> list[tuple[str, str, Callable[[], str | None]]]:
    return [*cardinality_checks(), *api_checks(scene, up), *endpoint_checks(triton), *signal_checks()]


def run_check(index: int, scene: Path, up: str, triton: str, env: dict[str, str]) -> str | None:
    """Check `index` in a child process of its own (an in-process check imports Locust, whose gevent patching
    would change the probe's own threads), under the 3 GB address space; more than 90 s fails it."""
    started = time.monotonic()
    try:
        done = subprocess.run([PY, __file__, "--check", str(index), "--scene", str(scene), "--up", up, "--triton",
                               triton], env=env, capture_output=True, text=True, timeout=90, preexec_fn=base._bounded,
                              cwd=scene)  # what a check writes lands in the scene (and `-m` finds no sm_locust here)
    except subprocess.TimeoutExpired:
        return "not done in 90 s"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return f"the check exited {done.returncode}: {done.stderr.strip()[-300:]}"
    verdict = json.loads(lines[-1])["verdict"]
    elapsed = time.monotonic() - started
    return verdict if verdict or elapsed < 60 else f"took {elapsed:.0f} s"


def check_main(index: int, scene: Path, up: str, triton: str) -> int:
    """The child's side of `run_check`: one check, its verdict as JSON on the last line."""
    _, _, fn = all_checks(scene, up, triton)[index]
    try:
        verdict = fn()
    except Exception as exc:  # noqa: BLE001 - a probe reports what it got
        verdict = f"raised {type(exc).__name__}: {str(exc)[:200]}"
    print(json.dumps({"verdict": verdict}), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="match", default="", help="only the cases whose name contains this")
    parser.add_argument("--check", type=int, help=argparse.SUPPRESS)  # run_check's child
    parser.add_argument("--scene", help=argparse.SUPPRESS)
    parser.add_argument("--up", help=argparse.SUPPRESS)
    parser.add_argument("--triton", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.check is not None:
        return check_main(args.check, Path(args.scene), args.up, args.triton)
    from sm_locust.endpoint.faults import EndpointConfig
    from sm_locust.endpoint.server import LocalEndpoint

    work = Path(tempfile.mkdtemp(prefix="sm-locust-probe5-"))
    scene = work / "scene"
    scene.mkdir()
    build_scene(scene)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SM_LOCUST_", "SAGEMAKER_"))}
    env.update({"AWS_ACCESS_KEY_ID": "probe", "AWS_SECRET_ACCESS_KEY": "probe", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_CONFIG_FILE": str(work / "aws_config"), "AWS_SHARED_CREDENTIALS_FILE": str(work / "aws_creds"),
                "AWS_EC2_METADATA_DISABLED": "true", "PYTHONUNBUFFERED": "1"})
    os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})  # the in-process checks
    endpoints = {"up": LocalEndpoint(max_concurrency=4, service_time_ms=5),
                 "triton": LocalEndpoint(EndpointConfig(port=0, protocol="triton"))}
    server = hostile_server()
    results: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    try:
        for ep in endpoints.values():
            ep.start()
        urls = {"up": endpoints["up"].url, "hostile": f"http://127.0.0.1:{server.server_address[1]}"}
        table = [c for c in cases(urls) if args.match in c.name]
        checks = [(i, area, name) for i, (area, name, _) in
                  enumerate(all_checks(scene, urls["up"], endpoints["triton"].url))
                  if args.match in f"{area}: {name}"]
        print(f"sm-locust probe, round 5: {len(table)} command cases and {len(checks)} checks in {scene}", flush=True)
        for case in table:
            verdict = base.run_case(case, scene, env, {})
            results[case.group].append((case.name, verdict))
            if verdict:
                print(f"  NOT WELL  {case.name}: {verdict}", flush=True)
        for index, area, name in checks:
            verdict = run_check(index, scene, urls["up"], endpoints["triton"].url, env)
            results[area].append((f"{area}: {name}", verdict))
            if verdict:
                print(f"  NOT WELL  {area}: {name}: {verdict}", flush=True)
    finally:
        for ep in endpoints.values():
            ep.stop()
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{'area':<12} {'cases':>6} {'ended well':>11} {'share':>7}")
    total = well = 0
    for area in AREAS:
        rows = results.get(area, [])
        ok = sum(1 for _, v in rows if v is None)
        total, well = total + len(rows), well + ok
        share = f"{100.0 * ok / len(rows):.0f} %" if rows else "-"
        print(f"{area:<12} {len(rows):>6} {ok:>11} {share:>7}")
    print(f"{'all':<12} {total:>6} {well:>11} {100.0 * well / total if total else 0.0:>6.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
