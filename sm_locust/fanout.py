"""Fan-out (`--split K`): one logical request of N rows sent as K concurrent sub-requests.

Why: a caller with a large batch can send it as K smaller requests at once, on separate
connections, so more of the endpoint's workers serve it in parallel; each part pays its own
per-request overhead. What the caller feels is the time until the *last* part returns, and what
the endpoint sees is K smaller requests, so one split call is recorded both ways:

- ONE logical request: request_type `InvokeEndpointSplit`, name = the usual entry name
  (`endpoint`, `endpoint/variant`); response time from the first send until the last part
  returns; response length the sum of the parts' bodies; a failure when any part fails, named by
  the first failing part's error (in part order), so the failure table still reads
  `ThrottlingException: ...`, `InvalidResponse: ...`;
- each part as its own request: request_type `InvokeEndpoint`, name `<entry name>/part`, exactly
  as the client reports any call.

Locust's `total` row (and so summary.json `totals`) adds up every entry: with `--split` it counts
the logical requests *and* their parts. Read the `InvokeEndpointSplit` entry for the caller's view
and the `/part` entry for the endpoint's.

The parts run in gevent greenlets sharing the User's client (a boto3 client may be used
concurrently; its connection pool gives each in-flight part its own connection). Parts are
prepared before the test (`split_invocations`), never on the request path: a body a serializer
built (.npy/.npz and function sources) is split by slicing the request object's rows and
encoding each slice with the same serializer and headers; a body read as bytes is split in its
own format (JSON `instances`/`inputs`, CSV lines, .npy, a TF-Serving PredictRequest, a numpy-raw
buffer whose `shape=` custom attribute gives its rows). Anything else is a UsageError before the
test starts.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation, InvocationError
from sm_locust.serializers.csv_format import is_number

INVOKE_ENDPOINT_SPLIT = "InvokeEndpointSplit"
PART_SUFFIX = "/part"
PARTS = "split_parts"  # Invocation.extra key: the pre-encoded parts
MAX_SPLIT = 64
_SOURCE = "encoded_from"  # = sm_locust.payloads.template.SOURCE (not imported: payloads imports this module)

_JSON = ("application/json", "text/json", "application/jsonlines")
_CSV = ("text/csv",)
_NPY = ("application/x-npy", "application/npy")
_PROTOBUF = ("application/x-protobuf", "application/protobuf", "application/vnd.google.protobuf", "x-protobuf")
_RAW = ("application/octet-stream", "application/x-numpy-raw")
SPLITTABLE = "JSON (instances/inputs), CSV, npy, protobuf PredictRequest, numpy-raw with shape= custom attributes"


def check_split(k: Any) -> int:
    """`k` as the number of parts, or a UsageError naming the bad value."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_SPLIT:
        raise UsageError(f"--split must be a whole number from 1 (no fan-out) to {MAX_SPLIT}; got {k!r}")
    return int(k)


def part_slices(n: int, k: int, where: str) -> list[slice]:
    """K consecutive row ranges covering n rows, sizes differing by at most one."""
    if n < k:
        raise UsageError(
            f"{where}: {n} row{'s' if n != 1 else ''} cannot be split into {k} parts; "
            "--split needs at least K rows per request (raise --batch-size or lower --split)"
        )
    q, r = divmod(n, k)
    out, start = [], 0
    for i in range(k):
        size = q + (1 if i < r else 0)
        out.append(slice(start, start + size))
        start += size
    return out


# -- splitting request objects (before encoding) ----------------------------------------------


def split_rows(obj: Any, k: int, where: str) -> list[Any]:
    """K request objects holding consecutive rows of `obj` (an array, or a dict of arrays)."""
    if isinstance(obj, Mapping):
        arrays = {key: np.asarray(value) for key, value in obj.items()}
        if "feat_ids" in arrays and arrays["feat_ids"].ndim == 1:
            arrays = {key: a.reshape(1, -1) for key, a in arrays.items()}  # one ranking row
        rows = {a.shape[0] if a.ndim else None for a in arrays.values()}
        if len(rows) != 1 or None in rows:
            raise UsageError(f"{where}: cannot split: the inputs do not all have the same number of rows")
        n = rows.pop()
        return [{key: a[s] for key, a in arrays.items()} for s in part_slices(n, k, where)]
    if isinstance(obj, (np.ndarray, list, tuple)):
        arr = np.asarray(obj)
        if arr.ndim == 0:
            raise UsageError(f"{where}: cannot split a scalar payload into rows")
        return [arr[s] for s in part_slices(arr.shape[0], k, where)]
    raise UsageError(f"{where}: cannot split a {type(obj).__name__} payload into rows; give arrays or a dict of arrays")


