"""What a traffic mix is, and how a user writes one: names and weights, from a file or a spec.

`parse_mix` is the one parser (pure but for reading the named file): `zipf:S:N`, `uniform:N`,
`a=0.7,b=0.3`, a CSV or a JSONL file (docs/multi-model.md). Generated names are `model_names`'
`model-0001.tar.gz` ... for --target-models and `adapter_names`' `adapter-1` ... (LoRA adapter
components) for --inference-components, as the endpoint emulation hosts, rank 1 the most popular. Weights are
normalised; 0 keeps a name without sending to it; an infinite sum is refused. Each name obeys the
runtime rule of the flag it stands in for (`aws.runtime_api`). A mix file is a regular file of at
most 64 MB, UTF-8 with or without a BOM.
"""

from __future__ import annotations

import csv
import heapq
import io
import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from sm_locust.aws.runtime_api import HEADER_RULES
from sm_locust.errors import UsageError
from sm_locust.util.yamlsafe import names_a_file

TARGET_MODEL = "target_model"
INFERENCE_COMPONENT = "inference_component"
FIELD_FLAGS = {TARGET_MODEL: "--target-models", INFERENCE_COMPONENT: "--inference-components"}
MAX_TARGETS = 1_000_000
MAX_FILE_BYTES = 64 << 20  # a mix file: a million names of ~60 characters
JSONL_EXAMPLE = '{"name": "model.tar.gz", "weight": 0.5}'


def model_name(index: int, count: int) -> str:
    """The name of model `index` (0-based) among `count`: `model-0001.tar.gz` for index 0 (1-based,
    zero-padded to at least 4 digits). The endpoint emulation (`serve --multi-model --model-count N`)
    hosts exactly these names (endpoint/modelcache.py imports them from here)."""
    return f"model-{index + 1:0{max(4, len(str(count)))}d}.tar.gz"


def model_names(count: int) -> list[str]:
    """Every model name of `count` models, in rank order: what `zipf:S:N` and `uniform:N` send to."""
    return [model_name(i, count) for i in range(count)]


ADAPTER_PREFIX = "adapter-"


def adapter_names(count: int) -> list[str]:
    """The names `--inference-components zipf:S:N` and `uniform:N` send to, rank 1 first: adapter-1 ...
    adapter-N, the LoRA adapter components `serve --llm --llm-adapters N` hosts (endpoint/adapters.py
    imports them from here)."""
    return [f"{ADAPTER_PREFIX}{i}" for i in range(1, count + 1)]


def zipf_weights(s: float, count: int) -> list[float]:
    """Zipf's law over ranks 1..count: weight 1 / k^s, normalised to sum to 1."""
    raw = [1.0 / k ** s for k in range(1, count + 1)]
    total = sum(raw)
    return [w / total for w in raw]


@dataclass(frozen=True)
class TargetMix:
    """Names and their normalised weights, for one request field (TargetModel or InferenceComponentName).

    `spec` is the text the user gave (summary.json shows it); `kind` is `zipf`, `uniform`, `list`
    or `file`; `zipf_s` is S for a Zipf mix.
    """

    field: str
    names: tuple[str, ...]
    weights: tuple[float, ...]
    spec: str
    kind: str
    zipf_s: float | None = None

    @property
    def flag(self) -> str:
        return FIELD_FLAGS[self.field]

    def describe(self) -> dict:
        """summary.json's `mix`: what was sent to, and how it was weighted."""
        out: dict = {"field": self.field, "spec": self.spec, "kind": self.kind, "targets": len(self.names)}
        if self.zipf_s is not None:
            out["zipf_s"] = self.zipf_s
        top = heapq.nsmallest(5, zip(self.weights, self.names, strict=True), key=lambda wn: (-wn[0], wn[1]))
        out["top_weights"] = {name: round(weight, 6) for weight, name in top}
        return out


