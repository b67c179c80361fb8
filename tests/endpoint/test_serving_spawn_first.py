"""`serve`'s gunicorn master starts its own threads' work (the CloudWatch publisher, which imports
boto3) only once its first workers are forked: what the master imports before a fork, a gevent
worker inherits half-imported or unpatched."""

from __future__ import annotations

from gunicorn.arbiter import Arbiter

from sm_locust.endpoint.serving import SpawnFirstArbiter


def test_the_masters_work_starts_after_the_first_workers_are_forked_and_once(monkeypatch):
    events: list[str] = []
    monkeypatch.setattr(Arbiter, "manage_workers", lambda self: events.append("spawn"))

    class Recording(SpawnFirstArbiter):
        def __init__(self) -> None:  # no app, no sockets: only the order of calls matters here
            pass

        def after_first_spawn(self) -> None:
            events.append("publisher")

    arbiter = Recording()
    for _ in range(3):  # gunicorn's loop manages its workers every second
        arbiter.manage_workers()
    assert events == ["spawn", "publisher", "spawn", "spawn"]
