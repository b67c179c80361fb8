"""The open-loop options (`--arrival`, `--rate-per-user`, `--max-in-flight`) and `OpenLoopSettings`.

Read by the open-loop users and by `ShapeSettings` alike; they live here, below both, because the
shapes import the users (a users -> shapes import would close a cycle).
"""

from __future__ import annotations

from typing import NamedTuple

from sm_locust.config.options import Options, OptionSpec
from sm_locust.plateau.arrival import ARRIVALS

OPTIONS: list[OptionSpec] = [
    OptionSpec("--arrival", "SM_LOCUST_ARRIVAL", None, "open loop: arrival process, constant (default) or poisson",
               convert=ARRIVALS.canonical),
    OptionSpec("--rate-per-user", "SM_LOCUST_RATE_PER_USER", None,
               "open loop: req/s each OpenLoopUser adds (default 1; the user count is rate / this)", float, above=0),
    OptionSpec("--max-in-flight", "SM_LOCUST_MAX_IN_FLIGHT", None,
               "open loop: most outstanding requests per process (default 1000); sends past it are dropped and counted",
               int, minimum=1),
]

# What an open-loop process runs with when the option was not given (None in OPTIONS: "not given"
# is itself information, e.g. --arrival with a closed-loop shape is refused).
DEFAULT_ARRIVAL = "constant"
DEFAULT_RATE_PER_USER = 1.0
DEFAULT_MAX_IN_FLIGHT = 1000


class OpenLoopSettings(NamedTuple):
    """The open-loop options with their defaults applied: what an open-loop process runs with."""

    arrival: str = DEFAULT_ARRIVAL
    rate_per_user: float = DEFAULT_RATE_PER_USER
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT

    @classmethod
    def from_options(cls, options: Options) -> OpenLoopSettings:
        given = {"arrival": options.arrival, "rate_per_user": options.rate_per_user,
                 "max_in_flight": options.max_in_flight}
        return cls(**{k: v for k, v in given.items() if v is not None})