def parse_mix(text: str, field: str = TARGET_MODEL, *, allow_files: bool = True) -> TargetMix:
    """The mix `text` describes (see the module docstring), or a one-line UsageError naming the flag.

    `allow_files=False` refuses a file path (the web UI: a browser may not make the tool read files).
    """
    flag = FIELD_FLAGS[field]
    spec = str(text).strip()
    if not spec:
        raise UsageError(f"{flag} is empty; give zipf:S:N, uniform:N, name=weight,... or a .csv/.jsonl file")
    head = spec.split(":", 1)[0].lower()
    if head in ("zipf", "uniform") and not names_a_file(spec):
        return _generated(spec, head, flag, field)
    path = Path(spec)
    if path.suffix.lower() in (".csv", ".jsonl") or names_a_file(spec):
        if not allow_files:
            raise UsageError(f"{flag}: a mix file can only be given on the command line (or SM_LOCUST_*); "
                             "in the web UI write zipf:S:N, uniform:N or name=weight,...")
        return _from_file(path, spec, field, flag)
    pairs = [_pair(item) for item in spec.split(",") if item.strip()]
    return _mix(field, pairs, spec, "list", flag)


def _generated(spec: str, head: str, flag: str, field: str = TARGET_MODEL) -> TargetMix:
    """`zipf:S:N` / `uniform:N`: models `model-0001.tar.gz` ... for --target-models, LoRA adapter
    components `adapter-1` ... for --inference-components."""
    parts = spec.split(":")
    expected = 3 if head == "zipf" else 2
    usage = "zipf:S:N (e.g. zipf:1.1:1000)" if head == "zipf" else "uniform:N (e.g. uniform:100)"
    if len(parts) != expected:
        raise UsageError(f"{flag} {spec!r} is not {usage}")
    count = _count(parts[-1], spec, flag, usage)
    names = tuple(model_names(count) if field == TARGET_MODEL else adapter_names(count))
    if head == "uniform":
        return TargetMix(field, names, tuple([1.0 / count] * count), spec, "uniform")
    try:
        s = float(parts[1])
    except ValueError:
        raise UsageError(f"{flag} {spec!r}: S must be a number >= 0, as in {usage}") from None
    if not math.isfinite(s) or s < 0:
        raise UsageError(f"{flag} {spec!r}: S must be a finite number >= 0 (0 = uniform), as in {usage}")
    return TargetMix(field, names, tuple(zipf_weights(s, count)), spec, "zipf", s)


def _count(text: str, spec: str, flag: str, usage: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise UsageError(f"{flag} {spec!r}: N must be a whole number of models, as in {usage}") from None
    if not 1 <= count <= MAX_TARGETS:
        raise UsageError(f"{flag} {spec!r}: N must be between 1 and {MAX_TARGETS:,}")
    return count


def _pair(item: str) -> tuple[str, object]:
    """`name=weight` -> (name, "weight"); a bare `name` -> (name, None): weight 1."""
    name, sep, weight = item.strip().rpartition("=")
    return (name.strip(), weight.strip()) if sep else (item.strip(), None)


def _read(path: Path, spec: str, flag: str) -> str:
    """The text of a regular mix file (UTF-8, a byte-order mark dropped), at most MAX_FILE_BYTES."""
    try:
        with open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise UsageError(f"{flag} {spec!r} is not a regular file (a FIFO or a device cannot be a mix file)")
            if info.st_size > MAX_FILE_BYTES:
                raise UsageError(f"{flag} {spec!r} is {info.st_size:,} bytes; a mix file is at most "
                                 f"{MAX_FILE_BYTES:,}")
            data = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"{flag} {spec!r}: no such file; give an existing .csv/.jsonl file, "
                         "zipf:S:N or uniform:N") from None
    except OSError as exc:
        raise UsageError(f"{flag} {spec!r} cannot be read: {exc.strerror or exc}") from None
    try:
        return data[:MAX_FILE_BYTES + 1].decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{flag} {spec!r} is not UTF-8 text (byte {exc.start:,}); save it as UTF-8 CSV") from None


