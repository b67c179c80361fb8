"""An autoscaling sweep's `sweep.json` read back as typed records, for its page and CSV (render.py).

The writer is `rows.AutoscalingRow.as_dict` (one `configurations[]` entry) and the sweep's `document`;
each configuration carries its run's `autoscaling` figures, so its scale events and instance counts
read as summary.json's own records. Read without judging (`Record.of`): a missing key reads as None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sm_locust.record.model import InstanceSample, Interval, JsonObject, ListOf, Phase, Record, ScaleEvent, json_field


@dataclass(frozen=True, kw_only=True)
class SweptConfiguration(Record):
    """One `configurations[]` entry: what the page draws of a configuration (the table's other columns
    are read by name, as the CSV writes them)."""

    index: int | None = json_field("count?")
    label: str | None = json_field("text?")
    policy: JsonObject | None = json_field("object?")
    settings: JsonObject | None = json_field("object?")
    run_dir: str | None = json_field("text?")
    duration_s: float | None = json_field("number?")
    scale_events: tuple[ScaleEvent, ...] | None = json_field(ListOf(ScaleEvent))
    instances: tuple[InstanceSample, ...] | None = json_field(ListOf(InstanceSample))
    reaction_s: float | None = json_field("number?")
    reaction_s_ci95: Interval | None = json_field("interval?")
    slo_breach_s: float | None = json_field("number?")
    breach_s_ci95: Interval | None = json_field("interval?")
    instance_hours: float | None = json_field("number?")
    cost_usd: float | None = json_field("number?")


@dataclass(frozen=True, kw_only=True)
class AutoscalingSweepDocument(Record):
    """`sweep.json` of `kind: autoscaling`: its heading figures and configurations."""

    description: str | None = json_field("text?")
    deploy: str | None = json_field("text?", default="")
    started_at: str | None = json_field("text?", default="")
    ended_at: str | None = json_field("text?", default="")
    traffic: tuple[Phase, ...] | None = json_field(ListOf(Phase))
    configurations: tuple[SweptConfiguration, ...] | None = json_field(ListOf(SweptConfiguration))


def read_document(document: Mapping[str, object]) -> AutoscalingSweepDocument:
    """sweep.json's object (built in this process, or read from the file) as the typed document."""
    return AutoscalingSweepDocument.of(document)