# -- splitting encoded bodies ----------------------------------------------------------------


def _kind(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _split_json(body: bytes, k: int, where: str) -> list[tuple[bytes, int]]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("instances"), list):
        rows = doc["instances"]
        return [(orjson.dumps({**doc, "instances": rows[s]}), s.stop - s.start) for s in part_slices(len(rows), k, where)]
    inputs = doc.get("inputs") if isinstance(doc, dict) else None
    if isinstance(inputs, list):
        return [(orjson.dumps({**doc, "inputs": inputs[s]}), s.stop - s.start) for s in part_slices(len(inputs), k, where)]
    if isinstance(inputs, dict) and inputs and all(isinstance(v, list) for v in inputs.values()):
        lengths = {len(v) for v in inputs.values()}
        if len(lengths) == 1:
            slices = part_slices(lengths.pop(), k, where)
            return [(orjson.dumps({**doc, "inputs": {n: v[s] for n, v in inputs.items()}}), s.stop - s.start) for s in slices]
    raise UsageError(f"{where}: cannot split this JSON body: it needs an \"instances\" list or \"inputs\" with rows")


def _split_csv(body: bytes, k: int, where: str) -> list[tuple[bytes, int]]:
    lines = [ln for ln in body.decode("utf-8", errors="replace").splitlines() if ln.strip()]
    header = lines[:1] if lines and not all(is_number(c) for c in lines[0].split(",")) else []
    rows = lines[len(header):]
    return [("\n".join(header + rows[s]).encode() + b"\n", s.stop - s.start) for s in part_slices(len(rows), k, where)]


def _split_npy(body: bytes, k: int, where: str) -> list[tuple[bytes, int]]:
    from sm_locust.serializers.numpy_formats import dump_npy, load_npy

    arr = load_npy(body, where)
    if arr.ndim == 0:
        raise UsageError(f"{where}: cannot split a scalar .npy body into rows")
    return [(dump_npy(arr[s]), s.stop - s.start) for s in part_slices(arr.shape[0], k, where)]


def _split_protobuf(body: bytes, k: int, where: str) -> list[tuple[bytes, int]]:
    from sm_locust.serializers import tfs_proto

    req = tfs_proto.decode_predict_request(body)
    rows = {a.shape[0] if a.ndim else None for a in req.tensors.values()}
    if len(rows) != 1 or None in rows:
        raise UsageError(f"{where}: cannot split this PredictRequest: its inputs do not all have the same number of rows")
    return [
        (tfs_proto.encode_predict_request({name: a[s] for name, a in req.tensors.items()}, model_name=req.model_name,
                                          signature_name=req.signature_name, version=req.version,
                                          output_filter=req.output_filter), s.stop - s.start)
        for s in part_slices(rows.pop(), k, where)
    ]


def _raw_layout(custom_attributes: str | None) -> tuple[np.dtype, tuple[int, ...]] | None:
    from sm_locust.serializers.numpy_formats import parse_dtype, parse_shape

    values = {}
    for part in (custom_attributes or "").split(";"):
        key, sep, value = part.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    if "shape" not in values:
        return None
    return parse_dtype(values.get("dtype", "float32")).newbyteorder("<"), parse_shape(values["shape"])


def _with_shape(custom_attributes: str, shape: Sequence[int]) -> str:
    text = ",".join(str(d) for d in shape)
    return ";".join(f"shape={text}" if p.strip().lower().startswith("shape=") else p for p in custom_attributes.split(";"))


