"""The model cache of a SageMaker multi-model endpoint (MME), as pure code: which request waits for
which download and load, which models are unloaded to make room, what is a cache hit.

Two tiers (memory, disk), least recently used out first, models in use never unloaded, one load per
model (a request waiting for another's load is a miss, `WAIT`; no room is `FULL`), and
ModelCacheSetting Disabled (docs/facts.md, "Multi-model endpoints and inference components").
`lru_simulation` computes a mix's hit rate; the emulation (endpoint/multimodel.py) runs the same
`ModelCache`. State is one flat float array (a list, or shared memory under a lock), the LRU order a
linked list in it (O(1) per request); time is the caller's `now`, and loads complete lazily.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, MutableSequence, Sequence
from dataclasses import dataclass

# The models' names have one home, shared with the traffic mixes (`--target-models zipf:S:N`), below
# both; re-exported here for the emulation (endpoint/multimodel.py) and its tests.
from sm_locust.mix.spec import model_name as model_name
from sm_locust.mix.spec import model_names as model_names

HIT, WAIT, LOAD, FULL = "hit", "wait", "load", "full"

# per-model state in memory
ABSENT, LOADING, LOADED = 0.0, 1.0, 2.0
NIL = -1.0  # an empty link

# per-model fields: one region of N floats each
_MEM, _READY, _PINS, _DISK, _MPREV, _MNEXT, _DPREV, _DNEXT, _REQ, _COLD, _HITS = range(11)
_PER_MODEL = 11
# scalars after the per-model regions
(_MEM_USED, _DISK_USED, _MHEAD, _MTAIL, _DHEAD, _DTAIL, _LOADS, _DOWNLOADS, _UNLOADS, _DELETES,
 _LOOKUPS, _HITS_TOTAL) = range(12)
_SCALARS = 12


@dataclass(frozen=True)
class CacheSpec:
    """What the cache holds and what a miss costs (sizes in MB, times in seconds)."""

    sizes_mb: tuple[float, ...]
    memory_mb: float
    disk_mb: float | None = None  # None: the disk holds every model ever downloaded
    caching: bool = True  # MultiModelConfig.ModelCacheSetting: Enabled (True) or Disabled
    download_s: float = 0.0  # S3 -> disk, per model
    load_s: float = 0.0  # disk -> memory (the container's LoadModel)
    unload_s: float = 0.0  # memory -> gone (UnloadModel); a load waits for the unloads that make its room

    @property
    def count(self) -> int:
        return len(self.sizes_mb)

    def problems(self) -> list[str]:
        """Why the cache cannot work as specified (empty when it can)."""
        out = []
        if not self.sizes_mb:
            out.append("the endpoint needs at least one model")
        if any(not s > 0 for s in self.sizes_mb):
            out.append("every model size must be more than 0 MB")
        biggest = max(self.sizes_mb, default=0.0)
        if biggest > self.memory_mb:
            out.append(f"a {biggest:g} MB model does not fit in {self.memory_mb:g} MB of instance memory")
        if self.disk_mb is not None and self.disk_mb < self.memory_mb:
            out.append(f"the disk ({self.disk_mb:g} MB) must hold what memory holds ({self.memory_mb:g} MB): "
                       "loaded models stay on disk")
        if min(self.download_s, self.load_s, self.unload_s) < 0:
            out.append("download, load and unload times must not be negative")
        return out


def store_size(count: int) -> int:
    """Floats a store needs for `count` models."""
    return _PER_MODEL * count + _SCALARS


@dataclass(frozen=True)
class Admission:
    """What happens to one request: served now (HIT), after a load under way (WAIT), after the
    load it starts (LOAD), or not yet (FULL: no room can be made now; nothing changed)."""

    kind: str
    ready_at: float  # when the model is in memory (now, for a hit)
    download_s: float = 0.0  # this request's load: its download (0: the model was on disk)
    load_s: float = 0.0
    unloaded: tuple[int, ...] = ()  # models unloaded from memory to make room (each cost unload_s)
    deleted: tuple[int, ...] = ()  # models deleted from disk to make room

    @property
    def cold(self) -> bool:
        """The request waited for a model load (a cache miss)."""
        return self.kind in (WAIT, LOAD)

    def wait_s(self, now: float) -> float:
        return max(0.0, self.ready_at - now)


class ModelCache:
    """The cache of one instance over `spec.count` models, indexed 0..count-1.

    `request(model, now)` admits a request (pinning its model: it is not unloaded while in use);
    `release(model, now)` ends it. Per-model counts (requests, cold, hits) are kept in the store.
    Callers that share a store between processes hold its lock around each call.
    """

    def __init__(self, spec: CacheSpec, store: MutableSequence[float] | None = None, *, fresh: bool = True):
        problems = spec.problems()
        if problems:
            raise ValueError("; ".join(problems))
        self.spec = spec
        self.n = n = spec.count
        self.sizes = spec.sizes_mb
        self.s: MutableSequence[float] = store if store is not None else [0.0] * store_size(n)
        if len(self.s) < store_size(n):
            raise ValueError(f"the store holds {len(self.s)} values; {n} models need {store_size(n)}")
        self._base = _PER_MODEL * n
        if fresh:
            self.reset()

    # -- layout ------------------------------------------------------------------------------
    def _f(self, field: int, i: int) -> int:
        return field * self.n + i

    def _g(self, scalar: int) -> int:
        return self._base + scalar

    def reset(self) -> None:
        """Everything in S3 only: memory and disk empty, counts zero."""
        s, n = self.s, self.n
        for k in range(store_size(n)):
            s[k] = 0.0
        for field in (_MPREV, _MNEXT, _DPREV, _DNEXT):
            for i in range(n):
                s[field * n + i] = NIL
        for scalar in (_MHEAD, _MTAIL, _DHEAD, _DTAIL):
            s[self._base + scalar] = NIL

    # -- linked lists (head = most recently used) ------------------------------------------
    def _unlink(self, i: int, prev: int, nxt: int, head: int, tail: int) -> None:
        s, f, g = self.s, self._f, self._g
        p, q = int(s[f(prev, i)]), int(s[f(nxt, i)])
        if p >= 0:
            s[f(nxt, p)] = q
        else:
            s[g(head)] = q
        if q >= 0:
            s[f(prev, q)] = p
        else:
            s[g(tail)] = p
        s[f(prev, i)] = NIL
        s[f(nxt, i)] = NIL

    def _push(self, i: int, prev: int, nxt: int, head: int, tail: int) -> None:
        s, f, g = self.s, self._f, self._g
        first = int(s[g(head)])
        s[f(prev, i)] = NIL
        s[f(nxt, i)] = first
        if first >= 0:
            s[f(prev, first)] = i
        else:
            s[g(tail)] = i
        s[g(head)] = i

    def _touch_memory(self, i: int) -> None:
        self._unlink(i, _MPREV, _MNEXT, _MHEAD, _MTAIL)
        self._push(i, _MPREV, _MNEXT, _MHEAD, _MTAIL)

    def _touch_disk(self, i: int) -> None:
        self._unlink(i, _DPREV, _DNEXT, _DHEAD, _DTAIL)
        self._push(i, _DPREV, _DNEXT, _DHEAD, _DTAIL)

    # -- state -------------------------------------------------------------------------------
    def state(self, i: int, now: float) -> float:
        """ABSENT, LOADING or LOADED (a load whose ready time has passed is LOADED)."""
        mem = self.s[self._f(_MEM, i)]
        if mem == LOADING and self.s[self._f(_READY, i)] <= now:
            self.s[self._f(_MEM, i)] = mem = LOADED
        return mem

    def on_disk(self, i: int) -> bool:
        return self.s[self._f(_DISK, i)] > 0

    def pins(self, i: int) -> int:
        return int(self.s[self._f(_PINS, i)])

    def loaded_count(self, now: float) -> int:
        """Models in memory now (LoadedModelCount): loads under way are not counted yet."""
        return sum(1 for i in range(self.n) if self.state(i, now) == LOADED)

    def counts(self, i: int) -> tuple[int, int, int]:
        """(requests, cold, hits) of model i."""
        s, f = self.s, self._f
        return int(s[f(_REQ, i)]), int(s[f(_COLD, i)]), int(s[f(_HITS, i)])

    def totals(self) -> dict[str, float]:
        s, g = self.s, self._g
        return {"memory_used_mb": s[g(_MEM_USED)], "disk_used_mb": s[g(_DISK_USED)],
                "loads": int(s[g(_LOADS)]), "downloads": int(s[g(_DOWNLOADS)]), "unloads": int(s[g(_UNLOADS)]),
                "deletes": int(s[g(_DELETES)]), "cache_lookups": int(s[g(_LOOKUPS)]),
                "cache_hits": int(s[g(_HITS_TOTAL)])}

    # -- requests ----------------------------------------------------------------------------
    def _count(self, i: int, hit: bool) -> None:
        s, f, g = self.s, self._f, self._g
        s[f(_PINS, i)] += 1
        s[f(_REQ, i)] += 1
        s[g(_LOOKUPS)] += 1
        if hit:
            s[f(_HITS, i)] += 1
            s[g(_HITS_TOTAL)] += 1
        else:
            s[f(_COLD, i)] += 1

    def _evictable(self, j: int, now: float) -> bool:
        return self.pins(j) == 0 and self.state(j, now) == LOADED

    def _memory_victims(self, i: int, now: float) -> list[int] | None:
        """The least recently used models to unload so model i fits; None when they cannot free enough."""
        s, g = self.s, self._g
        need = s[g(_MEM_USED)] + self.sizes[i] - self.spec.memory_mb
        victims: list[int] = []
        j = int(s[g(_MTAIL)])
        while need > 1e-9 and j >= 0:
            if j != i and self._evictable(j, now):
                victims.append(j)
                need -= self.sizes[j]
            j = int(s[self._f(_MPREV, j)])
        return victims if need <= 1e-9 else None

    def _disk_victims(self, i: int, unloading: set[int]) -> list[int] | None:
        """The least recently used models on disk, not in memory (or about to leave it), to delete so
        model i fits on disk; None when they cannot free enough."""
        if self.spec.disk_mb is None:
            return []
        s, g, f = self.s, self._g, self._f
        need = s[g(_DISK_USED)] + self.sizes[i] - self.spec.disk_mb
        victims: list[int] = []
        j = int(s[g(_DTAIL)])
        while need > 1e-9 and j >= 0:
            free = self.pins(j) == 0 and (s[f(_MEM, j)] == ABSENT or j in unloading)
            if j != i and free:
                victims.append(j)
                need -= self.sizes[j]
            j = int(s[f(_DPREV, j)])
        return victims if need <= 1e-9 else None

    def _unload(self, j: int) -> None:
        s, g = self.s, self._g
        self._unlink(j, _MPREV, _MNEXT, _MHEAD, _MTAIL)
        s[self._f(_MEM, j)] = ABSENT
        s[g(_MEM_USED)] -= self.sizes[j]
        s[g(_UNLOADS)] += 1

    def _delete(self, j: int) -> None:
        s, g = self.s, self._g
        self._unlink(j, _DPREV, _DNEXT, _DHEAD, _DTAIL)
        s[self._f(_DISK, j)] = 0.0
        s[g(_DISK_USED)] -= self.sizes[j]
        s[g(_DELETES)] += 1

    def request(self, i: int, now: float) -> Admission:
        """Admit a request for model i at `now`; pins the model unless the answer is FULL."""
        if not 0 <= i < self.n:
            raise IndexError(f"model {i} is not among the {self.n} models")
        s, f, g, spec = self.s, self._f, self._g, self.spec
        mem = self.state(i, now)
        if mem == LOADED:
            self._count(i, hit=True)
            self._touch_memory(i)
            self._touch_disk(i)
            return Admission(HIT, now)
        if mem == LOADING:
            self._count(i, hit=False)
            self._touch_memory(i)
            self._touch_disk(i)
            return Admission(WAIT, s[f(_READY, i)])
        unloading = self._memory_victims(i, now)
        if unloading is None:
            return Admission(FULL, now)
        download = not self.on_disk(i)
        deleting = self._disk_victims(i, set(unloading)) if download else []
        if deleting is None:
            return Admission(FULL, now)
        for j in unloading:
            self._unload(j)
        for j in deleting:
            self._delete(j)
        if download:
            s[f(_DISK, i)] = 1.0
            s[g(_DISK_USED)] += self.sizes[i]
            s[g(_DOWNLOADS)] += 1
            self._push(i, _DPREV, _DNEXT, _DHEAD, _DTAIL)
        else:
            self._touch_disk(i)
        download_s = spec.download_s if download else 0.0
        ready_at = now + spec.unload_s * len(unloading) + download_s + spec.load_s
        s[f(_MEM, i)] = LOADED if ready_at <= now else LOADING
        s[f(_READY, i)] = ready_at
        s[g(_MEM_USED)] += self.sizes[i]
        s[g(_LOADS)] += 1
        self._push(i, _MPREV, _MNEXT, _MHEAD, _MTAIL)
        self._count(i, hit=False)
        return Admission(LOAD, ready_at, download_s, spec.load_s, tuple(unloading), tuple(deleting))

    def refuse(self, i: int) -> None:
        """Count a request for model i that gave up before room could be made (a miss, never admitted)."""
        s, f, g = self.s, self._f, self._g
        s[f(_REQ, i)] += 1
        s[f(_COLD, i)] += 1
        s[g(_LOOKUPS)] += 1

    def release(self, i: int, now: float) -> bool:
        """The request for model i has ended. With caching Disabled, the model's last request in
        flight unloads it from memory and deletes it from disk: returns True when it did."""
        s, f = self.s, self._f
        pins = s[f(_PINS, i)]
        if pins <= 0:
            raise ValueError(f"model {i} has no request in flight to release")
        s[f(_PINS, i)] = pins - 1
        if self.spec.caching or pins > 1 or s[f(_MEM, i)] == ABSENT:
            return False
        self._unload(i)
        if self.on_disk(i):
            self._delete(i)
        return True


# -- simulation ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Simulation:
    """What an LRU cache does with a sequence of requests served one at a time."""

    requests: int
    hits: int
    loads: int
    downloads: int
    unloads: int  # models unloaded: to make room (Enabled), after each request (Disabled)
    max_loaded: int  # the most models in memory at once

    @property
    def misses(self) -> int:
        return self.requests - self.hits

    @property
    def hit_rate(self) -> float:
        return self.hits / self.requests if self.requests else 0.0


def lru_simulation(sequence: Iterable[Hashable], model_size_mb: float | Mapping[Hashable, float], memory_mb: float,
                   *, disk_mb: float | None = None, caching: bool = True) -> Simulation:
    """Serve `sequence` (model names or any keys, in request order) one request at a time through
    the MME cache and count hits, loads, downloads and unloads.

    `model_size_mb`: one size for every model, or a mapping key -> MB (every key of the sequence).
    """
    keys: Sequence[Hashable] = list(sequence)
    index: dict[Hashable, int] = {}
    for key in keys:
        index.setdefault(key, len(index))
    if isinstance(model_size_mb, Mapping):
        missing = [k for k in index if k not in model_size_mb]
        if missing:
            raise ValueError(f"no size for model {missing[0]!r}")
        sizes = tuple(float(model_size_mb[k]) for k in index)
    else:
        sizes = (float(model_size_mb),) * len(index)
    if not keys:
        return Simulation(0, 0, 0, 0, 0, 0)
    cache = ModelCache(CacheSpec(sizes, float(memory_mb), disk_mb, caching))
    hits = loaded = max_loaded = 0
    for t, key in enumerate(keys):
        i = index[key]
        admission = cache.request(i, float(t))
        if admission.kind == FULL:  # one request at a time: nothing is pinned, so there is always room
            raise AssertionError("the cache could not make room with no request in flight")
        hits += admission.kind == HIT
        if admission.kind == LOAD:
            loaded += 1 - len(admission.unloaded)
        max_loaded = max(max_loaded, loaded)
        if cache.release(i, float(t)):
            loaded -= 1
    totals = cache.totals()
    return Simulation(len(keys), hits, int(totals["loads"]), int(totals["downloads"]), int(totals["unloads"]),
                      max_loaded)
