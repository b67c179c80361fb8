"""The MME's cache model (endpoint/modelcache.py) on synthetic request sequences: hits and misses,
size-aware least-recently-used eviction, the disk tier, requests joining a load under way, pinned
models, ModelCacheSetting Disabled, and `lru_simulation` against an independent textbook LRU."""

from __future__ import annotations

import multiprocessing
import random
from collections import OrderedDict

import pytest

from sm_locust.endpoint.modelcache import (
    FULL,
    HIT,
    LOAD,
    WAIT,
    CacheSpec,
    ModelCache,
    lru_simulation,
    model_name,
    model_names,
    store_size,
)


def cache(sizes, memory, **kw) -> ModelCache:
    return ModelCache(CacheSpec(tuple(float(s) for s in sizes), float(memory), **kw))


def serve(c: ModelCache, sequence, t0: float = 0.0) -> list[str]:
    """One request at a time (released at once): the kinds, in order."""
    kinds = []
    for t, i in enumerate(sequence):
        kinds.append(c.request(i, t0 + t).kind)
        c.release(i, t0 + t)
    return kinds


def textbook_lru_hits(sequence, capacity: int) -> int:
    held: OrderedDict = OrderedDict()
    hits = 0
    for key in sequence:
        if key in held:
            hits += 1
            held.move_to_end(key)
        else:
            held[key] = True
            if len(held) > capacity:
                held.popitem(last=False)
    return hits


