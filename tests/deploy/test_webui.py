"""The Locust web UI with sm-locust: every option meant for it shown and editable, the step shape
pickable (--class-picker), a run driven through the UI's HTTP API (POST /swarm, GET /stats/requests,
GET /stop), what the UI cannot change (the payload, where the signed requests go), the start form
without Locust's host warning or a preselected OpenLoopUser, and a headless Chromium check that the
options are rendered (screenshot kept in test-artifacts/)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from sm_locust.config.options import GROUPS, all_option_specs, option_help, option_label
from sm_locust.locustfiles._webui import form_layout
from sm_locust.util.ports import free_port
from tests.conftest import ROOT, SAMPLE_PAYLOAD
from tests.fakes import wait_exit

ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def web_options() -> list:
    return [spec for spec in all_option_specs() if spec.web_ui]


class WebLocust:
    """`locust -f sagemaker.py,step.py --class-picker` with its web UI on 127.0.0.1:FREE."""

    def __init__(self, tmp_path: Path, *extra: str, env: dict | None = None, more_files: tuple[str, ...] = (),
                 base_env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp_path / "locust-web.log"
        files = ",".join([str(ROOT / "locustfiles" / "sagemaker.py"), str(ROOT / "locustfiles" / "step.py"),
                          *more_files])
        cmd = [sys.executable, "-m", "locust", "-f", files, "--class-picker", "--web-host", "127.0.0.1",
               "--web-port", str(self.port), *extra]
        full_env = dict(os.environ if base_env is None else base_env, PYTHONUNBUFFERED="1", **(env or {}))
        self.proc = subprocess.Popen(cmd, stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT, env=full_env,
                                     cwd=tmp_path, start_new_session=True)
        try:
            self._wait_up(time.monotonic() + 120)
        except BaseException:  # no caller holds it yet to stop it: a UI that never came up is stopped here
            self.stop()
            raise

    def _wait_up(self, deadline: float) -> None:
        while True:
            try:  # a long wait per try: a starved UI answers its first page in > 1 s, and 1-s tries that give
                # up and ask again only queue more pages behind it (CI at load 21 never saw one answered)
                urllib.request.urlopen(self.url + "/login", timeout=max(1.0, deadline - time.monotonic())).close()
                return
            except (urllib.error.URLError, OSError):
                assert self.proc.poll() is None, self.log_path.read_text()[-2000:]
                assert time.monotonic() < deadline, "web UI did not come up"
                time.sleep(0.1)

    def get(self, path: str, opener=None):
        with (opener or urllib.request.build_opener()).open(self.url + path, timeout=5) as resp:
            return resp.status, resp.read().decode()

    def post(self, path: str, form: list[tuple[str, str]], opener=None):
        data = urllib.parse.urlencode(form).encode()
        with (opener or urllib.request.build_opener()).open(self.url + path, data=data, timeout=5) as resp:
            return resp.status, resp.read().decode()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                wait_exit(self.proc, 15)
            except AssertionError:
                os.killpg(self.proc.pid, signal.SIGKILL)
                wait_exit(self.proc, 10)


def template_args(page: str) -> dict:
    match = re.search(r"window\.templateArgs\s*=\s*(\{.*?\})\s*;?\s*\n", page, re.S) or \
        re.search(r"templateArgs\s*=\s*(\{.*\})", page)
    assert match, page[:2000]
    return json.loads(match.group(1))


@pytest.fixture
def web_locust(tmp_path, endpoint):
    started = []

    def start(*extra: str, env: dict | None = None) -> WebLocust:
        web = WebLocust(tmp_path, "--endpoint-name", "set-on-the-command-line", "--endpoint-url", endpoint.url,
                        "--payload", str(SAMPLE_PAYLOAD), *extra, env=env)
        started.append(web)
        return web

    yield start
    for web in started:
        web.stop()


@pytest.mark.e2e
def test_web_ui_shows_every_option_and_the_shape_picker(web_locust):
    web = web_locust()
    status, page = web.get("/")
    assert status == 200
    args = template_args(page)
    shown = set(args["extra_options"])
    missing = [spec.flag for spec in web_options() if spec.dest not in shown]
    assert not missing, f"sm-locust options missing from the web UI: {missing}"
    assert not any(spec.dest in shown for spec in all_option_specs() if not spec.web_ui)  # --sm-out stays off it
    assert args["extra_options"]["endpoint_name"]["default_value"] == "set-on-the-command-line"
    assert "StepLoadShape" in args["available_shape_classes"]
    assert "InvokeEndpointUser" in args["available_user_classes"]


@pytest.mark.e2e
def test_a_run_driven_through_the_web_ui_http_api(web_locust, endpoint):
    web = web_locust()
    form = [("user_count", "3"), ("spawn_rate", "10"), ("host", ""), ("user_classes", "InvokeEndpointUser"),
            ("shape_class", "Default"), ("endpoint_name", "edited-in-the-ui"), ("think_time", "0.01")]
    status, body = web.post("/swarm", form)
    assert status == 200 and json.loads(body)["success"] is True, body
    time.sleep(3.5)
    _, stats_text = web.get("/stats/requests")
    stats = json.loads(stats_text)
    assert stats["state"] in ("running", "spawning") and stats["user_count"] == 3
    entries = {entry["name"]: entry for entry in stats["stats"]}
    assert "edited-in-the-ui" in entries, list(entries)  # the option edited in the form was used
    assert entries["edited-in-the-ui"]["num_requests"] > 20
    assert entries["edited-in-the-ui"]["num_failures"] == 0
    status, _ = web.post("/stop", [])  # POST in Locust 2.47 (GET answers 405)
    assert status == 200
    deadline = time.monotonic() + 60  # a wait for what comes in a second: long only when it fails
    while True:
        stopped = json.loads(web.get("/stats/requests")[1])
        if stopped["state"] == "stopped":
            break
        assert time.monotonic() < deadline, stopped["state"]
        time.sleep(0.2)
    total = next(e for e in stopped["stats"] if e["name"] == "Aggregated")["num_requests"]
    served = endpoint.stats()["requests"]
    assert 0 <= served - total <= 3, (served, total)  # only requests in flight at the stop


@pytest.mark.e2e
def test_web_login_protects_the_ui(tmp_path):
    login = str(ROOT / "examples" / "distributed" / "web_login.py")
    web = WebLocust(tmp_path, "--web-login", "--endpoint-name", "ep", "--payload", str(SAMPLE_PAYLOAD),
                    more_files=(login,),
                    env={"SM_LOCUST_WEB_USERNAME": "ops", "SM_LOCUST_WEB_PASSWORD": "s3cret-test-only"})
    try:
        import http.cookiejar

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        anonymous = urllib.request.build_opener(NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as info:
            web.get("/stats/requests", anonymous)
        assert info.value.code == 302 and "/login" in info.value.headers["Location"]
        jar = http.cookiejar.CookieJar()
        wrong = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        web.post("/login_submit", [("username", "ops"), ("password", "nope")], wrong)
        with pytest.raises(urllib.error.HTTPError):
            web.get("/stats/requests", urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect))
        jar = http.cookiejar.CookieJar()
        user = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        web.post("/login_submit", [("username", "ops"), ("password", "s3cret-test-only")], user)
        status, body = web.get("/stats/requests", user)
        assert status == 200 and "stats" in json.loads(body)
    finally:
        web.stop()
    assert "s3cret-test-only" not in web.log_path.read_text()


@pytest.mark.e2e
@pytest.mark.skipif(CHROMIUM is None,
                    reason="chromium is not installed (apt-get install -y chromium; .ci/run tries it)")
def test_browser_renders_the_sm_locust_options(web_locust, tmp_path):
    web = web_locust()
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "webui.png"
    screenshot.unlink(missing_ok=True)
    base = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium'}", "--window-size=1280,2400",
            "--virtual-time-budget=8000"]
    dom = subprocess.run(base + ["--dump-dom", web.url + "/"], capture_output=True, text=True, timeout=90)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # rendered elements only: the page also embeds the options as JSON in a <script>
    text = html.unescape(re.sub(r"<script\b.*?</script>", "", dom.stdout, flags=re.S))
    missing = [spec.flag for spec in web_options() if option_help(spec) not in text or option_label(spec) not in text]
    assert not missing, f"options not rendered as form fields with their label and full help: {missing}"
    assert "Custom parameters" in text and "StepLoadShape" in text
    assert "no host attribute set" not in text  # the sm-locust options are all the users need
    host_field = re.search(r'<div[^>]*style="display: none;"[^>]*>(?:(?!</div>\s*</div>).)*?name="host"', dom.stdout,
                           flags=re.S)
    assert host_field, "the start form shows Locust's Host field"  # hidden: the users need an endpoint, not a host
    shot = subprocess.run(base + [f"--screenshot={screenshot}", web.url + "/"], capture_output=True, text=True,
                          timeout=90)
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert screenshot.stat().st_size > 10_000


def swarm_form(**fields: str) -> list[tuple[str, str]]:
    form = {"user_count": "1", "spawn_rate": "10", "host": "", "user_classes": "InvokeEndpointUser",
            "shape_class": "Default"}
    form.update(fields)
    return list(form.items())


@pytest.mark.e2e
def test_the_web_ui_cannot_change_the_payload_or_where_requests_go(web_locust, endpoint, tmp_path):
    web = web_locust()
    shown = template_args(web.get("/")[1])["extra_options"]
    assert not {"payload", "endpoint_url", "region", "aws_profile", "publish", "publish_period", "publish_namespace",
                "dashboard"} & set(shown)
    for field, value, flag in (("payload", "/etc/passwd", "--payload"), ("payload", "os:getcwd", "--payload"),
                               ("endpoint_url", "http://192.0.2.1:80", "--endpoint-url"),
                               ("region", "eu-west-1", "--region"),
                               ("aws_profile", "prod", "--aws-profile"), ("host", "http://192.0.2.1:80", "host"),
                               ("sm_out", str(tmp_path / "elsewhere"), "--sm-out"),
                               # live metrics: where the figures go stays on the command line (issue 30)
                               ("publish", "prometheus:0.0.0.0:9646", "--publish"),
                               ("publish_namespace", "Other", "--publish-namespace"),
                               ("dashboard", "their-dashboard", "--dashboard")):
        _, body = web.post("/swarm", swarm_form(**{field: value}))
        answer = json.loads(body)
        assert answer["success"] is False and f"{flag} cannot be changed from the web UI" in answer["message"], answer
    _, body = web.post("/swarm", swarm_form(think_time="abc"))
    assert json.loads(body) == {"success": False, "message": "--think-time must be a number, got 'abc'", "host": None}
    for settings in ({"user_class_name": "InvokeEndpointUser", "endpoint_url": "http://192.0.2.1:80"},
                     {"user_class_name": "InvokeEndpointUser", "host": "http://192.0.2.1:80"},
                     {"user_class_name": "InvokeEndpointUser", "client_options": {"insecure": True}}):
        request = urllib.request.Request(web.url + "/user", data=json.dumps(settings).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=5)
        assert info.value.code == 400 and "cannot be changed from the web UI" in info.value.read().decode()
    legit = {"user_class_name": "InvokeEndpointUser", "host": "", "weight": 2, "fixed_count": 0,
             "tasks": ["invoke_endpoint"]}
    request = urllib.request.Request(web.url + "/user", data=json.dumps(legit).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as resp:  # the picker's edit dialog still works
        assert resp.status == 201
    assert endpoint.stats()["requests"] == 0 and not (tmp_path / "elsewhere").exists()
    _, body = web.post("/swarm", swarm_form(think_time="0.05"))  # what the form may change still works
    assert json.loads(body)["success"] is True, body
    deadline = time.monotonic() + 60  # a wait for what comes in a second: long only when it fails
    while endpoint.stats()["requests"] < 5:  # the command line's payload, sent to the command line's endpoint
        assert time.monotonic() < deadline
        time.sleep(0.2)
    web.post("/stop", [])
    assert "Traceback" not in web.log_path.read_text()


@pytest.mark.e2e
def test_the_start_form_needs_no_host_and_the_open_loop_user_comes_with_its_shape(tmp_path, endpoint):
    web = WebLocust(tmp_path, "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
                    "--search-mode", "rate", "--start-rps", "20",
                    more_files=(str(ROOT / "locustfiles" / "plateau.py"),))
    try:
        args = template_args(web.get("/")[1])
        assert args["missing_host_warning"] is False and args["override_host_warning"] is False
        assert args["available_user_classes"] == ["InvokeEndpointUser"]  # OpenLoopUser is not offered, not preselected
        assert "OpenLoopUser" not in args["users"] and "PlateauShape" in args["available_shape_classes"]
        _, body = web.post("/swarm", swarm_form(shape_class="PlateauShape"))
        assert json.loads(body)["success"] is True, body
        deadline = time.monotonic() + 120
        while endpoint.stats()["requests"] < 20:  # rate mode sends through OpenLoopUser, added with the shape
            assert time.monotonic() < deadline, web.log_path.read_text()[-2000:]
            time.sleep(0.2)
        web.post("/stop", [])
        assert "OpenLoopUser among the user classes" not in web.log_path.read_text()
    finally:
        web.stop()


def test_the_web_ui_and_the_master_listen_on_this_machine_unless_told_otherwise():
    from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments

    from sm_locust.locustfiles.sagemaker import _register_options

    parser = get_empty_argument_parser()
    setup_parser_arguments(parser)
    _register_options(parser)
    defaults = parser.parse_args([])
    assert (defaults.web_host, defaults.master_bind_host) == ("127.0.0.1", "127.0.0.1")
    chosen = parser.parse_args(["--web-host", "0.0.0.0", "--master-bind-host", "*"])  # compose, Kubernetes
    assert (chosen.web_host, chosen.master_bind_host) == ("0.0.0.0", "*")


def test_the_form_layout_groups_every_shown_option_once_in_groups_order():
    shown = {spec.dest for spec in web_options()}
    layout = form_layout(shown | {"a_locustfiles_own_option"})
    names = [f["name"] for group in layout for f in group["fields"]]
    assert sorted(names) == sorted(shown)  # each shown sm-locust option once; nothing else
    keys = [group["key"] for group in layout]
    assert keys == [key for key in GROUPS if key in keys]
    assert {"endpoint", "payload", "shape", "slo", "llm", "mix"} <= set(keys)
    assert "output" not in keys  # --sm-out and the like stay off the form
    fields = {f["name"]: (group["key"], f) for group in layout for f in group["fields"]}
    assert fields["itl_slo_ms"][0] == "slo" and fields["itl_slo_ms"][1]["label"] == "ITL SLO (ms)"
    assert fields["step_users"][0] == "step" and fields["search_mode"][0] == "plateau"
    assert "%%" not in fields["stop_at_knee"][1]["help"] and "5 %" in fields["stop_at_knee"][1]["help"]


PLAYWRIGHT = True
HEADINGS = "els => els.map(e => e.dataset.smLocustGroup)"
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # the test extra installs it
    PLAYWRIGHT = False


@pytest.mark.e2e
@pytest.mark.skipif(CHROMIUM is None or not PLAYWRIGHT,
                    reason="needs chromium (apt-get install -y chromium; .ci/run tries it) and playwright (the test "
                    "extra)")
def test_the_options_show_in_groups_with_the_picked_shape_first(tmp_path, endpoint):
    web = WebLocust(tmp_path, "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload",
                    str(SAMPLE_PAYLOAD), more_files=(str(ROOT / "locustfiles" / "plateau.py"),))
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS[1:])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(web.url + "/")
            page.get_by_text("Custom parameters").click()
            page.wait_for_selector("[data-sm-locust-group]")
            headings = page.eval_on_selector_all("[data-sm-locust-group]", HEADINGS)
            assert headings[:3] == ["endpoint", "payload", "shape"], headings  # no shape picked: GROUPS' order
            page.select_option("select[name=shapeClass]", "PlateauShape")
            page.wait_for_function("document.querySelector('[data-sm-locust-group]').dataset.smLocustGroup"
                                   " === 'plateau'")
            headings = page.eval_on_selector_all("[data-sm-locust-group]", HEADINGS)
            assert headings[:4] == ["plateau", "shape", "endpoint", "payload"], headings
            assert headings[-1] == "traffic" and headings.index("slo") < headings.index("step"), headings
            order = page.eval_on_selector_all("[data-sm-locust-group], [data-sm-locust-field]",
                                              "els => els.map(e => e.dataset.smLocustGroup || e.dataset.smLocustField)")
            assert order[order.index("plateau") + 1:order.index("shape")] == [
                "min_step_seconds", "search_mode", "start_rps", "max_rps", "objective"]  # its own settings first
            # what the plateau shape does not read is hidden: Locust's user count and ramp-up, other shapes' groups
            assert not page.locator("input[name=userCount]").is_visible()
            assert not page.locator("input[name=spawnRate]").is_visible()
            assert not page.locator("[data-sm-locust-group=step]").is_visible()
            assert not page.locator("[data-sm-locust-field=traffic]").is_visible()
            assert page.locator("[data-sm-locust-field=search_mode]").is_visible()
            assert page.locator("[data-sm-locust-field=latency_slo_ms]").is_visible()
            label = page.locator("[data-sm-locust-field=itl_slo_ms] label").inner_text()
            assert label == "ITL SLO (ms)"
            assert page.locator("[data-sm-locust-field=itl_slo_ms] .sm-locust-help").inner_text() == \
                "LLM plateau: inter-token latency SLO in ms at --slo-percentile (needs --stream)"
            assert not errors, errors
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "webui-grouped.png"), full_page=True)
            page.select_option("select[name=shapeClass]", "Default")  # no shape: every field back
            page.wait_for_function("document.querySelector('input[name=userCount]').offsetParent !== null")
            assert page.locator("[data-sm-locust-group=step]").is_visible()
            browser.close()
    finally:
        web.stop()


def without_aws(home: Path) -> dict[str, str]:
    """This environment with no AWS variable and a HOME without ~/.aws: a new user's machine, offline."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {"HOME": str(home)}


