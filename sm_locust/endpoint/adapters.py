"""LoRA adapters of the LLM emulation (`sm-locust serve --llm --llm-adapters 4 --llm-adapter-cache 2`).

On SageMaker an adapter is an inference component on a base component (docs/facts.md, "LoRA adapters
as inference components"): a request names it by InferenceComponentName and it runs on the base's
compute. Here the base component (`--llm-base-component`) and every adapter share the one LLM; an
adapter must be in the adapter cache before its request's prefill. The cache is `ModelCache`
(endpoint/modelcache.py) with every adapter of size 1 and room for `--llm-adapter-cache` of them:
least recently used unloaded first, one in use never unloaded, one load per adapter (a request that
finds its adapter loading waits for that load, and is cold too). A cold request's answer carries
the wait in `MODEL_WAIT_HEADER`, in the headers of a response stream as of an answer, so the client
tells cold TTFT from warm. One shared-memory store for every worker, made before gunicorn forks.
`parse_adapters` and `AdapterSpec` are pure; `AdapterCache` takes a clock and a sleep, so tests do
not wait.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sm_locust.endpoint.components import ACCOUNT, COMPONENT_ENVIRON, NAME_MAX, NAME_PATTERN, REQUIRED
from sm_locust.endpoint.modelcache import FULL, HIT, CacheSpec, ModelCache, store_size
from sm_locust.invocation import MODEL_WAIT_HEADER

# The adapters' names have one home, shared with the traffic mixes (`--inference-components zipf:S:N`),
# below both; re-exported here for the emulation's tests.
from sm_locust.mix.spec import adapter_names as adapter_names

MAX_ADAPTERS = 10_000
FULL_POLL_S = 0.01  # how often a request waiting for a free place in the cache looks again


def parse_adapters(text: str) -> tuple[str, ...]:
    """`4` -> adapter-1 ... adapter-4; `sql,chat` -> those names; ValueError with a one-line reason else."""
    raw = str(text).strip()
    if raw.isdigit():
        count = int(raw)
        if not 1 <= count <= MAX_ADAPTERS:
            raise ValueError(f"--llm-adapters {raw}: host between 1 and {MAX_ADAPTERS:,} adapters")
        return tuple(adapter_names(count))
    names = tuple(part.strip() for part in raw.split(",") if part.strip())
    if not names:
        raise ValueError("--llm-adapters needs a count (e.g. 4) or adapter names (e.g. sql,chat)")
    for name in names:
        if len(name) > NAME_MAX or not NAME_PATTERN.match(name):
            raise ValueError(f"--llm-adapters: {name!r} is not an inference component name (letters, digits and "
                             f"inner hyphens, at most {NAME_MAX} characters)")
    if len(set(names)) != len(names):
        raise ValueError("--llm-adapters names an adapter twice")
    if len(names) > MAX_ADAPTERS:
        raise ValueError(f"--llm-adapters: at most {MAX_ADAPTERS:,} adapters")
    return names


@dataclass(frozen=True)
class AdapterSpec:
    """The base component, its adapters, how many adapters the cache holds, and what a load costs."""

    base: str
    names: tuple[str, ...]
    cache: int  # adapters in memory at once
    load_ms: float

    def problems(self) -> list[str]:
        out = []
        if self.base in self.names:
            out.append(f"--llm-base-component {self.base!r} is also an adapter's name")
        if len(self.base) > NAME_MAX or not NAME_PATTERN.match(self.base):
            out.append(f"--llm-base-component {self.base!r} is not an inference component name")
        if self.cache < 1:
            out.append(f"--llm-adapter-cache must be at least 1, got {self.cache}")
        if self.load_ms < 0:
            out.append("--llm-adapter-load-ms must not be negative")
        return out

    def cache_spec(self) -> CacheSpec:
        """Every adapter takes one place; the memory is the cache's places; a miss is a load, no download."""
        return CacheSpec((1.0,) * len(self.names), float(self.cache), None, True, 0.0, self.load_ms / 1000.0)

    def describe(self) -> str:
        return (f"LoRA adapters: {len(self.names)} ({self.names[0]} ...) on base component {self.base}, "
                f"{self.cache} in memory at once (least recently used unloaded first), a load takes "
                f"{self.load_ms:g} ms before the request's prefill")