def _from_file(path: Path, spec: str, field: str, flag: str) -> TargetMix:
    text = _read(path, spec, flag)
    if path.suffix.lower() == ".jsonl":
        pairs = _jsonl_pairs(text, spec, flag)
    else:
        pairs = _csv_pairs(text, spec, flag)
    return _mix(field, pairs, spec, "file", flag)


def _jsonl_pairs(text: str, spec: str, flag: str) -> list[tuple[str, object]]:
    pairs: list[tuple[str, object]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise UsageError(f"{flag} {spec}: line {number} is not JSON; write {JSONL_EXAMPLE}") from None
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise UsageError(f"{flag} {spec}: line {number} has no \"name\" string; write {JSONL_EXAMPLE}")
        pairs.append((item["name"], item.get("weight")))
    return pairs


def _csv_pairs(text: str, spec: str, flag: str) -> list[tuple[str, object]]:
    rows = [row for row in csv.reader(io.StringIO(text)) if row and any(cell.strip() for cell in row)]
    if rows and [c.strip().lower() for c in rows[0][:2]] in (["name"], ["name", "weight"]):
        rows = rows[1:]  # the header row
    pairs: list[tuple[str, object]] = []
    for row in rows:
        if len(row) > 2:
            raise UsageError(f"{flag} {spec}: row {row!r} has {len(row)} columns; write name,weight")
        pairs.append((row[0].strip(), row[1].strip() if len(row) > 1 and row[1].strip() else None))
    return pairs


def _mix(field: str, pairs: list[tuple[str, object]], spec: str, kind: str, flag: str) -> TargetMix:
    if not pairs:
        raise UsageError(f"{flag} {spec!r} names no targets")
    if len(pairs) > MAX_TARGETS:
        raise UsageError(f"{flag} {spec!r} names {len(pairs):,} targets; at most {MAX_TARGETS:,}")
    names: list[str] = []
    weights: list[float] = []
    seen: set[str] = set()
    for name, weight in pairs:
        check_target_name(name, field)
        if name in seen:
            raise UsageError(f"{flag} {spec!r} names {name!r} twice; give each target once (its weight is its share)")
        seen.add(name)
        names.append(name)
        weights.append(_weight(weight, name, flag))
    total = sum(weights)
    if total <= 0:
        raise UsageError(f"{flag} {spec!r}: the weights sum to 0; give at least one target a positive weight")
    if not math.isfinite(total):
        raise UsageError(f"{flag} {spec!r}: the weights sum past the largest number (to infinity); give smaller "
                         "weights (only their ratios count)")
    return TargetMix(field, tuple(names), tuple(w / total for w in weights), spec, kind)


def _weight(value: object, name: str, flag: str) -> float:
    if value is None:
        return 1.0
    try:
        weight = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{flag}: the weight of {name!r} is {value!r}, not a number") from None
    if isinstance(value, bool) or not math.isfinite(weight) or weight < 0:
        raise UsageError(f"{flag}: the weight of {name!r} must be a finite number >= 0, got {value!r}")
    return weight


def check_target_name(name: str, field: str = TARGET_MODEL) -> None:
    """A name that can be the request field `field`, by the rule its single-target flag applies
    (`--target-model`: TargetModel, printable ASCII 1-1024; `--inference-component`:
    InferenceComponentName, letters, digits and hyphens, at most 63); else a one-line UsageError."""
    flag = FIELD_FLAGS[field]
    if not name:
        raise UsageError(f"{flag}: an empty target name; every entry needs a name")
    problem = HEADER_RULES[field].problem(name)
    if problem:
        shown = repr(name) if len(name) <= 60 else repr(name[:56]) + "..."
        raise UsageError(f"{flag}: target name {shown} {problem}")
