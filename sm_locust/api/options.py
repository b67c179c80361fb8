"""Keyword arguments -> what `sm-locust run` was asked (`RunArguments`), by the run's own OptionSpecs.

`sm_locust.run(users=8, shape="plateau")` means exactly `sm-locust run --users 8 --shape plateau`:
each keyword is the option of that dest, parsed by its `OptionSpec.parse`, with the same defaults
(including `SM_LOCUST_*` variables) and one-line refusals; an unknown keyword gets the closest names.
Values: text for a value, True/False for a switch, a list for a repeatable option, a dict or list
for any other option is written as JSON, None means "not given" (docs/python-api.md).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from pathlib import PurePath

from sm_locust.config.options import OptionSpec, all_option_specs
from sm_locust.core.arguments import RUN_OPTIONS, RunArguments
from sm_locust.errors import UsageError


def run_specs() -> dict[str, OptionSpec]:
    """dest -> spec of every option `sm-locust run` takes (the keywords)."""
    return {spec.dest: spec for spec in (*all_option_specs(), *RUN_OPTIONS)}


def _is_switch(spec: OptionSpec) -> bool:
    return spec.type is bool and spec.const is True and not spec.forward


def keyword_value(name: str, value: object, spec: OptionSpec) -> object:
    """One keyword's value as its option takes it (OptionSpec.parse does the rest)."""
    if _is_switch(spec):  # a switch: --overwrite
        if not isinstance(value, bool):
            raise UsageError(f"{name}= is a switch ({spec.flag}): pass True or False, got {value!r}")
        return value
    if spec.multiple and isinstance(value, (list, tuple)):
        return [keyword_value(name, item, spec) for item in value]
    if spec.type is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # users=8 is 8; latency_slo_ms=200 is 200.0, as "--latency-slo-ms 200" reads
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(value)
    raise UsageError(f"{name}= takes a number, text or True/False ({spec.flag}), got a {type(value).__name__}")


def run_arguments(options: Mapping[str, object], locust_args: Iterable[str] | None = None) -> RunArguments:
    """What `sm-locust run` would be asked by these keyword arguments (None = not given), parsed by the
    run's OptionSpecs; UsageError for a name that is no option or a value the option refuses."""
    specs = run_specs()
    given: dict[str, object] = {}
    for name, value in options.items():
        if value is None:
            continue
        spec = specs.get(name)
        if spec is None:
            raise UsageError(unknown_option(name, specs))
        given[name] = keyword_value(name, value, spec)
    if isinstance(locust_args, (str, bytes)) or not (locust_args is None or isinstance(locust_args, Iterable)):
        raise UsageError(f"locust_args= takes a list of Locust's arguments, e.g. ['--stop-timeout', '5'], not "
                         f"{type(locust_args).__name__} {locust_args!r}")
    return RunArguments.parse(given, locust_args or (), environment=True)


def unknown_option(name: str, specs: Mapping[str, object]) -> str:
    """`unknown option 'user'=: did you mean users? ...` (close names first)."""
    close = difflib.get_close_matches(name, list(specs), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return (f"unknown option {name}=: {hint}the keywords are the options of `sm-locust run` with underscores "
            "(see `sm-locust run --help`)")
