"""Dynamic batching for the local endpoint, as TF-Serving's and Triton's batchers do it.

`Batcher` (per worker): a request joins the open batch; its leader waits until the batch is full
(`--max-batch-size`, in rows with `size=`) or `--max-batch-delay-ms` passed, then for a concurrency
slot (the batch stays open meanwhile), then runs the batch once and hands each request its result.
`threading` primitives: cooperative under gevent, real locks in gthread workers. Cost
(`batch_service_s`): n requests hold one slot for `service time x (1 + (n - 1) x batch item cost)`;
the model computes once over the batch's rows (`predict_batch`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def batch_service_s(service_time_ms: float, batch_item_cost: float, size: int) -> float:
    """Seconds a batch of `size` requests holds its slot."""
    return service_time_ms / 1000.0 * (1.0 + max(0, size - 1) * batch_item_cost)


def predict_batch(model, items: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    """One model call over every request's rows; each request gets its own slice back."""
    if len(items) == 1:
        return [model.predict(*items[0])]
    ids = np.concatenate([i for i, _ in items])
    vals = np.concatenate([v for _, v in items])
    out = model.predict(ids, vals)
    bounds = np.cumsum([len(i) for i, _ in items])[:-1]
    return list(np.split(out, bounds))


class _Batch:
    __slots__ = ("items", "size", "closed", "full", "done", "results", "error")

    def __init__(self) -> None:
        self.items: list[object] = []
        self.size = 0  # the rows (or requests) it holds
        self.closed = False
        self.full = threading.Event()
        self.done = threading.Event()
        self.results: list[object] = []  # one per item once the batch ran (unless it raised)
        self.error: BaseException | None = None


class Batcher:
    """Collects concurrent requests into batches and runs each batch once.

    `run(items) -> results` runs one batch (one result per item, same order); `slots` (optional, a
    semaphore) is held while a batch runs, so max concurrency counts batches, not requests.
    """

    def __init__(self, max_size: int, max_delay_s: float, run: Callable[[list[Any]], Sequence[Any]],
                 slots: threading.Semaphore | None = None, on_batch: Callable[[int], None] | None = None):
        if max_size < 1:
            raise ValueError(f"max batch size must be at least 1, got {max_size}")
        self.max_size = max_size
        self.max_delay_s = max(0.0, max_delay_s)
        self.run = run
        self.slots = slots
        self.on_batch = on_batch
        self._lock = threading.Lock()
        self._open: _Batch | None = None

    def submit(self, item: object, size: int = 1) -> Any:
        """Run `item` (counting `size` towards the batch's maximum) in a batch; returns its result (or
        raises what the batch raised)."""
        with self._lock:
            current = self._open
            leader = current is None or current.closed or current.size + size > self.max_size
            if leader and current is not None and not current.closed:
                current.full.set()  # it cannot take this one: run it now rather than wait out the delay
            batch = _Batch() if leader or current is None else current
            if leader:
                self._open = batch
            index = len(batch.items)
            batch.items.append(item)
            batch.size += size
            if batch.size >= self.max_size:
                batch.full.set()
        if leader:
            self._lead(batch)
        else:
            batch.done.wait()
        if batch.error is not None:
            raise batch.error
        return batch.results[index]

    def _lead(self, batch: _Batch) -> None:
        if self.max_delay_s:
            batch.full.wait(self.max_delay_s)
        if self.slots is not None:
            self.slots.acquire()  # still open: requests arriving meanwhile join this batch
        try:
            with self._lock:
                batch.closed = True
                if self._open is batch:
                    self._open = None
            try:
                results = list(self.run(batch.items))
                if len(results) != len(batch.items):
                    raise RuntimeError(f"batch of {len(batch.items)} requests returned {len(results)} results")
                batch.results = results
            except BaseException as exc:  # every request of the batch sees the failure
                batch.error = exc
            if self.on_batch is not None:
                self.on_batch(len(batch.items))
        finally:
            if self.slots is not None:
                self.slots.release()
            batch.done.set()


def sleeping_runner(model, service_time_ms: float, batch_item_cost: float,
                    sleep: Callable[[float], None] | None = None,
                    predict: Callable[[Any, list[Any]], list[Any]] = predict_batch,
                    size: Callable[[Any], int] | None = None) -> Callable[[list[Any]], list[Any]]:
    """The local endpoint's batch: hold the slot for the batch's service time, then one model call
    (`predict(model, items)`; the batch's size counts `size(item)` per item, else 1).

    `time.sleep` is looked up at each call, not bound here: this module is imported in gunicorn's
    master before the gevent worker patches `time`, and a bound original would block the worker."""

    def run(items: list[Any]) -> list[Any]:
        n = sum(size(item) for item in items) if size is not None else len(items)
        held = batch_service_s(service_time_ms, batch_item_cost, n)
        if held:
            (sleep or time.sleep)(held)
        return predict(model, items)

    return run
