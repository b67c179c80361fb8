"""A continuous batch remembers the path to a load, so the token search starts every step from an idle
endpoint: the cause shown on the emulation's own scheduler, and the driver's settle between steps."""

from __future__ import annotations

import itertools
import random

import pytest

from sm_locust.endpoint.llm import ContinuousBatcher, LlmConfig, Sequence
from sm_locust.measure.timeline import Second
from sm_locust.plateau.tokens import (
    ONE_AT_A_TIME,
    SETTLE_MAX_S,
    SETTLE_MIN_S,
    Bucket,
    TokenDriver,
    TokenPlateauSearch,
    settle_s,
    spread_rate,
)

PROMPT, OUTPUT = 512, 64  # README's example: synthetic:512~64, --max-new-tokens 64


def closed_loop(path: list[tuple[int, float]], seed: int = 1, spawn_gap_s: float = 0.01,
                turnaround_s: float = 0.04) -> list[float]:
    """ITL p95 (ms) of the last `path` level: closed-loop users (no think time, a client turnaround of
    0..`turnaround_s`) on the emulation's scheduler, run through the `(users, seconds)` levels in
    order; users start `spawn_gap_s` apart (Locust at 100 users/s) and the newest stop first."""
    rng = random.Random(seed)
    batcher = ContinuousBatcher(LlmConfig().model())
    now, users, ids = 0.0, {}, itertools.count()
    p95s = []
    for target, seconds in path:
        while len(users) > target:
            sequence = users.pop(max(users))[1]
            if sequence is not None:
                batcher.cancel(sequence)
        for i in range(target - len(users)):
            users[next(ids)] = [now + i * spawn_gap_s, None]
        end, warm, gaps = now + seconds, now + 2.0, []
        while now < end:
            for state in users.values():
                if state[0] is not None and state[0] <= now:
                    state[1], state[0] = Sequence(PROMPT, OUTPUT, arrived=now), None
                    batcher.submit(state[1])
            step = batcher.plan()
            if step is None:
                now = min(s[0] for s in users.values() if s[0] is not None)
                continue
            now += step.duration_s
            for done in batcher.finish(step, now):
                for state in users.values():
                    if state[1] is done:
                        state[0], state[1] = now + rng.random() * turnaround_s, None
                if done.arrived >= warm:
                    gaps.extend(b - a for a, b in itertools.pairwise(done.token_times))
        gaps.sort()
        p95s.append(round(gaps[int(len(gaps) * 0.95)] * 1000.0, 1))
    return p95s


def test_the_same_load_reads_differently_after_a_queue_and_alike_from_idle():
    model = LlmConfig().model()
    decode = model.step_s(9) * 1000.0  # a decode step at 9 users
    prefill = model.step_s(9, PROMPT) * 1000.0  # ... that also prefills one prompt
    grown = closed_loop([(1, 10), (2, 10), (4, 10), (8, 30)])[-1]
    after_queue = closed_loop([(1, 10), (2, 10), (4, 10), (8, 10), (16, 10), (32, 30), (9, 30)])[-1]
    # grown: users that entered the batch together stay in lockstep, few steps carry a prefill
    assert grown < 40.0 < decode + 10.0
    # after 32 users queued for 16 slots, 9 users' prefills are spread: the p95 gap is a prefill step
    assert after_queue == pytest.approx(prefill, abs=1.0) and after_queue > 2 * grown
    # from idle, the same load reads the same whatever came before
    fresh = [closed_loop([(9, 30)], seed=s)[-1] for s in (1, 2, 3)]
    assert len(set(fresh)) == 1 and fresh[0] < 40.0
    # started one by one (as the token search starts them), each brings its own prefill step, every time
    apart = [closed_loop(path, seed=s, spawn_gap_s=0.6)[-1] for s in (1, 2, 3)
             for path in ([(9, 30)], [(1, 10), (16, 10), (32, 20), (9, 30)])]
    assert apart == [pytest.approx(prefill, abs=1.0)] * 6


