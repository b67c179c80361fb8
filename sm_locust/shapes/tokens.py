"""The plateau search on output tokens (`--objective output-tokens`): its options and wiring.

The search (`sm_locust.plateau.tokens`) looks for the most output tokens/s while TTFT and ITL stay
under their SLOs at `--slo-percentile`. Refused before anything starts (exit 2): TTFT / ITL SLOs
without `--stream`, SLOs without the objective, the objective with another shape or with
`--search-mode rate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sm_locust.config.options import Options, OptionSpec
from sm_locust.errors import UsageError
from sm_locust.measure.steady import DEFAULT_SLO_PERCENTILE, MODE_RATE
from sm_locust.plateau.conditions import Condition
from sm_locust.plateau.search import PlateauSearch
from sm_locust.plateau.tokens import (
    OBJECTIVE,
    TokenDriver,
    TokenPlateauSearch,
    TokenSLO,
)

REQUESTS = "requests"
OBJECTIVES = (REQUESTS, OBJECTIVE)

OPTIONS: list[OptionSpec] = [
    OptionSpec("--objective", "SM_LOCUST_OBJECTIVE", REQUESTS,
               "plateau shape: what the search maximises: requests (goodput, default) or output-tokens (LLM output "
               "tokens/s, with --ttft-slo-ms / --itl-slo-ms)", choices=OBJECTIVES, group="plateau"),
    OptionSpec("--ttft-slo-ms", "SM_LOCUST_TTFT_SLO_MS", None,
               "LLM plateau: time-to-first-token SLO in ms at --slo-percentile; a step above it is not acceptable "
               "(needs --stream)", float, above=0, group="slo"),
    OptionSpec("--itl-slo-ms", "SM_LOCUST_ITL_SLO_MS", None,
               "LLM plateau: inter-token latency SLO in ms at --slo-percentile (needs --stream)",
               float, above=0, group="slo"),
]


@dataclass(frozen=True)
class TokenObjective:
    """`--objective output-tokens` and its SLOs."""

    percentile: float = DEFAULT_SLO_PERCENTILE
    ttft_slo_ms: float | None = None
    itl_slo_ms: float | None = None

    def constraints(self) -> list[Condition]:
        out: list[Condition] = []
        if self.ttft_slo_ms is not None:
            out.append(TokenSLO("ttft", self.percentile, self.ttft_slo_ms))
        if self.itl_slo_ms is not None:
            out.append(TokenSLO("itl", self.percentile, self.itl_slo_ms))
        return out

    def check(self, shape: str | None, search_mode: str) -> None:
        if shape != "plateau":
            raise UsageError(f"--objective {OBJECTIVE} is what the plateau search "
                             "maximises: use it with --shape plateau")
        if search_mode == MODE_RATE:
            raise UsageError(f"--objective {OBJECTIVE} steps users: drop --search-mode rate")

    def search(self, start: float, max_users: float, conditions: list[Condition]) -> TokenPlateauSearch:
        return TokenPlateauSearch(start, max_users, conditions=[*conditions, *self.constraints()],
                                  extend_unstable=False,
                                  percentile=self.percentile)

    @staticmethod
    def driver(search: PlateauSearch, tokens: Any, **kwargs) -> TokenDriver:
        """`tokens(seconds)` gives the answers and tokens of timeline seconds (`LlmStats.over`)."""
        if tokens is None:
            raise UsageError(f"--objective {OBJECTIVE} needs the run's token figures: run it with the default "
                             "locustfile (sm_locust/locustfiles/sagemaker.py)")
        return TokenDriver(search, tokens, **kwargs)


def token_objective(options: Options, percentile: float) -> TokenObjective | None:
    """The objective from the options (None: the default, requests), checked (one line each)."""
    objective = options.objective
    ttft, itl = options.ttft_slo_ms, options.itl_slo_ms
    slos = [flag for flag, value in (("--ttft-slo-ms", ttft), ("--itl-slo-ms", itl)) if value is not None]
    if slos and not options.stream:
        raise UsageError(f"{' and '.join(slos)} need{'s' if len(slos) == 1 else ''} --stream true: time to first token "
                         "and inter-token latency are measured on response streams")
    if objective == REQUESTS:
        if slos:
            raise UsageError(f"{' and '.join(slos)} bound{'s' if len(slos) == 1 else ''} the plateau on tokens: "
                             f"add --objective {OBJECTIVE}")
        return None
    return TokenObjective(percentile, ttft, itl)
