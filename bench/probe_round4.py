"""The round-4 probe (issue 32): bad input and faults in areas bench/probe.py and tests/cli/test_bad_input.py
have not tried, each judged "ends well" by bench/probe.py's rules.

Areas: payload files of odd kinds; SM_LOCUST_* and container variables; keys in a locust.conf; web UI form
values (a plain Locust with its web UI, `POST /swarm`); unicode in every name; huge, negative and zero values
for the numeric options; hostile run folders for report / compare / smoke; signals at odd moments; output
places (symlink loops, devices, long names); commands run at the same time.

A case ends well when its exit code is the one expected (2 bad input, 1 a run that failed, 0 a legitimate
input that works, 128 + N a signal), stderr holds one line from sm-locust naming the problem and no
traceback, nothing it started is left running, the scene is unchanged but for its outputs, and, for a
refusal, it ended within 10 s under a 3 GB address space (bench/probe.py's `bounded`). A web UI case ends
well when the form is refused with a message naming the field (or, legitimate, accepted), the Locust
process is still up and its output holds no traceback.

    .venv/bin/python bench/probe_round4.py             # every case (~10 min on the 2-core box)
    .venv/bin/python bench/probe_round4.py -k unicode  # the cases whose name contains "unicode"

Prints one line per case that did not end well, then the table per area (cases, ended well, share).
Needs root for the cases on a tmpfs; they are skipped otherwise. Figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/probe.py: the case runner and its judge
import probe as base  # noqa: E402
from probe import BOUNDED_S, PAYLOAD, PY, ROOT, Case  # noqa: E402

from sm_locust.testing.mounts import mount_tmpfs, unmount  # noqa: E402

AREAS = ("payload files", "environment", "locust.conf", "web UI", "unicode", "numbers", "run folders", "signals",
         "output places", "concurrency")
LOCUSTFILE = str(ROOT / "locustfiles" / "sagemaker.py")


_judge = base.judge


def judge(case: Case, code, err: str, *args, **kwargs):
    """bench/probe.py's judge; for plain `locust`, Locust's own usage error (`locust: error: argument ...`) is the
    one line as much as an `sm-locust: error:` line is (its parser refuses before sm-locust's checks run)."""
    if case.name.startswith("locust.conf: plain locust") and not any(
            line.startswith("sm-locust") for line in err.splitlines()):
        err = "\n".join(f"sm-locust(locust) {line}" for line in err.splitlines() if ": error:" in line)
    return _judge(case, code, err, *args, **kwargs)


base.judge = judge


def build_scene(work: Path) -> None:
    base.build_scene(work)
    (work / "loop").symlink_to("loop")
    (work / "dangling.json").symlink_to("nowhere.json")
    hidden = work / "hidden_only"
    hidden.mkdir()
    (hidden / ".body.json").write_text("{}")
    nested = work / "nested_only"
    (nested / "sub").mkdir(parents=True)
    (nested / "sub" / "body.json").write_text("{}")
    import numpy

    numpy.save(work / "objects.npy", numpy.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    (work / "truncated.npy").write_bytes(b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', ")
    numpy.savez(work / "empty.npz")
    numpy.savez(work / "objects.npz", x=numpy.array([{"a": 1}], dtype=object))
    (work / "deep.jsonl").write_text(json.dumps({"Body": "1"})[:-1] + ', "x": ' + "[" * 50_000 + "]" * 50_000 + "}\n")
    (work / "bom.jsonl").write_text('{"Body": "{}"}\n', encoding="utf-8-sig")
    (work / "empty.pkl").write_bytes(b"")
    (work / "truncated.pkl").write_bytes(b"\x80\x05\x95\x10\x00\x00")
    (work / "new\nline.json").write_text((Path(PAYLOAD)).read_text())
    (work / "ünïcode.json").write_text((Path(PAYLOAD)).read_text())
    (work / "bom_payload.csv").write_text("1,2,3\n", encoding="utf-8-sig")
    (work / "raising.py").write_text("def make():\n    raise RuntimeError('boom from the user module')\n")
    (work / "endless.py").write_text("def make():\n    while True:\n        yield b'{}'\n")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(work / "a.sock"))
    sock.close()
    for name, text in {
        "conf_think_nan": "think-time = nan\n", "conf_mix_inf": "target-models = a=1e308,b=1e308\n",
        "conf_payload_fifo": f"payload = {work / 'fifo'}\n", "conf_unknown": "no-such-key = 1\n",
        "conf_users_huge": "users = 1000000000\n", "conf_processes": "processes = 64\n",
        "conf_url": "endpoint-url = ftp://x\n", "conf_bom": "\ufeffthink-time = 0\n",
        "conf_custom_unicode": "custom-attributes = a=ü\n",
    }.items():
        (work / name).mkdir()
        (work / name / "locust.conf").write_text(text)
    (work / "conf_binary").mkdir()
    (work / "conf_binary" / "locust.conf").write_bytes(os.urandom(512))
    deep = work / "deep_summary"
    deep.mkdir()
    (deep / "summary.json").write_text("[" * 100_000 + "]" * 100_000)
    nan_run = work / "nan_run"
    nan_run.mkdir()
    (nan_run / "summary.json").write_text('{"schema": 1, "totals": {"requests": NaN, "failures": 0, "rps": Infinity}}')
    fifo_run = work / "fifo_run"
    fifo_run.mkdir()
    os.mkfifo(fifo_run / "summary.json")
    binary_run = work / "binary_run"
    binary_run.mkdir()
    (binary_run / "summary.json").write_bytes(os.urandom(2048))
    hostile_run = work / "hostile_run"
    shutil.copytree(work / "run", hostile_run)
    summary = json.loads((hostile_run / "summary.json").read_text())
    summary["endpoint"] = "ep\x1b]0;pwned\x07"
    summary["totals"]["errors"] = {"ModelError\x1b[2J": 3}
    summary["totals"]["failures"] = 3
    (hostile_run / "summary.json").write_text(json.dumps(summary))
    (hostile_run / "locust_failures.csv").write_text(
        'Method,Name,Error,Occurrences\nInvokeEndpoint,ep,"ModelError: \x1b]52;c;ZXZpbA==\x07 boom",3\n')
    bom_history = work / "bom_history"
    shutil.copytree(work / "run", bom_history)
    (bom_history / "locust_stats_history.csv").write_text(
        "Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,95%,Total Request Count,Total Failure Count,"
        "Total Median Response Time,Total Average Response Time\n1000,2,,Aggregated,40.0,0.0,20,30,40,0,20,21\n",
        encoding="utf-8-sig")
    (work / "deep_prices.json").write_text("[" * 100_000 + "]" * 100_000)
    os.mkfifo(work / "prices_fifo.json")
    (work / "link_to_file").symlink_to("afile")
    (work / "unicode_sweep.yaml").write_text((work / "sweep.yaml").read_text().replace("name: probe",
                                                                                         "name: prøbe-ünï"))
    big = work / "big_payload.json"  # a payload that takes a moment to read: signals during the checks
    with open(big, "wb") as fh:
        fh.write(b'{"instances": [' + b"1," * 2_900_000 + b"1]}")


def cases(urls: dict[str, str], scene: Path) -> list[Case]:
    up, mme = urls["up"], urls["mme"]
    local = ["--endpoint-name", "ep", "--endpoint-url", up, "--payload", PAYLOAD]
    run = ["run", *local, "-t", "1s", "-q"]
    table: list[Case] = []

    def add(area: str, name: str, argv: list[str], code: int | tuple[int, ...] = 2, *needles: str, **extra) -> None:
        if code == 2 and not extra.get("shell") and not extra.get("signal_after"):
            extra.setdefault("bounded", True)
            extra.setdefault("timeout", BOUNDED_S)
        extra.setdefault("timeout", 90.0)
        table.append(Case(f"{area}: {name}", argv, code, needles, group=area, **extra))

    def payload_run(source: str, out: str) -> list[str]:
        return ["run", "--endpoint-name", "ep", "--endpoint-url", up, "--payload", source, "-t", "1s", "-q", "--out",
                out]

    # -- payload files of odd kinds ---------------------------------------------------------------
    area = "payload files"
    for name, source, code, needle in (
            ("symlink loop", "loop", 2, "loop"), ("dangling symlink", "dangling.json", 2, "dangling.json"),
            ("/dev/null", "/dev/null", 2, "not a regular file"), ("a unix socket", "a.sock", 2, "a.sock"),
            ("folder of hidden files", "hidden_only", 2, "hidden_only"),
            ("folder of folders", "nested_only", 2, "nested_only"),
            ("npy of objects (a pickle)", "objects.npy", 2, "objects.npy"),
            ("truncated npy", "truncated.npy", 2, "truncated.npy"), ("empty npz", "empty.npz", 2, "empty.npz"),
            ("npz of objects", "objects.npz", 2, "objects.npz"),
            ("jsonl nested 50,000 deep", "deep.jsonl", 2, "deep.jsonl"), ("empty pkl", "empty.pkl", 2, "empty.pkl"),
            ("truncated pkl", "truncated.pkl", 2, "truncated.pkl"), ("empty path", "", 2, "--payload"),
            ("module that does not exist", "no_such_module_x:make", 2, "no_such_module_x"),
            ("module:function that raises", "raising.py:make", 2, "raising.py"),
            ("module:function that never ends", "endless.py:make", (1, 2), "")):  # CALLABLE_LIMIT bodies, then sent
        add(area, name, payload_run(source, "pf"), code, *((needle,) if needle else ()), outputs=("pf",))
    for name, source in (("jsonl with a BOM works", "bom.jsonl"),
                         ("a file name with a newline works", "new\nline.json"),
                         ("a unicode file name works", "ünïcode.json"),
                         ("a CSV body with a BOM is sent", "bom_payload.csv")):
        add(area, name, payload_run(source, "pf"), (0, 1), outputs=("pf",))
    add(area, "/proc/self/status", payload_run("/proc/self/status", "pf"), (1, 2), outputs=("pf",))

    # -- SM_LOCUST_* and container variables ------------------------------------------------------
    area = "environment"
    for name, variables, code, needle in (
            ("think time 1e308", {"SM_LOCUST_THINK_TIME": "1e308"}, (0, 1, 2), ""),
            ("connect timeout 1e308", {"SM_LOCUST_CONNECT_TIMEOUT": "1e308"}, (0, 2), ""),
            ("read timeout 1e-300", {"SM_LOCUST_READ_TIMEOUT": "1e-300"}, (1, 2), ""),
            ("seed 1e30", {"SM_LOCUST_SEED": "1e30"}, 2, "SM_LOCUST_SEED"),
            ("endpoint name é", {"SM_LOCUST_ENDPOINT_NAME": "épt"}, 2, "--endpoint-name"),
            ("custom attributes with ESC", {"SM_LOCUST_CUSTOM_ATTRIBUTES": "a=\x1b]0;x\x07"}, 2,
             "--custom-attributes"),
            ("payload a fifo", {"SM_LOCUST_PAYLOAD": "fifo"}, 2, "not a regular file"),
            ("upload not s3", {"SM_LOCUST_UPLOAD": "ftp://x"}, 2, "s3://"),
            ("region with ESC", {"AWS_REGION": "us-east-1\x1b[2J"}, 2, "region"),
            ("transport empty", {"SM_LOCUST_TRANSPORT": ""}, 0, ""),
            ("target models with a newline", {"SM_LOCUST_TARGET_MODELS": "a\nb"}, 2, "--target-models"),
            ("split 1e6", {"SM_LOCUST_SPLIT": "1000000"}, 2, "--split"),
            ("batch size 1e9 (all the rows) works", {"SM_LOCUST_BATCH_SIZE": "1000000000"}, 0, ""),
            ("think time with spaces works", {"SM_LOCUST_THINK_TIME": " 0.01 "}, 0, ""),
            ("stop at knee TRUE works", {"SM_LOCUST_STOP_AT_KNEE": "TRUE"}, 0, ""),
            ("max in flight without an open loop", {"SM_LOCUST_MAX_IN_FLIGHT": "1000000000"}, 2, "--max-in-flight"),
            ("target models from a mix works", {"SM_LOCUST_TARGET_MODELS": "uniform:3", "SM_LOCUST_ENDPOINT_URL": mme},
             0, "")):
        argv = run if variables.get("SM_LOCUST_PAYLOAD") is None else ["run", *local[:-2], "-t", "1s", "-q"]
        if "SM_LOCUST_ENDPOINT_URL" in variables:
            argv = ["run", "--endpoint-name", "ep", "--payload", PAYLOAD, "-t", "1s", "-q"]
        if "SM_LOCUST_ENDPOINT_NAME" in variables:  # the flag would win over the variable
            argv = ["run", "--endpoint-url", up, "--payload", PAYLOAD, "-t", "1s", "-q"]
        needles = (needle,) if needle else ()
        add(area, name, [*argv, "--out", "env"], code, *needles, env=variables, outputs=("env",),
            inert="ESC" in name)
    add(area, "serve SAGEMAKER_BIND_TO_PORT 99999", ["serve"], 2, "port", env={"SAGEMAKER_BIND_TO_PORT": "99999"})
    add(area, "serve SAGEMAKER_MODEL_SERVER_WORKERS abc", ["serve"], 2, "SAGEMAKER_MODEL_SERVER_WORKERS",
        env={"SAGEMAKER_MODEL_SERVER_WORKERS": "abc"})
    add(area, "serve SAGEMAKER_MODEL_SERVER_WORKERS 0", ["serve"], 2, "workers",
        env={"SAGEMAKER_MODEL_SERVER_WORKERS": "0"})

    # -- keys in a locust.conf (read by Locust from the working folder) ----------------------------
    area = "locust.conf"
    for folder, run_code, plain_code, needle in (
            ("conf_think_nan", 2, 2, "--think-time"), ("conf_mix_inf", 2, 2, "--target-models"),
            ("conf_payload_fifo", 2, 2, "--payload"), ("conf_unknown", 2, 2, "no-such-key"),
            ("conf_users_huge", 0, 2, ""),  # sm-locust run gives Locust its -u (default 1): the flag wins
            ("conf_processes", 2, 2, "--processes"),
            ("conf_url", (1, 2), 2, "--endpoint-url"),  # run: its own checks go to AWS (no locust.conf read there)
            ("conf_binary", 2, 2, "locust.conf"), ("conf_custom_unicode", 2, 2, "--custom-attributes"),
            ("conf_bom", 0, 0, "")):
        payload = "" if folder == "conf_payload_fifo" else f"--payload {PAYLOAD}"
        url = "" if folder == "conf_url" else f"--endpoint-url {up}"
        cwd_run = f"cd {folder} && {{sm}} run --endpoint-name ep {url} {payload} -t 1s -q --out ../conf_out"
        needles = (needle,) if needle and run_code == 2 else ()
        add(area, f"sm-locust run, {folder[5:]}", [], run_code, *needles, shell=cwd_run, outputs=("conf_out",),
            bounded=run_code != 0, timeout=BOUNDED_S if run_code != 0 else 90.0)
        plain = (f"cd {folder} && {shlex.quote(PY)} -m locust -f {LOCUSTFILE} --headless -t 1s --endpoint-name ep "
                 f"{url} {payload} --sm-out ../conf_out")
        plain_needle = {"conf_users_huge": "--users", "conf_payload_fifo": "not a regular file"}.get(folder, needle)
        needles = (plain_needle,) if plain_code == 2 else ()
        add(area, f"plain locust, {folder[5:]}", [], plain_code, *needles, shell=plain, outputs=("conf_out",),
            bounded=plain_code == 2, timeout=BOUNDED_S if plain_code == 2 else 90.0)

    # -- unicode in every name ----------------------------------------------------------------------
    area = "unicode"
    for name, extra, needle in (
            ("endpoint name", ["--endpoint-name", "épt"], "--endpoint-name"),
            ("target variant", ["--target-variant", "vär"], "--target-variant"),
            ("inference id", ["--inference-id", "ïd"], "--inference-id"),
            ("content type", ["--content-type", "application/jsön"], "--content-type"),
            ("accept", ["--accept", "tëxt/csv"], "--accept"),
            ("custom attributes", ["--custom-attributes", "a=ü"], "--custom-attributes"),
            ("target model with a bidi override", ["--target-model", "m\u202eodel"], "--target-model"),
            ("inference component", ["--inference-component", "cömp"], "--inference-component"),
            ("region", ["--region", "üs-east-1"], "--region"),
            ("aws profile", ["--aws-profile", "prøfile"], "prøfile"),
            ("upload bucket", ["--upload", "s3://bücket/x"], "--upload")):
        add(area, f"run {name}", [*run, *extra], 2, needle)
    add(area, "serve endpoint name", ["serve", "--endpoint-name", "épt"], 2, "--endpoint-name")
    add(area, "report endpoint name", ["report", "run", "--no-cloudwatch", "--endpoint-name", "épt"], 2,
        "--endpoint-name")
    add(area, "run --out a unicode folder works", [*run, "--out", "ünï_out"], 0, outputs=("ünï_out",))
    add(area, "sweep with a unicode name plans", ["sweep", "unicode_sweep.yaml", "--plan"], 0)
    add(area, "smoke --junit a unicode path works", ["smoke", "--run-dir", "run", "--junit", "jünit.xml"], (0, 1),
        outputs=("jünit.xml",))

    # -- huge, negative and zero numbers --------------------------------------------------------------
    area = "numbers"
    for name, extra, code, needle in (
            ("users 1e9", ["-u", "1000000000"], 2, "--users"),
            ("spawn rate 1e308 works", ["-u", "2", "-r", "1e308"], 0, ""),
            ("think time 1e308", ["--think-time", "1e308"], (0, 2), ""),
            ("connect timeout 1e308", ["--connect-timeout", "1e308"], (0, 2), ""),
            ("read timeout 1e-300", ["--read-timeout", "1e-300"], (1, 2), ""),
            ("rate per user 1e-300", ["--shape", "open", "--target-rps", "5", "--rate-per-user", "1e-300"], 2,
             "--rate-per-user"),
            ("target rps 1e308", ["--shape", "open", "--target-rps", "1e308"], 2, "--target-rps"),
            ("max in flight 1e9 works", ["--shape", "open", "--target-rps", "5", "--max-in-flight", "1000000000"], 0,
             ""),
            ("batch size 1e9 (all the rows) works", ["--batch-size", "1000000000"], 0, ""),
            ("split 1e6", ["--split", "1000000"], 2, "--split"),
            ("payload seed 2^70 works", ["--payload-seed", str(2 ** 70)], 0, ""),
            ("seed 2^70 works", ["--seed", str(2 ** 70)], 0, ""),
            ("step max users 1e9", ["--shape", "step", "--max-users", "1000000000"], 2, "--max-users"),
            ("step seconds 1e308 (-t ends it) works", ["--shape", "step", "--step-seconds", "1e308"], 0, ""),
            ("progress every 1e308 s works", ["--sm-progress", "1e308"], (0, 2), ""),
            ("spawn rate 1e-300", ["-u", "1", "-r", "1e-300"], (0, 1, 2), ""),
            ("max duration 1e308", ["--shape", "open", "--target-rps", "5", "--max-duration", "1e308"], (0, 2), ""),
            ("think time -0 works", ["--think-time", "-0"], 0, ""),
            ("users -0", ["-u", "-0"], 2, "--users")):
        needles = (needle,) if needle else ()
        argv = [*run, *extra] if "-t" not in extra else ["run", *local, "-q", *extra]
        add(area, f"run {name}", [*argv, "--out", "num"], code, *needles, outputs=("num",))
    for name, argv, code, needle in (
            ("report period 6e8", ["report", "run", "--no-cloudwatch", "--period", "600000000", "--out", "rep",
                                   "--no-summary-update"], (0, 1, 2), ""),
            ("report instance count 1e9 works", ["report", "run", "--no-cloudwatch", "--instance-count", "1000000000",
                                                 "--instance-type", "ml.c5.xlarge", "--out", "rep",
                                                 "--no-summary-update"], (0, 1), ""),
            ("smoke max p95 1e308 works", ["smoke", "--run-dir", "run", "--max-p95-ms", "1e308"], 0, ""),
            ("smoke tolerance 1e308", ["smoke", "--run-dir", "run", "--baseline", "run", "--tolerance", "1e308"],
             (0, 2), ""),
            ("demo max users 1e9", ["demo", "--max-users", "1000000000", "--out", "rep"], 2, "--max-users"),
            ("serve model size 1e308", ["serve", "--multi-model", "--model-size-mb", "1e308"], 2, "--model-size-mb"),
            ("compare safety factor 1e-300 works", ["compare", "run", "--safety-factor", "1e-300", "--out", "rep"],
             (0, 1), "")):
        needles = (needle,) if needle else ()
        add(area, name, argv, code, *needles, outputs=("rep",))
    for name, argv, sig_code in (("run -t 99999999d", [*run[:-3], "-t", "99999999d", "-q", "--out", "rep"], 143),
                                 ("demo --step-seconds 1e308", ["demo", "--step-seconds", "1e308", "--out", "rep",
                                                                "--no-cloudwatch"], 143)):
        add(area, f"{name} runs until stopped", argv, sig_code, "SIGTERM", signal_after="TERM",
            ready="rep/summary.json", outputs=("rep",))
    for name, flags in (("latency 1e308 ms", "--latency-ms 1e308"), ("cold start 1e308 ms", "--cold-start-ms 1e308"),
                        ("not ready for 1e308 s", "--not-ready-s 1e308"),
                        ("max batch size 1e9", "--max-batch-size 1000000000"),
                        ("llm max sequences 1e9", "--llm --llm-max-sequences 1000000000"),
                        ("components of 1e9 copies", "--inference-components a:1000000000")):
        add(area, f"serve {name} answers or waits, no traceback", [], 143, outputs=("serve.out", "serve.err"),
            shell=f"{{sm}} serve --port 0 {flags} >serve.out 2>serve.err & p=$!; "
                  "for i in $(seq 100); do grep -q ready serve.out && break; sleep 0.2; done; "
                  "url=$(grep -o 'http://[0-9.:]*' serve.out | head -1); "
                  "curl -s -m 3 -H 'Content-Type: application/json' -H 'X-Amzn-SageMaker-Inference-Component: a' "
                  "-d '{{\"inputs\": \"hi\"}}' $url/endpoints/ep/invocations >/dev/null; "
                  "kill -TERM $p; wait $p; rc=$?; grep -q Traceback serve.err && exit 9; exit $rc")

    # -- hostile run folders ------------------------------------------------------------------------
    area = "run folders"
    for command, target, code, needle in (
            ("report", "deep_summary", 2, "deep_summary"), ("smoke", "deep_summary", 2, "deep_summary"),
            ("compare", "deep_summary", 2, "deep_summary"), ("report", "nan_run", 2, "nan_run"),
            ("smoke", "nan_run", 2, "nan_run"), ("report", "fifo_run", 2, "fifo_run"),
            ("smoke", "fifo_run", 2, "fifo_run"), ("report", "binary_run", 2, "binary_run"),
            ("report", "loop", 2, "loop")):
        argv = {"report": ["report", target, "--no-cloudwatch"], "smoke": ["smoke", "--run-dir", target],
                "compare": ["compare", target, "--out", "cmp"]}[command]
        add(area, f"{command} {target}", argv, code, needle, outputs=("cmp",))
    add(area, "report --prices nested 100,000 deep", ["report", "run", "--no-cloudwatch", "--prices",
                                                      "deep_prices.json"], 2, "deep_prices.json")
    add(area, "report --prices a fifo", ["report", "run", "--no-cloudwatch", "--prices", "prices_fifo.json"], 2,
        "prices_fifo.json")
    add(area, "smoke --baseline a fifo run", ["smoke", "--run-dir", "run", "--baseline", "fifo_run"], 2, "fifo_run")
    add(area, "report of hostile text is inert", ["report", "hostile_run", "--no-cloudwatch", "--out", "rep",
                                                  "--no-summary-update"], (0, 1), outputs=("rep",), inert=True)
    add(area, "smoke of hostile text is inert", ["smoke", "--run-dir", "hostile_run", "--junit", "h.xml"], (0, 1),
        outputs=("h.xml",), inert=True)
    add(area, "compare of hostile text is inert", ["compare", "hostile_run", "--out", "rep"], (0, 1), outputs=("rep",),
        inert=True)
    add(area, "report with a BOM history works", ["report", "bom_history", "--no-cloudwatch", "--out", "rep",
                                                  "--no-summary-update"], (0, 1), outputs=("rep",))
    add(area, "compare a run with itself", ["compare", "run", "run", "--out", "rep"], (0, 1, 2), outputs=("rep",))

    # -- signals at odd moments --------------------------------------------------------------------
    area = "signals"
    big_run = ["run", "--endpoint-name", "ep", "--endpoint-url", up, "--payload", "big_payload.json", "-t", "30s", "-q",
               "--out", "sig"]
    long_run = ["run", *local, "-u", "2", "-t", "60s", "-q", "--out", "sig"]
    add(area, "SIGTERM 4 s into a run of a 6 MB payload", big_run, 143, "SIGTERM", signal_after="TERM", ready="-",
        outputs=("sig",))
    add(area, "SIGHUP to a run", long_run, (129, 130, 143), signal_after="HUP", ready="sig/summary.json",
        outputs=("sig",))
    for name, command, code in (
            # the scene's run folder has no failures CSV: a report that finishes first names that gap, exit 1
            ("SIGTERM 1 s into a report", "{sm} report run --no-cloudwatch --out sig --no-summary-update", (0, 1, 143)),
            ("SIGINT 0.3 s into a sweep --plan", "{sm} sweep long.yaml --plan", (0, 130)),
            ("SIGTERM 0.5 s into serve", "{sm} serve --port 0 --workers 2", 143),
            ("SIGTERM 0.5 s into a run's checks", f"{{sm}} {shlex.join(big_run)}", (2, 143)),
            ("SIGTERM 2 s into a demo", "{sm} demo --out sig --no-cloudwatch --step-seconds 30", 143)):
        delay = name.split(" ")[1]
        sig = name.split(" ")[0][3:]
        add(area, name, [], code, outputs=("sig",),
            shell=f"{command} >/dev/null & p=$!; sleep {delay}; kill -{sig} $p; wait $p")
    add(area, "two SIGTERMs to a run", [], 143, "SIGTERM", outputs=("sig",),
        shell=f"{{sm}} {shlex.join(long_run)} >/dev/null & p=$!; "
              "for i in $(seq 300); do [ -f sig/summary.json ] && break; sleep 0.2; done; "
              "kill -TERM $p; sleep 0.3; kill -TERM $p; wait $p")
    add(area, "SIGKILL, then a rerun into the folder with --overwrite", [], 0, outputs=("sig",),
        shell=f"{{sm}} {shlex.join(long_run)} >/dev/null 2>&1 & p=$!; "
              "for i in $(seq 300); do [ -f sig/summary.json ] && break; sleep 0.2; done; kill -KILL $p; wait $p; "
              f"sleep 2; {{sm}} {shlex.join(run)} --out sig --overwrite >/dev/null")
    add(area, "stdout closed under a run", [], (0, 141), outputs=("sig",),
        shell=f"set -o pipefail; {{sm}} {shlex.join(run)} --out sig | head -c 0")

    # -- output places --------------------------------------------------------------------------------
    area = "output places"
    for name, out in (("a symlink loop", "loop"), ("/dev/null", "/dev/null"), ("a 300-character name", "x" * 300),
                      ("under a fifo", "fifo/x"), ("/proc/self", "/proc/self"), ("a symlink to a file", "link_to_file"),
                      ("a dangling symlink", "dangling.json")):
        add(area, f"run --out {name}", [*run, "--out", out], 2, "--out")
    add(area, "report --out a symlink loop", ["report", "run", "--no-cloudwatch", "--out", "loop"], 2, "--out")
    add(area, "compare --out /dev/null", ["compare", "run", "--out", "/dev/null"], 2, "--out")
    add(area, "sweep --out a symlink loop", ["sweep", "sweep.yaml", "--out", "loop"], 2, "--out")
    add(area, "smoke --junit /dev/full", ["smoke", "--run-dir", "run", "--junit", "/dev/full"], (1, 2), "--junit")
    add(area, "smoke --junit a 300-character name", ["smoke", "--run-dir", "run", "--junit", "j" * 300 + ".xml"], 2,
        "--junit")
    add(area, "run --out with a newline works", [*run, "--out", "new\nline_out"], 0, outputs=("new\nline_out",))
    add(area, "demo --out a read-only place", ["demo", "--out", "{ro}/demo"], 2, "--out", needs_root=True)

    # -- commands at the same time ----------------------------------------------------------------------
    area = "concurrency"
    add(area, "two reports of one run at once", [], 0, outputs=("rc",),
        shell="cp -r full_run rc; {sm} report rc --no-cloudwatch >/dev/null & a=$!; {sm} report rc --no-cloudwatch "
              ">/dev/null & b=$!; wait $a; x=$?; wait $b; y=$?; "
              "python3 -c \"import json; json.load(open('rc/summary.json'))\" || exit 5; exit $((x + y))", timeout=180)
    add(area, "a report and a compare of one run at once", [], 0, outputs=("rc", "cc"),
        shell="cp -r full_run rc; {sm} report rc --no-cloudwatch >/dev/null & a=$!; "
              "{sm} compare rc --out cc >/dev/null & b=$!; wait $a; x=$?; wait $b; y=$?; exit $((x + y))", timeout=180)
    add(area, "two runs into reports/ started together", [], 0, outputs=("reports",),
        shell=f"{{sm}} {shlex.join(run)} >/dev/null & a=$!; {{sm}} {shlex.join(run)} >/dev/null & b=$!; "
              "wait $a; x=$?; wait $b; y=$?; n=$(ls reports | wc -l); [ $n = 2 ] || exit 7; exit $((x + y))")
    add(area, "two sweep --plan at once", [], 0,
        shell="{sm} sweep sweep.yaml --plan >/dev/null & a=$!; {sm} sweep sweep.yaml --plan >/dev/null & b=$!; "
              "wait $a; x=$?; wait $b; y=$?; exit $((x + y))")
    add(area, "two smokes writing one JUnit file", [], 0, outputs=("j.xml",),
        shell="{sm} smoke --run-dir run --junit j.xml >/dev/null & a=$!; {sm} smoke --run-dir run --junit j.xml "
              ">/dev/null & b=$!; wait $a; x=$?; wait $b; y=$?; "
              "python3 -c \"import xml.etree.ElementTree as E; E.parse('j.xml')\" || exit 6; exit $((x + y))")
    return table


# -- the web UI: a plain Locust with its web UI, its start form posted --------------------------------

WEB_FORMS = [  # name, form fields beside the start form's own, expected: refused (needle) or None (accepted)
    ("think time nan", {"think_time": "nan"}, "--think-time"),
    ("think time 1e308", {"think_time": "1e308"}, None),
    ("read timeout 0", {"read_timeout": "0"}, "--read-timeout"),
    ("target models weights overflow", {"target_models": "a=1e308,b=1e308"}, "--target-models"),
    ("target models a file", {"target_models": "weights.csv"}, "--target-models"),
    ("target models non-ascii", {"target_models": "modèle"}, "--target-models"),
    ("inference components a.b", {"inference_components": "a.b,c"}, "--inference-components"),
    ("target model non-ascii", {"target_model": "modèle"}, "--target-model"),
    ("custom attributes CRLF", {"custom_attributes": "a=b\r\nX-Evil: 1"}, "--custom-attributes"),
    ("content type unicode", {"content_type": "application/jsön"}, "--content-type"),
    ("inference id 65 characters", {"inference_id": "i" * 65}, "--inference-id"),
    ("target variant with a space", {"target_variant": "All Traffic"}, "--target-variant"),
    ("endpoint url", {"endpoint_url": "http://evil.example"}, "--endpoint-url"),
    ("user count 1e9", {"user_count": "1000000000"}, "user"),
    ("user count -5", {"user_count": "-5"}, "user"),
    ("spawn rate 1e308", {"spawn_rate": "1e308"}, None),
    ("seed 1.5", {"seed": "1.5"}, "--seed"),
    ("split two", {"split": "two"}, "--split"),
    ("stop at knee maybe", {"stop_at_knee": "maybe"}, "--stop-at-knee"),
    ("time scale 1e300", {"time_scale": "1e300"}, "--time-scale"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, fields: dict[str, str]) -> tuple[int, dict]:
    data = urllib.parse.urlencode(fields).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except ValueError:
            return exc.code, {}


def web_cases(scene: Path, up: str, env: dict[str, str], match: str) -> list[tuple[str, str | None]]:
    """(name, why it did not end well or None) per WEB_FORMS case, against one plain Locust web UI."""
    forms = [case for case in WEB_FORMS if match in f"web UI: {case[0]}"]
    if not forms:
        return []
    port = free_port()
    log = scene.parent / "webui.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([PY, "-m", "locust", "-f", LOCUSTFILE, "--web-host", "127.0.0.1", "--web-port",
                                 str(port), "--endpoint-name", "ep", "--endpoint-url", up, "--payload", PAYLOAD],
                                cwd=scene, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    results = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read()
                break
            except OSError:
                time.sleep(0.3)
        for name, fields, needle in forms:
            form = {"user_count": "1", "spawn_rate": "1", **fields}
            started = time.monotonic()
            status, answer = post(f"http://127.0.0.1:{port}/swarm", form)
            took = time.monotonic() - started
            why = None
            if status >= 500:
                why = f"HTTP {status}"
            elif needle is None and not answer.get("success"):
                why = f"refused a legitimate form: {answer.get('message')}"
            elif needle is not None and answer.get("success"):
                why = "accepted"
            elif needle is not None and needle not in str(answer.get("message")):
                why = f"the message lacks {needle!r}: {str(answer.get('message'))[:160]}"
            elif took > BOUNDED_S:
                why = f"answered after {took:.1f} s"
            if answer.get("success"):
                post(f"http://127.0.0.1:{port}/stop", {})
                time.sleep(1.0)
            if proc.poll() is not None:
                why = f"Locust exited ({proc.returncode})"
            results.append((f"web UI: {name}", why))
            if proc.poll() is not None:
                break
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
    text = log.read_text(errors="replace")
    if "Traceback" in text:
        line = next(x for x in text.splitlines() if "Error" in x and not x.startswith(" "))
        results = [(n, why or f"a traceback in Locust's output: {line[:160]}") for n, why in results]
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="match", default="", help="only the cases whose name contains this")
    args = parser.parse_args()
    from sm_locust.endpoint.multimodel import MultiModelConfig
    from sm_locust.endpoint.server import LocalEndpoint

    work = Path(tempfile.mkdtemp(prefix="sm-locust-probe4-"))
    scene = work / "scene"
    scene.mkdir()
    build_scene(scene)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SM_LOCUST_", "SAGEMAKER_"))}
    env.update({"AWS_ACCESS_KEY_ID": "probe", "AWS_SECRET_ACCESS_KEY": "probe", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_CONFIG_FILE": str(work / "aws_config"), "AWS_SHARED_CREDENTIALS_FILE": str(work / "aws_creds"),
                "AWS_EC2_METADATA_DISABLED": "true", "PYTHONUNBUFFERED": "1"})
    mounts = {"ro": work / "ro"}
    root = mount_tmpfs(mounts["ro"], "4m", read_only=True, copy=scene / "run")
    endpoints = {"up": LocalEndpoint(max_concurrency=4, service_time_ms=5), "slow": LocalEndpoint(latency_ms=8000),
                 "mme": LocalEndpoint(multi_model=MultiModelConfig(model_count=10, download_ms=0.0, load_ms=0.0))}
    results: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    try:
        for ep in endpoints.values():
            ep.start()
        urls = {k: ep.url for k, ep in endpoints.items()}
        subprocess.run([PY, "-m", "sm_locust", "run", "--endpoint-name", "ep", "--endpoint-url", urls["up"],
                        "--payload", PAYLOAD, "-u", "2", "-t", "3s", "-q", "--out", "full_run"], cwd=scene, env=env,
                       check=True, capture_output=True)  # a whole run folder, for the concurrent reports
        table = [c for c in cases(urls, scene) if args.match in c.name]
        print(f"sm-locust probe, round 4: {len(table)} command cases + the web UI's in {scene}", flush=True)
        for case in table:
            if case.needs_root and not root:
                results[case.group].append((case.name, "skipped: needs root to mount a tmpfs"))
                continue
            verdict = base.run_case(case, scene, env, mounts)
            results[case.group].append((case.name, verdict))
            if verdict:
                print(f"  NOT WELL  {case.name}: {verdict}", flush=True)
        for name, verdict in web_cases(scene, urls["up"], env, args.match):
            results["web UI"].append((name, verdict))
            if verdict:
                print(f"  NOT WELL  {name}: {verdict}", flush=True)
    finally:
        for ep in endpoints.values():
            ep.stop()
        for target in mounts.values():
            unmount(target)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{'area':<14} {'cases':>6} {'ended well':>11} {'share':>7}")
    total = well = 0
    for area in AREAS:
        rows = [(n, v) for n, v in results.get(area, []) if not (v or "").startswith("skipped")]
        ok = sum(1 for _, v in rows if v is None)
        total, well = total + len(rows), well + ok
        share = f"{100.0 * ok / len(rows):.0f} %" if rows else "-"
        print(f"{area:<14} {len(rows):>6} {ok:>11} {share:>7}")
    share = 100.0 * well / total if total else 0.0
    print(f"{'all':<14} {total:>6} {well:>11} {share:>6.1f} %")
    skipped = [n for rows in results.values() for n, v in rows if (v or "").startswith("skipped")]
    if skipped:
        print(f"skipped (need root): {', '.join(skipped)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