def wait_stopped(web: WebLocust, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s  # long only when it fails
    while True:
        stats = json.loads(web.get("/stats/requests")[1])
        if stats["state"] == "stopped":
            return stats
        assert time.monotonic() < deadline, (stats["state"], web.log_path.read_text()[-2000:])
        time.sleep(0.2)


def complete_summary(path: Path, timeout_s: float = 30) -> dict:
    """summary.json once the swarm's stop has written it whole (`complete`: Locust reports the state
    "stopped" before its test_stop listeners, the recorder's among them, have run)."""
    deadline = time.monotonic() + timeout_s  # long only when it fails
    while True:
        summary = json.loads(path.read_text()) if path.is_file() else {}
        if summary.get("complete") is True:
            return summary
        assert time.monotonic() < deadline, summary
        time.sleep(0.2)


@pytest.mark.e2e
def test_a_swarm_from_the_form_works_offline_and_writes_its_run_folder(tmp_path, endpoint):
    """README's web UI against `sm-locust serve` with no AWS variable: placeholder credentials as
    `sm-locust run` gives (0 failures), and each swarm's run folder under reports/."""
    home = tmp_path / "home"
    home.mkdir()
    web = WebLocust(tmp_path, "--endpoint-name", "webui-offline", "--endpoint-url", endpoint.url, "--payload",
                    str(SAMPLE_PAYLOAD), base_env=without_aws(home))
    try:
        for swarm in (1, 2):
            _, body = web.post("/swarm", swarm_form(user_count="2", run_time="3s"))
            assert json.loads(body)["success"] is True, body
            stopped = wait_stopped(web)
            total = next(e for e in stopped["stats"] if e["name"] == "Aggregated")
            assert total["num_requests"] > 0 and total["num_failures"] == 0, (total, web.log_path.read_text()[-3000:])
            folders = sorted((tmp_path / "reports").iterdir())
            assert len(folders) == swarm, folders  # one run folder per swarm
            summary = complete_summary(folders[-1] / "summary.json")
            assert summary["endpoint"] == "webui-offline" and summary["totals"]["failures"] == 0
            assert summary["totals"]["requests"] > 0
            time.sleep(1.1)  # the run id is stamped to the second
    finally:
        web.stop()
    assert "NoCredentialsError" not in web.log_path.read_text()


@pytest.mark.e2e
def test_the_form_names_no_file_and_is_held_to_the_command_lines_bounds(tmp_path, endpoint):
    """A form field may not make the master read a file the command line did not name, nor pass a
    value the command line refuses (an endpoint name SageMaker cannot have, a batch of 3 GB)."""
    import numpy as np

    secret = tmp_path / "secret.json"
    secret.write_text('{"Phases": [{"InitialNumberOfUsers": 1, "SpawnRate": 1, "DurationInSeconds": 4242}]}')
    rows = tmp_path / "rows.npz"
    np.savez(rows, x=np.zeros((10, 39), dtype=np.float32))
    web = WebLocust(tmp_path, "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(rows),
                    more_files=(str(ROOT / "locustfiles" / "phases.py"),))
    try:
        for fields, says in (({"shape_class": "PhasesShape", "traffic_pattern": str(secret)},
                              "--traffic-pattern: a file can only be named on the command line"),
                             ({"traffic": str(secret)}, "--traffic: a file can only be named on the command line"),
                             ({"prompts": str(secret)}, "--prompts: a file can only be named on the command line"),
                             ({"batch_size": "200000000"}, "--batch-size 200,000,000 rows"),
                             ({"endpoint_name": "<script>alert(1)</script>"}, "--endpoint-name '<script>"),
                             ({"endpoint_name": "../../admin"}, "--endpoint-name '../../admin'")):
            _, body = web.post("/swarm", swarm_form(**fields))
            answer = json.loads(body)
            assert answer["success"] is False and says in answer["message"], (fields, answer)
        assert endpoint.stats()["requests"] == 0
        _, body = web.post("/swarm", swarm_form(batch_size="4", run_time="2s"))  # within the bounds: it runs
        assert json.loads(body)["success"] is True, body
        wait_stopped(web)
        assert endpoint.stats()["requests"] > 0
    finally:
        web.stop()
    log = web.log_path.read_text()
    assert "4242" not in log and "Traceback" not in log
