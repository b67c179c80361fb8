"""Traffic mixes: each request names one of many models (`--target-models`) or inference components
(`--inference-components`), picked by weight from a seeded stream.

`spec` parses a mix (zipf:S:N, uniform:N, name=weight lists, CSV/JSONL files) into a `TargetMix`;
`sampler` picks in O(1) (alias table) from a per-process seeded stream; `pool.MixedPool` applies
the pick to the payload pool every sender draws from; `options` declares the options and checks
them. Per-target figures are recorded by `sm_locust.record.targets`. docs/multi-model.md.
"""

from sm_locust.mix.sampler import AliasTable, Picker
from sm_locust.mix.spec import (
           INFERENCE_COMPONENT,
           TARGET_MODEL,
           TargetMix,
           model_names,
           parse_mix,
           zipf_weights,
)

__all__ = ["INFERENCE_COMPONENT", "TARGET_MODEL", "AliasTable", "Picker", "TargetMix", "model_names", "parse_mix",
           "zipf_weights"]
