"""The page, table and file scaffolding every sweep kind's outputs share (`sweep.json`, `sweep.csv`,
`sweep.html` in the sweep folder).

Each kind decides what its document, CSV columns, table columns and charts are
(`realtime/render.py`, `serverless/render.py`); this module writes the three files the same way
(sweep.json atomically, empty CSV cells for missing figures) and draws the same page around them:
`<kind> <name>` as title, the recommendation in one sentence, the kind's sections, why each other
configuration lost. Like the run report, the page inlines plotly.js and works offline.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plotly.offline import get_plotlyjs

from sm_locust.sanitize import page_text
from sm_locust.util.formatting import number
from sm_locust.util.outputs import atomic_file, write_atomic

CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:nth-child(2),th:nth-child(2){text-align:left}
tr.winner{background:#e8f5e9}tr.failed{color:#999}.rec{font-size:17px;background:#f3f7ff;border-left:4px solid #3367d6;
padding:10px 14px;margin:12px 0}.note{color:#666;font-size:13px}"""


def write_json(path: Path, document: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(document, indent=1, default=str))


def write_rows(path: Path, header: list[str], rows: list[dict[str, object]]) -> None:
    """One CSV file, empty cells for None (every kind's sweep.csv)."""
    with atomic_file(path, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=header)
        out.writeheader()
        for row in rows:
            out.writerow({k: ("" if v is None else v) for k, v in row.items()})


# ------------------------------------------------------------------------------------------- html


def configurations_table(document: dict[str, Any], columns: list[tuple[str, str, int]],
                         derived: Callable[[dict[str, Any]], dict[str, Any]], note: str) -> str:
    """The configurations table of a sweep page: one row per configuration, `columns` as (heading, key, digits),
    `derived(configuration)` adds computed keys; the winner's row highlighted, failed rows grey, the label linking
    to the run report, the status carrying its reason; `note` follows the table."""
    winner = (document.get("recommendation") or {}).get("index")
    head = "".join(f"<th>{page_text(name)}</th>" for name, *_ in columns)
    body = []
    for c in document.get("configurations") or []:
        values = dict(c)
        values.update(derived(c))
        cls = "winner" if c.get("index") == winner else ("failed" if c.get("status") != "ok" else "")
        cells = []
        for _, key, digits in columns:
            text = page_text(number(values.get(key), digits))
            if key == "label" and c.get("report"):
                text = f'<a href="{page_text(c["report"])}">{text}</a>'
            if key == "status" and c.get("status") == "inconclusive":
                text = "INCONCLUSIVE"  # said loudly: the client's figures, never a result of the endpoint
            if key == "status" and c.get("reason"):
                text = f'{text}: {page_text(str(c["reason"]))}'
            if key == "status":
                text += first_measurement(c.get("remeasured"))
            cells.append(f"<td>{text}</td>")
        body.append(f'<tr class="{cls}">' + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{note}"


def first_measurement(remeasured: object) -> str:
    """The status cell's note for a configuration measured again by itself (sweep.json `remeasured`): why its
    first measurement was not trusted, and a link to that run's report (its folder when none was drawn)."""
    if not isinstance(remeasured, dict) or not remeasured.get("first_run_dir"):
        return ""
    folder = page_text(str(remeasured["first_run_dir"]))
    report = remeasured.get("first_report")
    kept = f'<a href="{page_text(str(report))}">{folder}</a>' if report else folder
    why = page_text(str(remeasured.get("first_reason") or ""))
    return f'<br><span class="note">measured again by itself; the first measurement, not trusted ({why}): {kept}</span>'


def figure_html(fig: Any, div_id: str) -> str:
    """A plotly figure as a div for a page that inlines plotly.js once."""
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config={"displaylogo": False})


def page(document: dict[str, Any], kind: str, note: str, sections: list[tuple[str, str]]) -> str:
    """A sweep page: `<kind> <name>` as title and heading, the `note` line (HTML), the recommendation, the
    `sections` as (heading, HTML) and why the others lost; plotly.js inlined so the page works offline."""
    rec = document.get("recommendation") or {}
    name = page_text(document.get("name", ""))
    why_not = (document.get("why_not") or {}).items()
    lost = "".join(f"<li><b>{page_text(label)}</b>: {page_text(why)}</li>" for label, why in why_not)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{kind.lower()} {name}</title><style>{CSS}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>',
        f"<h1>{kind} {name}</h1>",
        f"<p class='note'>{note}</p>",
        f"<div class='rec' id='recommendation'>{page_text(rec.get('reason') or 'No recommendation.')}</div>",
    ]
    for heading, body in sections:
        parts += [f"<h2>{heading}</h2>", body]
    parts += [f"<h2>Why the others lost</h2><ul id='why-not'>{lost or '<li>(no other configuration)</li>'}</ul>",
              "</body></html>"]
    return "\n".join(parts)


def write_files(out_dir: Path, document: dict[str, object], csv_writer: Callable[[Path, dict[str, Any]], None],
                html_renderer: Callable[[dict[str, Any]], str], html_too: bool = True) -> dict[str, Path]:
    """sweep.json, sweep.csv and (with `html_too`) sweep.html in `out_dir`; returns their paths by kind."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "sweep.json", "csv": out_dir / "sweep.csv"}
    write_json(paths["json"], document)
    csv_writer(paths["csv"], document)
    if html_too:
        paths["html"] = out_dir / "sweep.html"
        write_atomic(paths["html"], html_renderer(document))
    return paths
