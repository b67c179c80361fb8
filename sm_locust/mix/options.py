"""The traffic-mix options (`--target-models`, `--inference-components`, `--seed`) and the one
function that reads them (`mix_settings`).

Declared once as `OptionSpec`s (listed in `sm_locust.config.options.OPTION_PROVIDERS`), so they work on
the command line, as `SM_LOCUST_*` variables, in locust.conf, in the web UI (where a file path is
refused: the browser may pick a generated or written-out mix, not make the tool read a file) and
in a sweep's `load:`. `sm_locust.payloads.options.prepare_payloads` applies them, so `sm-locust
run` checks them before anything starts and every Locust process builds the same mix.

What "the same sequence" means (docs/multi-model.md): the targets are drawn, in the order the
process issues its requests, from a stream seeded by `--seed` and the process's index (0 for a
local runner; Locust's worker index, 0..W-1, with `--processes` or master/worker). So:
- one process, one user: the endpoint receives the same sequence of targets on every run;
- one process, several users: the process issues the same sequence; which user sends the n-th
  request depends on timing, not the sequence;
- W processes / workers: worker k issues the same sequence as worker k did last time; how the W
  sequences interleave at the endpoint depends on timing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sm_locust.config.options import Options, OptionSpec
from sm_locust.errors import UsageError
from sm_locust.mix.spec import INFERENCE_COMPONENT, TARGET_MODEL, TargetMix, parse_mix

DEFAULT_SEED = 0

OPTIONS: list[OptionSpec] = [
    OptionSpec("--target-models", "SM_LOCUST_TARGET_MODELS", "",
               "multi-model endpoint traffic mix: each request's TargetModel picked by weight from zipf:S:N, uniform:N "
               "(models model-0001.tar.gz ...), name=weight,... or a .csv/.jsonl file of name,weight "
               "(docs/multi-model.md); one Locust entry per endpoint, per-model figures in summary.json `targets`",
               web_check=lambda text: parse_mix(text, TARGET_MODEL, allow_files=False)),
    OptionSpec("--inference-components", "SM_LOCUST_INFERENCE_COMPONENTS", "",
               "inference-component traffic mix: each request's InferenceComponentName picked by weight from "
               "a=0.7,b=0.3 or a .csv/.jsonl file of name,weight",
               web_check=lambda text: parse_mix(text, INFERENCE_COMPONENT, allow_files=False)),
    OptionSpec("--seed", "SM_LOCUST_SEED", DEFAULT_SEED,
               "seed of the traffic mix: the same seed sends the same sequence of targets from each process "
               "(payload selection has its own --payload-seed)", int),
]


@dataclass(frozen=True)
class MixSettings:
    """The mix of one run (None: every request names the same target, or none) and its seed."""

    mix: TargetMix | None
    seed: int = DEFAULT_SEED

    def describe(self) -> dict | None:
        """summary.json's `mix`, or None without one."""
        return None if self.mix is None else {**self.mix.describe(), "seed": self.seed}


def mix_settings(options: Options, *, split: int = 1) -> MixSettings:
    """The mix the options ask for, checked (one-line UsageError): at most one mix, not beside the single
    target it replaces, not with `--split` (a fan-out's parts are prepared before the test)."""
    models, components, seed = options.target_models, options.inference_components, options.seed
    if models and components:
        raise UsageError("--target-models and --inference-components both given; a run sends one mix: "
                         "drop one of them")
    if models and options.target_model:
        raise UsageError("--target-model and --target-models both given; use --target-models alone "
                         "(a one-model mix is --target-models NAME)")
    if components and options.inference_component:
        raise UsageError("--inference-component and --inference-components both given; "
                         "use --inference-components alone")
    if not (models or components):
        return MixSettings(None, seed)
    mix = (_parse(models, TARGET_MODEL, "SM_LOCUST_TARGET_MODELS") if models
           else _parse(components, INFERENCE_COMPONENT, "SM_LOCUST_INFERENCE_COMPONENTS"))
    if split > 1:
        raise UsageError(f"{mix.flag} does not combine with --split {split}: a fan-out's parts are prepared before the "
                         "test with one target; drop --split or the mix")
    return MixSettings(mix, seed)


def _parse(text: str, field: str, variable: str) -> TargetMix:
    """`parse_mix`, its one-line error naming `variable` when the mix came from it (the user set no flag)."""
    try:
        return parse_mix(text, field)
    except UsageError as exc:
        if os.environ.get(variable, "").strip() == text.strip():
            raise UsageError(f"{variable} (read as {exc.message})") from None
        raise