def second(t: float, users: int) -> Second:
    """One second of a step whose answers took 3 s (its p95: the settle after it)."""
    return Second(t=t, users=users, spawning=False, requests=4, failures=0, hist={3000: 4})


def tokens(seconds) -> Bucket:
    return Bucket(requests=4 * len(seconds), output_tokens=256 * len(seconds), server=4 * len(seconds),
                  arrived=256.0 * sum(s.interval for s in seconds))


def test_the_token_driver_stops_the_users_between_steps():
    driver = TokenDriver(TokenPlateauSearch(1, 64), tokens, 10.0, min_step_s=6.0)
    timeline: list[Second] = []
    users = [driver.tick(1000.0, timeline).users]
    for i in range(1, 40):
        users.append(driver.tick(1000.0 + i, timeline).users)
        timeline.append(second(1000.0 + i, users[-1] or 0))
    assert settle_s(driver.measurements[0]) == pytest.approx(3.0, abs=0.2)  # the step's p95
    # each step is followed by 3 ticks at 0 users (the settle), then the next step's users
    runs = [(u, len(list(g))) for u, g in itertools.groupby(users)]
    zeros = [n for u, n in runs if u == 0]
    assert len(zeros) == len(driver.measurements) >= 3 and set(zeros[:-1]) == {3}  # the last one still runs
    assert [u for u, _ in runs][:4] == [1, 0, driver.measurements[1].users, 0]
    # no step's window holds a second of a settle
    for step in driver.measurements:
        assert step.users != 0 and step.duration_s <= 10.0
    assert 0 < SETTLE_MIN_S <= 3.0 <= SETTLE_MAX_S


def test_the_next_steps_users_start_over_one_answer():
    driver = TokenDriver(TokenPlateauSearch(1, 64), tokens, 10.0, min_step_s=6.0)
    timeline: list[Second] = []
    rates = [(driver.tick(1000.0, timeline).users, driver.spawn_rate)]
    for i in range(1, 40):
        decision = driver.tick(1000.0 + i, timeline)
        rates.append((decision.users, driver.spawn_rate))
        timeline.append(second(1000.0 + i, decision.users or 0))
    assert rates[0] == (1, None)  # the first step: nothing measured yet
    assert all(rate is None for users, rate in rates if users == 0)  # the users stop at once
    after = rates[[users for users, _ in rates].index(0):]  # from the first settle on
    started = [(users, rate) for users, rate in after if users]
    # one by one (Locust starts floor(rate) users at once), over at least one answer (3 s)
    assert started and all(rate == pytest.approx(min(users / 3.0, ONE_AT_A_TIME), rel=0.05) for users, rate in started)
    assert all(rate < 2.0 for _, rate in started)
    assert spread_rate(4, driver.measurements[0]) == pytest.approx(4 / 3.0, rel=0.05)
    assert spread_rate(16, driver.measurements[0]) == ONE_AT_A_TIME


def test_a_stop_while_settling_judges_no_step():
    driver = TokenDriver(TokenPlateauSearch(1, 64), tokens, 10.0, min_step_s=6.0)
    timeline: list[Second] = []
    driver.tick(1000.0, timeline)
    now = 1000.0
    while not driver.measurements:
        now += 1.0
        timeline.append(second(now, driver.tick(now, timeline).users or 0))
    assert driver.settle_until is not None
    driver.finish(now + 0.5, timeline, "run time reached")
    assert len(driver.measurements) == 1  # the settle's 0-user seconds were not judged as a step


def test_without_settle_the_next_step_starts_at_once():
    driver = TokenDriver(TokenPlateauSearch(1, 64), tokens, 10.0, min_step_s=6.0, settle=False)
    timeline: list[Second] = []
    users = [driver.tick(1000.0, timeline).users]
    for i in range(1, 20):
        users.append(driver.tick(1000.0 + i, timeline).users)
        timeline.append(second(1000.0 + i, users[-1] or 0))
    assert 0 not in users
