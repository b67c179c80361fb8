"""Feed a search through a `plateau.driver.SearchDriver` one second at a time, as the plateau shape
does: a new load's first second is its ramp, then steady seconds, until the search stops."""

from __future__ import annotations

from typing import Any


def feed(driver: Any, source: Any, limit: int = 5000) -> list:
    """Feed `driver` the seconds of `source` (a `plateau.synthetic.SyntheticEndpoint`, or any object with
    its `clock` and `users_step`) until it stops; the timeline fed. Fails past `limit` seconds."""
    timeline: list = []
    users = None
    decision = driver.tick(source.clock, timeline)
    while not decision.stop:
        ramp = decision.users != users
        users = decision.users
        timeline.extend(source.users_step(users, seconds=0 if ramp else 1, ramp_s=1 if ramp else 0))
        decision = driver.tick(source.clock, timeline)
        assert len(timeline) < limit, "the search never stopped"
    return timeline
