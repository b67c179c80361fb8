"""`sm_locust.compare([...])`: runs side by side as a pandas DataFrame (report/compare.py's table).

Each run is reduced to the row `sm-locust compare` writes to compare.csv (max sustainable
throughput, latency there, error rate, $ per 1M, ...), by the same code. Runs are RunResults, run
folders or s3:// URLs (downloaded as `sm_locust.load` does). `out=` also writes compare.csv and
compare.html there. The rows' gaps (missing or damaged data) are in `table.attrs["gaps"]`; runs
whose verdict is INCONCLUSIVE are in `table.attrs["warnings"]`, with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from sm_locust.api.result import load, run_folder
from sm_locust.errors import UsageError
from sm_locust.report.compare import compare_table, write_compare
from sm_locust.report.options import CompareSettings
from sm_locust.util.arguments import require_path
from sm_locust.util.outputs import check_output_dir, refuse_in_progress


def compare(runs: Iterable[object], *, out: str | os.PathLike[str] | None = None, prices: str | None = None,
            target_rps: float | None = None, safety_factor: float = 0.5) -> pd.DataFrame:
    """One row per run (columns as compare.csv); `prices`: a JSON price table file, as `--prices`."""
    require_path("out", out)
    settings = CompareSettings.parse({"prices_file": prices, "target_rps": target_rps, "safety_factor": safety_factor})
    if isinstance(runs, str | bytes | os.PathLike) or hasattr(runs, "run_dir") or not isinstance(runs, Iterable):
        raise UsageError(f"compare() takes a list of runs (RunResults, run folders or s3:// URLs), not one "
                         f"{type(runs).__name__}: write compare([{runs!r}, ...])")
    folders = [str(_folder(r)) for r in runs]
    if not folders:
        raise UsageError("compare() needs at least one run (RunResults, run folders or s3:// URLs)")
    if out is not None:
        check_output_dir(Path(out))
    for folder in folders:
        refuse_in_progress(Path(folder))  # a run still writing it would read as one that crashed
    compared, table = compare_table(folders, prices_file=settings.prices_file, safety_factor=settings.safety_factor,
                                     target_rps=settings.target_rps)
    if out is not None:
        write_compare(compared, table, out)
    gaps = [f"{r.name}: {g}" for r in compared for g in r.gaps]
    table.attrs["gaps"] = gaps
    table.attrs["warnings"] = [f"{r.name}: {w}" for r in compared for w in r.warnings]  # INCONCLUSIVE runs
    return table


def _folder(run: object):
    run_dir = getattr(run, "run_dir", None)  # a RunResult
    if run_dir is not None:
        return run_dir
    text = os.fspath(run_folder(run, "compare()", also=" or a RunResult for each run"))
    return load(text).run_dir if str(text).startswith("s3://") else text
