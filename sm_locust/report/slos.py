"""The SLOs a run was given (options.json's parsed options), as the report's lines and verdicts read them."""

from __future__ import annotations

from dataclasses import dataclass

from sm_locust.record.model import DEFAULT_SLO_PERCENTILE


@dataclass(frozen=True)
class RunSlos:
    """`--latency-slo-ms`, `--slo-percentile`, `--ttft-slo-ms`, `--itl-slo-ms` as the run had them (None: not given)."""

    latency_slo_ms: float | None = None
    slo_percentile: float | None = None
    ttft_slo_ms: float | None = None
    itl_slo_ms: float | None = None

    @property
    def percentile(self) -> float:
        """The percentile the SLOs bound (the default when none was given)."""
        return self.slo_percentile or DEFAULT_SLO_PERCENTILE

    def token_slo_ms(self, kind: str) -> float | None:
        """The token latency SLO of `kind` 'ttft' or 'itl'."""
        return {"ttft": self.ttft_slo_ms, "itl": self.itl_slo_ms}.get(kind)
