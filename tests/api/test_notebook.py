"""examples/notebooks/quickstart.ipynb runs in a real Jupyter kernel (nbclient + ipykernel), and its
outputs show what a user sees: one progress line per run that updated in place, the verdict and the
two charts, the plateau and steps as tables, the comparison of two runs, the report's path. The
shipped notebook carries no outputs."""

from __future__ import annotations

import base64
import html as html_text
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebooks" / "quickstart.ipynb"


def test_the_notebook_is_shipped_without_outputs():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    assert "widgets" not in notebook.metadata


RUNNER = """
import sys
import nbformat, psutil
from nbclient import NotebookClient

source, executed, cwd = sys.argv[1:4]
notebook = nbformat.read(source, as_version=4)
client = NotebookClient(notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": cwd}})
children = []
try:
    with client.setup_kernel():
        kernel = psutil.Process(client.km.provisioner.pid)
        try:
            for index, cell in enumerate(notebook.cells):
                client.execute_cell(cell, index)
                children = kernel.children(recursive=True) or children
        finally:
            children += kernel.children(recursive=True)
finally:
    nbformat.write(notebook, executed)
    left = [c for c in children if c.is_running() and any("sm_locust" in part for part in c.cmdline())]
    for child in left:  # a failed cell must not leave the notebook's endpoints running
        child.kill()
    print(len(left), "left running")
"""


def execute(tmp_path: Path):
    """Run the notebook in a fresh interpreter (this one has gevent patched by conftest's locust import,
    which jupyter_client's threads do not survive); the executed notebook and what was left running."""
    executed = tmp_path / "executed.ipynb"
    cwd = tmp_path / "examples" / "notebooks"  # where Jupyter runs it in the repository: its runs go to reports/
    cwd.mkdir(parents=True)
    result = subprocess.run([sys.executable, "-c", RUNNER, str(NOTEBOOK), str(executed), str(cwd)],
                            capture_output=True, text=True, timeout=230)
    assert result.returncode == 0, result.stderr[-3000:]
    return nbformat.read(executed, as_version=4), result.stdout


def cell_outputs(notebook, code: str) -> list:
    """The outputs of the code cell whose source is `code`, or starts with it when it ends with '('."""
    found = [c for c in notebook.cells if c.cell_type == "code"
             and (c.source.startswith(code) if code.endswith(("(", "[")) else c.source == code)]
    assert len(found) == 1, code
    return found[0].outputs


def values(array) -> list:
    """A plotly JSON array: a list, or (plotly >= 6) a typed array {"dtype": "i1", "bdata": base64}."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


@pytest.mark.timeout(240)
def test_the_quickstart_runs_in_a_kernel(tmp_path):
    notebook, stdout = execute(tmp_path)
    assert stdout.strip() == "0 left running"
    errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors

    # each run: one output, a display updated in place, ending on the done line; no printed lines
    runs = (("two_slots = sm_locust.run(", "two-slots"), ("bigger = sm_locust.LocalEndpoint(", "four-slots"))
    for start, folder in runs:
        outputs = cell_outputs(notebook, start)
        assert not [o for o in outputs if o.output_type == "stream"], outputs
        progress = [o for o in outputs if o.output_type == "display_data"]
        assert len(progress) == 1
        line = progress[0].data["text/plain"]
        assert line.startswith("sm-locust: done in ") and line.endswith(f"reports/notebook/{folder}/"), line
    run = json.loads((tmp_path / "reports" / "notebook" / "two-slots" / "summary.json").read_text())
    plateau = run["plateau"]
    assert plateau["capacity_rps"] > 50  # 2 slots x 20 ms: about 100 req/s

    # the result shows itself: the verdict, then the two charts, displayed by plotly
    shown = cell_outputs(notebook, "two_slots")
    html = [o.data["text/html"] for o in shown if "text/html" in o.get("data", {})]
    assert any(html_text.escape(plateau["text"], quote=False) in h for h in html)
    charts = [o.data["application/vnd.plotly.v1+json"] for o in shown
              if "application/vnd.plotly.v1+json" in o.get("data", {})]
    titles = [c["layout"]["title"]["text"] for c in charts]
    assert titles[0].startswith("Throughput vs users") and titles[1].startswith("Client latency vs users"), titles
    assert values(charts[0]["data"][0]["x"]) == sorted(step["users"] for step in run["steps"])  # joined by load

    plateau_table = cell_outputs(notebook, "two_slots.plateau[")[0].data["text/plain"]
    assert "capacity_rps" in plateau_table and plateau["reason"][:20] in plateau_table
    steps_table = cell_outputs(notebook, "two_slots.steps[")[0].data["text/html"]
    assert steps_table.count("<tr") == len(run["steps"]) + 1

    compared = cell_outputs(notebook, "bigger = sm_locust.LocalEndpoint(")
    table = [o for o in compared if o.output_type == "execute_result"][0].data["text/plain"]
    rows = [line.split() for line in table.splitlines()[1:] if line.strip()]
    assert [row[1] for row in rows] == ["two-slots", "four-slots"]
    four = json.loads((tmp_path / "reports" / "notebook" / "four-slots" / "summary.json").read_text())["plateau"]
    assert four["capacity_rps"] > 1.3 * plateau["capacity_rps"]  # twice the slots: more throughput

    report = cell_outputs(notebook, "four_slots.report()")[0].data["text/plain"]
    assert report.endswith("four-slots/report.html')")
    assert (tmp_path / "reports" / "notebook" / "four-slots" / "report.html").is_file()
