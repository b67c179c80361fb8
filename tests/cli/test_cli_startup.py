"""What `sm-locust` loads at start-up: `--help` lists every command from the table without importing
any command module, and each command loads only what its own work needs (`serve` no pandas,
`report` no Locust or gevent, `run`'s parent no Locust: Locust runs in a child process)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sm_locust.cli.commands import COMMANDS
from tests.conftest import SAMPLE_PAYLOAD

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust

GOLDEN = Path(__file__).parent.parent / "data" / "report" / "golden"

# Runs `main(argv)` in a fresh interpreter, then prints which modules it loaded (the last line).
PROBE = """
import json, sys
from sm_locust.cli import main
try:
    code = main(json.loads(sys.argv[1]))
except SystemExit as exc:
    code = exc.code
{extra}
print(json.dumps({{"code": code, "modules": sorted(sys.modules)}}))
"""


def loaded(argv: list[str], extra: str = "", cwd: Path | None = None) -> tuple[int, set[str], str]:
    result = subprocess.run([sys.executable, "-c", PROBE.format(extra=extra), json.dumps(argv)], capture_output=True,
                            text=True, timeout=120, cwd=cwd)
    last = json.loads(result.stdout.strip().splitlines()[-1])
    return last["code"], set(last["modules"]), result.stdout + result.stderr


def test_help_lists_every_command_with_its_line_and_imports_none_of_them():
    code, modules, output = loaded(["--help"])
    assert code == 0
    for name, command in COMMANDS.items():
        assert name in output and command.help.split()[0] in output
        assert f"sm_locust.cli.{command.module}" not in modules
    assert not {"pandas", "numpy", "locust", "gevent", "boto3"} & modules


def test_a_command_imports_only_its_own_module():
    code, modules, _ = loaded(["compare", "--help"])
    assert code == 0 and "sm_locust.cli.compare" in modules
    assert not {f"sm_locust.cli.{c.module}" for c in COMMANDS.values() if c.name != "compare"} & modules


def test_serve_loads_the_endpoint_without_pandas_or_locust():
    # everything `serve` imports before gunicorn forks its workers: the parser, the config, the server
    extra = ("from sm_locust.cli import build_parser\nfrom sm_locust.cli.serve import config_from_args\n"
             "config_from_args(build_parser('serve').parse_args(['serve', '--max-concurrency', '2']))\n"
             "import sm_locust.endpoint.server, sm_locust.endpoint.app")
    code, modules, output = loaded(["serve", "--help"], extra)
    assert code == 0, output
    assert "sm_locust.endpoint.app" in modules
    assert not {"pandas", "plotly", "pyarrow", "locust"} & modules


def test_report_on_a_run_folder_never_loads_locust_or_gevent(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(GOLDEN, run)
    code, modules, output = loaded(["report", str(run), "--no-cloudwatch", "--instance-type", "ml.c5.xlarge"])
    assert code in (0, 1), output
    assert (run / "report.html").is_file()
    assert not {"locust", "gevent", "geventhttpclient"} & modules


def test_run_parent_process_never_loads_locust(tmp_path):
    # stops at the reachability check (nothing listens on port 9): everything before Locust has run
    code, modules, output = loaded(["run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9",
                                    "--payload", str(SAMPLE_PAYLOAD), "-t", "1s", "--out", str(tmp_path / "r")])
    assert code == 1 and "cannot connect" in output
    assert "sm_locust.payloads.options" in modules
    assert not {"locust", "gevent", "pandas"} & modules


def test_the_pytest_plugin_loads_no_locust_until_a_test_runs_a_load_test():
    # every pytest session of an environment with sm-locust loads the plugin (pytest11)
    probe = ("import json, sys\nimport sm_locust.testing as t\nbefore = sorted(sys.modules)\nt.run_load_test\n"
             "print(json.dumps([before, sorted(sys.modules)]))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    before, after = (set(m) for m in json.loads(result.stdout.strip().splitlines()[-1]))
    assert not {"locust", "gevent", "pandas"} & before
    assert {"locust", "sm_locust.testing.inprocess"} <= after