def shared_store(spec: AdapterSpec) -> Any:
    """The adapter cache's shared-memory array, made (and emptied) before gunicorn forks its workers."""
    array = multiprocessing.get_context("fork").Array("d", store_size(len(spec.names)), lock=True)
    values: Any = array.get_obj()  # a ctypes array of doubles: indexable like a list
    ModelCache(spec.cache_spec(), values)
    return array


class AdapterCache:
    """InferenceComponentName checks, the wait for an adapter's load, and its release when the answer
    ends (one per worker; one shared store for all)."""

    def __init__(self, spec: AdapterSpec, store: Any | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] | None = None):
        self.spec = spec
        self.store = store if store is not None else shared_store(spec)
        values: Any = self.store.get_obj()
        self.cache = ModelCache(spec.cache_spec(), values, fresh=False)
        self.lock = self.store.get_lock()
        self.index = {name: i for i, name in enumerate(spec.names)}
        self.clock = clock
        # time.sleep looked up when called: gunicorn's gevent worker patches it after this module is imported
        self.sleep = sleep or (lambda seconds: time.sleep(seconds))

    def check(self, environ) -> tuple[str, str] | None:
        """(error code, message) for a request SageMaker refuses before any model work, else None."""
        name = environ.get(COMPONENT_ENVIRON)
        if not name:
            return "ValidationError", REQUIRED
        if name != self.spec.base and name not in self.index:
            return "ValidationError", f"Inference Component {name} of account {ACCOUNT} not found."
        return None

    def admit(self, i: int) -> float | None:
        """Wait until adapter i is in memory and pin it: the milliseconds waited when it was cold (a load,
        its own or another request's), None when it was loaded (a hit; a hit may first have waited for
        room, while every place held an adapter in use)."""
        arrived = self.clock()
        while True:
            with self.lock:
                admission = self.cache.request(i, self.clock())
            if admission.kind != FULL:
                break
            self.sleep(FULL_POLL_S)  # every place holds an adapter in use: wait for one to end
        if admission.kind == HIT:  # warm, even after waiting for room: the cache counts it a hit
            return None
        self.sleep(max(0.0, admission.ready_at - self.clock()))
        return (self.clock() - arrived) * 1000.0

    def release(self, i: int) -> None:
        with self.lock:
            self.cache.release(i, self.clock())

    def serve(self, environ, start_response, answer: Callable[..., Iterable[bytes]],
              error: Callable[..., list]) -> Iterable[bytes]:
        """The base component answers at once; an adapter waits for its load (when cold), then
        `answer(start_response)` runs with the wait in the answer's headers, and the adapter stays pinned
        until the answer's last byte (a stream's end)."""
        name = environ[COMPONENT_ENVIRON]
        if name == self.spec.base:
            return answer(start_response)
        i = self.index[name]
        waited_ms = self.admit(i)
        respond = start_response
        if waited_ms is not None:
            def respond(status, headers, exc_info=None):
                return start_response(status, [*headers, (MODEL_WAIT_HEADER, f"{waited_ms:.1f}")], exc_info)
        try:
            body = answer(respond)
        except BaseException:
            self.release(i)
            raise
        return Released(body, lambda: self.release(i))

    def stats(self) -> dict:
        """Per-adapter counts (adapters with requests only) and the cache's loads, for /_sm_locust/stats."""
        with self.lock:
            counts = [self.cache.counts(i) for i in range(self.cache.n)]
            totals = self.cache.totals()
            loaded = self.cache.loaded_count(self.clock())
        adapters = {self.spec.names[i]: {"requests": r, "cold": c, "hits": h}
                    for i, (r, c, h) in enumerate(counts) if r}
        return {"adapters": adapters,
                "adapter_cache": {"adapters": self.cache.n, "cache": self.spec.cache, "loaded": loaded,
                                  "loads": totals["loads"], "unloads": totals["unloads"],
                                  "lookups": totals["cache_lookups"], "hits": totals["cache_hits"]}}


class Released:
    """`body`'s bytes; `close()` (which WSGI servers call once the answer is sent, or its client gone)
    closes the body and calls `release()` once."""

    def __init__(self, body: Iterable[bytes], release: Callable[[], None]):
        self.body = body
        self._release: Callable[[], None] | None = release

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        release, self._release = self._release, None
        if release is None:
            return
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            release()