def split_body(invocation: Invocation, k: int, where: str) -> list[Invocation]:
    """K invocations holding consecutive rows of an already encoded body, in its own format."""
    from sm_locust.serializers import SerializationError

    kind, body = _kind(invocation.content_type), invocation.body
    try:
        if kind in _RAW and (layout := _raw_layout(invocation.custom_attributes)) is not None:
            from sm_locust.serializers.numpy_formats import frombuffer

            arr = frombuffer(body, layout[0], layout[1], where)
            return [dataclasses.replace(invocation, body=arr[s].tobytes(), rows=s.stop - s.start, extra={},
                                        custom_attributes=_with_shape(invocation.custom_attributes, arr[s].shape))
                    for s in part_slices(arr.shape[0], k, where)]
        splitter = {**dict.fromkeys(_JSON, _split_json), **dict.fromkeys(_CSV, _split_csv),
                    **dict.fromkeys(_NPY, _split_npy), **dict.fromkeys(_PROTOBUF, _split_protobuf)}.get(kind)
        if splitter is None:
            raise UsageError(f"{where}: cannot split a {kind or 'untyped'} body into rows; --split works with {SPLITTABLE} "
                             "bodies, and with .npy/.npz or function sources encoded by --serializer")
        pieces = splitter(body, k, where)
    except SerializationError as exc:
        raise UsageError(f"{where}: cannot split: {exc}") from None
    return [dataclasses.replace(invocation, body=b, rows=rows, extra={}) for b, rows in pieces]


def split_invocation(invocation: Invocation, k: int, where: str) -> tuple[Invocation, ...]:
    """The K parts of one invocation (request object rows sliced before encoding when known)."""
    source = invocation.extra.get(_SOURCE)
    if source is None:
        return tuple(split_body(invocation, k, where))
    parts = []
    for i, obj in enumerate(split_rows(source.obj, k, source.where or where), start=1):
        part = source.template.encode(obj, source.serializer, where=f"{source.where or where} part {i}")
        parts.append(dataclasses.replace(part, extra={}))
    return tuple(parts)


def split_invocations(invocations: Sequence[Invocation], k: int, description: str = "") -> list[Invocation]:
    """Each invocation with its K pre-encoded parts in `extra[PARTS]` (done once, before the test)."""
    k = check_split(k)
    out = []
    for i, inv in enumerate(invocations, start=1):
        parts = split_invocation(inv, k, f"{description or 'payload'} body {i}")
        extra = {key: v for key, v in inv.extra.items() if key != _SOURCE}
        extra[PARTS] = parts
        out.append(dataclasses.replace(inv, extra=extra))
    return out


def parts_of(invocation: Invocation) -> tuple[Invocation, ...] | None:
    """The pre-encoded parts of a split invocation, or None."""
    return invocation.extra.get(PARTS)


# -- sending ---------------------------------------------------------------------------------


def _send(client: Any, part: Invocation, name: str) -> tuple[dict | None, InvocationError | None]:
    send = getattr(client, "send", None)
    if send is not None:
        return send(part, name)
    result = client.invoke(part, name)  # a client without send(): the failure's code is unknown here
    return result, None if result is not None else InvocationError("PartFailed", "see the /part entry")


def invoke_split(client: Any, invocation: Invocation, name: str | None = None) -> list[dict | None]:
    """Send `invocation`'s parts at once and record the logical request; returns each part's result.

    Never raises for a failed part: each part fires its own request event through the client, and
    the logical request fires one more (`InvokeEndpointSplit`), failed when any part failed.
    """
    from gevent import joinall, killall, spawn

    parts = invocation.extra[PARTS]
    name = name or invocation.request_name(client.endpoint_name)
    part_name = name + PART_SUFFIX
    start_time = time.time()
    started = time.perf_counter()
    others = [spawn(_send, client, part, part_name) for part in parts[1:]]
    try:
        outcomes = [_send(client, parts[0], part_name)]
        joinall(others)
    except BaseException:  # the User is being stopped (GreenletExit): its parts stop with it
        killall(others, block=False)
        raise
    response_time = (time.perf_counter() - started) * 1000.0
    for g in others:
        if g.successful():
            outcomes.append(g.value)
        else:  # a client bug, not a model error: still an event, never raised into the User
            outcomes.append((None, InvocationError(type(g.exception).__name__, str(g.exception))))
    exception = next((err for _, err in outcomes if err is not None), None)
    client.environment.events.request.fire(
        request_type=INVOKE_ENDPOINT_SPLIT,
        name=name,
        response_time=response_time,
        response_length=sum(len(r["body"]) for r, _ in outcomes if r is not None),
        exception=exception,
        context={"endpoint": client.endpoint_name, "parts": len(parts)},
        start_time=start_time,
        url=None,
    )
    return [r for r, _ in outcomes]