def zipf_sequence(n_models: int, s: float, length: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    weights = [1.0 / (rank ** s) for rank in range(1, n_models + 1)]
    return rng.choices(model_names(n_models), weights=weights, k=length)


def test_model_names_are_one_based_and_zero_padded():
    assert model_names(3) == ["model-0001.tar.gz", "model-0002.tar.gz", "model-0003.tar.gz"]
    assert model_name(999, 1000) == "model-1000.tar.gz"
    assert model_name(0, 25_000) == "model-00001.tar.gz"


def test_least_recently_used_model_leaves_first():
    c = cache([100, 100, 100], memory=250)  # two fit
    a, b, d = 0, 1, 2
    assert serve(c, [a, b, a, d, b]) == [LOAD, LOAD, HIT, LOAD, LOAD]
    # d evicted b (a was used more recently); b then evicted a (d more recent than a)
    assert c.state(a, 10) == 0 and c.state(b, 10) > 0 and c.state(d, 10) > 0
    assert c.totals()["unloads"] == 2 and c.totals()["memory_used_mb"] == 200


def test_simulation_equals_a_textbook_lru_on_zipf_mixes():
    for n_models, s, slots, seed in [(200, 1.1, 20, 1), (50, 0.8, 10, 2), (1000, 1.3, 64, 3), (30, 0.0, 29, 4)]:
        sequence = zipf_sequence(n_models, s, 5000, seed)
        sim = lru_simulation(sequence, 100, memory_mb=100 * slots)
        assert sim.hits == textbook_lru_hits(sequence, slots)
        assert sim.requests == 5000 and sim.misses == 5000 - sim.hits == sim.loads
        assert sim.max_loaded <= slots and sim.unloads == sim.loads - sim.max_loaded  # ended full: nothing else left


def test_sizes_count_not_model_numbers():
    # 1,000 MB of memory: a 900 MB model pushes out every small one it needs room from
    sizes = {"big": 900, "s1": 300, "s2": 300, "s3": 300}
    sim = lru_simulation(["s1", "s2", "s3", "s1", "big", "s1", "s2"], sizes, memory_mb=1000)
    # s1 s2 s3 load (900 MB), s1 hits, big evicts s2 s3 s1 (LRU order: s2, s3, then s1), s1 evicts big, s2 loads
    assert (sim.hits, sim.loads, sim.unloads) == (1, 6, 4)
    with pytest.raises(ValueError, match="does not fit in 800 MB"):
        lru_simulation(["big"], sizes, memory_mb=800)


def test_an_unloaded_model_stays_on_disk_and_is_not_downloaded_again():
    c = cache([100, 100], memory=100, download_s=2.0, load_s=1.0)
    first = c.request(0, 0.0)
    assert (first.kind, first.download_s, first.load_s, first.ready_at) == (LOAD, 2.0, 1.0, 3.0)
    c.release(0, 3.0)
    c.request(1, 10.0), c.release(1, 13.0)  # unloads model 0 to make room
    again = c.request(0, 20.0)
    assert (again.kind, again.download_s, again.unloaded) == (LOAD, 0.0, (1,))
    assert again.ready_at == 21.0  # load only
    assert c.totals()["downloads"] == 2 and c.totals()["loads"] == 3


def test_a_full_disk_deletes_the_least_recently_used_model_not_in_memory():
    c = cache([100, 100, 100], memory=100, disk_mb=200, download_s=1.0)
    serve(c, [0, 1])  # disk: 0, 1; memory: 1
    load = c.request(2, 5.0)
    assert load.kind == LOAD and load.unloaded == (1,) and load.deleted == (0,)
    c.release(2, 5.0)
    assert not c.on_disk(0) and c.on_disk(1) and c.on_disk(2)
    assert c.request(0, 6.0).download_s == 1.0  # deleted: downloaded again
    assert c.totals()["downloads"] == 4


def test_unloads_that_make_room_delay_the_load():
    c = cache([100, 100, 100], memory=200, load_s=1.0, unload_s=0.5)
    serve(c, [0, 1])
    admission = c.request(2, 100.0)
    assert admission.unloaded == (0,) and admission.ready_at == pytest.approx(100.0 + 0.5 + 1.0)


def test_requests_during_a_load_wait_for_it_and_are_misses():
    c2 = cache([100], memory=100, download_s=1.0, load_s=1.0)
    first = c2.request(0, 0.0)
    second = c2.request(0, 1.5)
    assert (first.kind, second.kind) == (LOAD, WAIT)
    assert second.ready_at == 2.0 and second.wait_s(1.5) == 0.5 and second.cold
    assert c2.loaded_count(1.9) == 0 and c2.loaded_count(2.0) == 1  # LoadedModelCount counts finished loads
    third = c2.request(0, 2.5)
    assert third.kind == HIT and not third.cold and third.wait_s(2.5) == 0
    assert c2.counts(0) == (3, 2, 1)
    assert c2.totals()["downloads"] == 1 and c2.totals()["loads"] == 1  # one load for the three


def test_models_in_use_are_not_unloaded_and_a_full_cache_says_so():
    c = cache([100, 100], memory=100, load_s=1.0)
    c.request(0, 0.0)  # in flight (pinned)
    full = c.request(1, 5.0)
    assert full.kind == FULL and c.counts(1) == (0, 0, 0) and c.pins(1) == 0  # nothing changed
    c.release(0, 5.0)
    assert c.request(1, 5.1).kind == LOAD


def test_a_load_under_way_is_not_unloaded_even_without_requests():
    c = cache([100, 100], memory=100, load_s=10.0)
    c.request(0, 0.0)
    c.release(0, 1.0)  # its request gave up (ModelNotReadyException); the load goes on
    assert c.request(1, 2.0).kind == FULL
    assert c.request(1, 10.0).kind == LOAD  # loaded at 10: now it can go


def test_cache_setting_disabled_loads_for_every_request_but_shares_one_in_flight():
    sim = lru_simulation(["a", "a", "b", "a"], 100, memory_mb=1000, caching=False)
    assert (sim.hits, sim.loads, sim.downloads, sim.unloads, sim.max_loaded) == (0, 4, 4, 4, 1)
    c = cache([100], memory=1000, caching=False, load_s=1.0)
    c.request(0, 0.0)
    joined = c.request(0, 0.5)  # in flight together: one load
    assert joined.kind == WAIT
    assert c.release(0, 1.2) is False  # still used by the other request
    assert c.release(0, 1.3) is True  # the last one unloads and deletes it
    assert not c.on_disk(0) and c.totals()["memory_used_mb"] == 0
    assert c.request(0, 2.0).kind == LOAD


def test_release_without_request_is_a_bug():
    c = cache([100], memory=100)
    with pytest.raises(ValueError, match="no request in flight"):
        c.release(0, 0.0)


def test_spec_problems_are_one_line_each():
    assert CacheSpec((100.0,), 50.0).problems() == ["a 100 MB model does not fit in 50 MB of instance memory"]
    assert "must hold what memory holds" in CacheSpec((10.0,), 100.0, disk_mb=50.0).problems()[0]
    assert CacheSpec((), 100.0).problems() == ["the endpoint needs at least one model"]


@pytest.mark.e2e
def test_a_shared_memory_store_is_the_same_cache_in_every_process():
    """The endpoint keeps the store in a shared-memory array made before gunicorn forks."""
    spec = CacheSpec((100.0,) * 4, 200.0, load_s=1.0)
    array = multiprocessing.get_context("fork").Array("d", store_size(4), lock=True)
    ModelCache(spec, array.get_obj())  # the master makes it (fresh)

    def worker(model: int) -> None:
        with array.get_lock():
            ModelCache(spec, array.get_obj(), fresh=False).request(model, 0.0)

    procs = [multiprocessing.get_context("fork").Process(target=worker, args=(m,)) for m in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(10)
    seen = ModelCache(spec, array.get_obj(), fresh=False)
    assert seen.counts(0) == (1, 1, 0) and seen.counts(1) == (1, 1, 0)
    assert seen.totals()["memory_used_mb"] == 200 and seen.request(2, 0.5).kind == FULL  # both pinned, both loading
