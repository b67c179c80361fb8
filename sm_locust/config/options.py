"""The sm-locust options: declared once, registered on Locust's parser and on `sm-locust run`, and
parsed once into `Options`.

Registering through `events.init_command_line_parser` means one set of options works everywhere
Locust reads options: the command line, `SM_LOCUST_*` environment variables, `locust.conf`, and the
web UI (where they show and can be edited before each swarm); in distributed runs the master
forwards them to the workers. `sm-locust run` declares the same options on its own parser and
forwards the ones given to the Locust process unchanged.

Each feature declares its options as a list of `OptionSpec` in its own module, listed in
`OPTION_PROVIDERS`. An `OptionSpec` carries the option's default, type, choices and range once:
argparse's `type=` (the CLI, locust.conf), the environment variables (`from_env`), the web UI's form
text, a sweep's `load:` and the Python API all go through `OptionSpec.parse`, so a bound changed in
the spec is refused everywhere alike.

One parse per process: `parse_options(source)` turns a mapping of the options (a command's
`vars(args)`, Locust's parsed options through `locust_values`, with the web UI's strings, a sweep's
`load:`, the Python API's keywords) into `Options`:
every option typed, in range, its default filled. The settings classes (`SageMakerSettings`,
`ShapeSettings`, `PayloadSettings`, ...) are built from `Options` and never parse text themselves;
garbage is a one-line `UsageError` naming the flag and the value, wherever it came from.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, SupportsFloat, SupportsIndex

from sm_locust.errors import UsageError
from sm_locust.util.numbers import check_number

# a command line's parser or one of its argument groups: what options are declared on
ArgumentContainer = argparse._ActionsContainer
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")


def option_value(options: Mapping[str, object] | None, name: str) -> Any:
    """The option `name` (dest) from a mapping of options (None: none given); None when unset or empty.
    A namespace is refused: a command reads its own in cli/ and hands down `vars(args)`, and a Locust
    process's goes through `locust_values`, so nothing else reads one."""
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise TypeError(f"options come as a mapping (dest -> value), not {type(options).__name__}: pass "
                        "vars(namespace), or locust_values(parsed_options) for Locust's")
    value = options.get(name)
    return None if value == "" else value


def locust_values(parsed_options: object) -> dict[str, object]:
    """Locust's parsed options (its argparse namespace, which the web UI's form changes between swarms)
    as a mapping: the one place a Locust process's namespace is read. None: no options."""
    return {} if parsed_options is None else dict(vars(parsed_options))


def settings_fields(settings_class: type, options: Options) -> dict[str, Any]:
    """The values of a settings dataclass's fields, by dest name, from parsed `Options`."""
    return {f.name: options[f.name] for f in fields(settings_class) if f.name in options}


def parse_bool(value: object, flag: str | None = None, default: bool = False) -> bool:
    """true/false, on/off, yes/no, 1/0 (any case) or a bool; None -> `default`; else a UsageError."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise UsageError(f"{flag + ' ' if flag else ''}must be true or false (or on/off, yes/no, 1/0), got {value!r}")


def parse_number(value: object, flag: str, cast: type = float, default: object = None, **bounds: float) -> Any:
    """`value` as a finite float (or an int with `cast=int`) within `bounds` (minimum, maximum, above,
    below: `sm_locust.util.numbers`); None or "" -> `default`; else a UsageError naming `flag`."""
    if value is None or value == "":
        return default
    return check_number(value, flag, cast, **bounds)


class _BadArgument(argparse.ArgumentTypeError, ValueError):
    """argparse prints its text after the flag; an env-var default catches it as a ValueError."""


def _as_number(value: object) -> float | None:
    """`value` as a float when it reads as one (text or a number), else None."""
    if not isinstance(value, (str, bytes, SupportsFloat, SupportsIndex)):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class OptionSpec:
    """One option, as Locust and `sm-locust run` both declare it: its flag, variable, default, type
    (None = text, bool, int, float), choices, range and, for text with a vocabulary of its own
    (a registry's names), `convert`: text -> the canonical value, or a UsageError."""

    flag: str
    env_var: str
    default: Any
    help: str
    type: type | None = None  # None = str
    web_ui: bool = True
    choices: tuple | None = None
    forward: bool = True  # `sm-locust run` passes it on to the Locust process
    # text typed in the web UI form -> a one-line UsageError when it cannot work
    web_check: Callable[[str], object] | None = None
    minimum: float | None = None  # numbers: the range (sm_locust.util.numbers), wherever the value comes from
    above: float | None = None
    maximum: float | None = None
    below: float | None = None
    convert: Callable[[str], object] | None = None
    hint: Callable[[float], str] | None = None  # numbers: advice appended when the range refuses a value
    group: str = ""  # a key of GROUPS: where --help and the web UI show it; "" = its provider's group
    const: Any = None  # the value of the flag given alone (`--dashboard` = `--dashboard auto`); None: it takes one
    name: str = ""  # the dest when it is not the flag's (`--metrics-interval` -> metrics_interval_s)
    multiple: bool = False  # repeatable (`--max-p95-ms 200 --max-p95-ms predict=150`): a tuple, each item parsed
    metavar: str | None = None
    short: str = ""  # a one-letter alias on the command line (`-u` for `--users`)

    @property
    def dest(self) -> str:
        return self.name or self.flag.lstrip("-").replace("-", "_")

    @property
    def bounds(self) -> dict[str, float]:
        pairs = (("minimum", self.minimum), ("above", self.above), ("maximum", self.maximum), ("below", self.below))
        return {k: v for k, v in pairs if v is not None}

    def parse(self, value: object, name: str | None = None) -> Any:
        """`value` (text from a command line, a variable or a form; or a typed value) as this option's
        type, in its range and among its choices; None or "" -> None (not given). A one-line
        UsageError naming the option (`name`, default the flag) otherwise."""
        if value is None or value == "":
            return None
        if self.multiple:
            items = value if isinstance(value, (list, tuple)) else [value]
            single = replace(self, multiple=False)
            return tuple(single.parse(item, name) for item in items) or None
        name = self.flag if name is None else name
        if self.type is bool:
            parsed: object = parse_bool(value, name)
        elif self.type in (int, float):
            try:
                parsed = check_number(value, name, self.type, **self.bounds)
            except UsageError as exc:
                number = _as_number(value)
                advice = self.hint(number) if self.hint and number is not None else ""
                raise UsageError(f"{exc.message.strip()}{advice}") from None
        elif self.convert is not None:
            try:
                parsed = self.convert(str(value))
            except UsageError as exc:
                named = not name or exc.message.startswith(name)  # a rule that words its own flag
                raise UsageError(exc.message if named else f"{name}: {exc.message}") from None
        else:
            if isinstance(value, (dict, list, tuple, set)):
                raise UsageError(f"{name + ' ' if name else ''}takes text, got {value!r}")
            parsed = str(value)
        if self.choices and parsed not in self.choices:
            raise UsageError(f"{name + ' ' if name else ''}{value!r} is unknown; choose one of: "
                             f"{', '.join(map(str, self.choices))}")
        return parsed

    def argparse_kwargs(self) -> dict:
        kwargs: dict[str, object] = {"default": self.default, "help": self.help}
        if self.type is not None or self.convert is not None or self.multiple:
            kwargs["type"] = self._argument
        if self.choices:
            kwargs["choices"] = list(self.choices)
        if self.const is not None:
            kwargs.update(nargs="?", const=self.const)
        if self.name:
            kwargs["dest"] = self.name
        if self.metavar:
            kwargs["metavar"] = self.metavar
        if self.multiple:
            kwargs["action"] = "append"
        return kwargs

    def help_text(self, env: bool = True) -> str:
        """The help as --help shows it: the text, the default (from the spec, so it is written once) and
        the variable."""
        default = self.default
        shown = "" if default is None or default is False or default == "" else (
            f" (default {default:g})" if isinstance(default, float) else f" (default {default})")
        return f"{self.help}{shown}{f' [{self.env_var}]' if env and self.env_var else ''}"

    def _argument(self, text: str) -> Any:
        """argparse's `type=`: `parse` with argparse's error type (it prefixes "argument --x: ")."""
        try:
            return replace(self, multiple=False).parse(text, name="")
        except UsageError as exc:
            raise _BadArgument(exc.message.strip()) from None

    def from_env(self, text: str) -> Any:
        """The value of `SM_LOCUST_*` text for this option, or a one-line UsageError naming the variable
        (argparse does not check a default, so garbage would otherwise surface mid-run as a traceback)."""
        kwargs = self.argparse_kwargs()
        try:
            value = kwargs.get("type", str)(text)
        except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
            raise UsageError(f"{self.env_var}={text!r} is not valid for {self.flag}: {exc}") from None
        if self.choices and value not in self.choices:
            raise UsageError(f"{self.env_var}={text!r} is not valid for {self.flag}: choose one of "
                             f"{', '.join(self.choices)}")
        return value


# The groups an option shows in (`locust --help`, `sm-locust run --help`, the web UI's form), in
# order; the shapes' own groups are their names in `sm_locust.shapes.SHAPES`, and the web UI puts
# the chosen shape's group first.
GROUPS: dict[str, str] = {
    "endpoint": "Endpoint",
    "payload": "Payload",
    "shape": "Load shape (any shape)",
    "step": "Step shape",
    "plateau": "Plateau shape",
    "phases": "Phases shape (Inference Recommender pattern)",
    "open": "Open-loop shape (constant rate)",
    "traffic": "Traffic shape (rate phases)",
    "slo": "SLOs and stop conditions",
    "llm": "LLM endpoints",
    "mix": "Traffic mix (multi-model, inference components)",
    "output": "Output",
    "publish": "Live metrics (CloudWatch custom metrics, Prometheus)",
}

# ("module:attribute" of a list of OptionSpec, the group of its options unless one names its own);
# a feature adds its own line here.
OPTION_PROVIDERS: tuple[tuple[str, str], ...] = (
    ("sm_locust.config.endpoint:OPTIONS", "endpoint"),
    ("sm_locust.shapes.settings:OPTIONS", "shape"),
    ("sm_locust.config.openloop:OPTIONS", "shape"),
    ("sm_locust.payloads.options:OPTIONS", "payload"),
    ("sm_locust.transport.options:OPTIONS", "endpoint"),
    ("sm_locust.payloads.llm:OPTIONS", "llm"),
    ("sm_locust.shapes.tokens:OPTIONS", "llm"),
    ("sm_locust.record.llm_options:OPTIONS", "llm"),
    ("sm_locust.mix.options:OPTIONS", "mix"),
    ("sm_locust.publish.options:OPTIONS", "publish"),
    ("sm_locust.record.requests_log_options:OPTIONS", "output"),
)


def all_option_specs() -> list[OptionSpec]:
    """Every provider's options, each with its group (its own, else its provider's)."""
    specs: list[OptionSpec] = []
    for provider, group in OPTION_PROVIDERS:
        module, _, attribute = provider.partition(":")
        specs.extend(spec if spec.group else replace(spec, group=group)
                     for spec in getattr(importlib.import_module(module), attribute))
    return specs


# Words of a flag written as people write them in a label (`--itl-slo-ms` -> "ITL SLO (ms)").
LABEL_WORDS = {"slo": "SLO", "ttft": "TTFT", "itl": "ITL", "llm": "LLM", "json": "JSON", "id": "ID", "url": "URL",
               "aws": "AWS", "rps": "req/s", "ms": "(ms)", "dtype": "dtype", "base64": "base64"}


def option_label(spec: OptionSpec) -> str:
    """A readable label for a form field, from the flag: `--latency-slo-ms` -> "Latency SLO (ms)"."""
    words = [LABEL_WORDS.get(word, word) for word in spec.flag.lstrip("-").split("-")]
    text = " ".join(words)
    return text[0].upper() + text[1:]


def option_help(spec: OptionSpec) -> str:
    """The help as a reader sees it (argparse's `%%` escapes undone)."""
    return spec.help.replace("%%", "%")


def spec_defaults(specs: list[OptionSpec]) -> dict[str, Any]:
    """dest -> default of a provider's options: what a settings dataclass's fields default to (so a
    default is written once, in its OptionSpec)."""
    return {spec.dest: spec.default for spec in specs}


class Options(Mapping[str, Any]):
    """Every sm-locust option by dest, parsed once by its `OptionSpec`: typed, in range, the default
    filled where it was not given. Frozen. Read like a namespace (`options.step_seconds`) or a
    mapping; `given` holds the dests that were set to something other than their default."""

    __slots__ = ("_values", "given", "_specs")

    def __init__(self, values: Mapping[str, object], given: frozenset[str] = frozenset(),
                 specs: tuple[OptionSpec, ...] | None = None):
        object.__setattr__(self, "_values", dict(values))
        object.__setattr__(self, "given", frozenset(given))
        object.__setattr__(self, "_specs", specs)  # None: every provider's (`run`); else a command's own

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Options are frozen: use replace()")

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Options({', '.join(f'{k}={self._values[k]!r}' for k in sorted(self.given))})"

    def replace(self, **changes: object) -> Options:
        """These options with `changes` (by dest; each parsed by its spec, None = back to the default)."""
        values = {**{k: self._values[k] for k in self.given}, **changes}
        return parse_options(values) if self._specs is None else parse_specs(self._specs, values)


def parse_options(source: Mapping[str, object] | None = None, *,
                  name: Callable[[OptionSpec], str] | None = None) -> Options:
    """Every option of every provider from `source` (a mapping of dests; a missing, None or "" value =
    not given; `locust_values` for Locust's parsed options), parsed by its spec; `name(spec)` words the
    option in errors (default its flag; a sweep file says `load.key`)."""
    values: dict[str, object] = {}
    given: set[str] = set()
    for spec in all_option_specs():
        parsed = spec.parse(option_value(source, spec.dest), name(spec) if name else None)
        if parsed is None:
            values[spec.dest] = spec.default
            continue
        values[spec.dest] = parsed
        if parsed != spec.default:
            given.add(spec.dest)
    return Options(values, frozenset(given))


def parse_specs(specs: tuple[OptionSpec, ...] | list[OptionSpec], source: Mapping[str, object] | None = None, *,
                name: Callable[[OptionSpec], str] | None = None) -> Options:
    """A command's own options (`serve`, `report`, `smoke`, ...) from `source` (a mapping: a command's
    `vars(args)`, keywords or a sweep file's settings; None or "" = not given), each parsed by its spec:
    the one conversion, so a bound is refused alike wherever the value came from. `given` holds the
    options that were given, whatever their value (an emulation's flag without its switch is an error
    even at its default)."""
    values: dict[str, object] = {}
    given: set[str] = set()
    for spec in specs:
        parsed = spec.parse(option_value(source, spec.dest), name(spec) if name else None)
        if parsed is None:
            values[spec.dest] = spec.default
        else:
            values[spec.dest] = parsed
            given.add(spec.dest)
    return Options(values, frozenset(given), tuple(specs))


def add_spec_arguments(parser: ArgumentContainer, specs: tuple[OptionSpec, ...] | list[OptionSpec], *,
                       env: bool = True) -> None:
    """Declare a command's own options on `parser` (a parser or an argument group). The parser's default
    is None (not given) unless the option's variable is set: `parse_specs` fills the spec's default,
    so --help shows the default written in the spec and nothing else keeps a copy."""
    for spec in specs:
        kwargs = spec.argparse_kwargs()
        if spec.type is bool and spec.const is True:  # a switch, as store_true: `--llm`, never `--llm false`
            kwargs = {key: kwargs[key] for key in ("dest", "help") if key in kwargs}
            kwargs.update(action="store_const", const=True)
        kwargs["default"] = None
        env_value = os.environ.get(spec.env_var) if env and spec.env_var else None
        if env_value is not None and env_value.strip():
            kwargs["default"] = spec.from_env(env_value)
        kwargs["help"] = spec.help_text(env)
        parser.add_argument(*([spec.short] if spec.short else []), spec.flag, **kwargs)


def environment_values(specs: tuple[OptionSpec, ...] | list[OptionSpec]) -> dict[str, object]:
    """dest -> the value of each option whose variable is set (`SM_LOCUST_*`), as a command line takes it
    for its default: what keywords that do not name an option fall back to (a UsageError names a bad one)."""
    values: dict[str, object] = {}
    for spec in specs:
        text = os.environ.get(spec.env_var) if spec.env_var else None
        if text is not None and text.strip():
            values[spec.dest] = spec.from_env(text)
    return values


def namespace(values: Mapping[str, object]) -> argparse.Namespace:
    """An argparse namespace of `values`: the form Locust's `parsed_options` take (sm_locust.testing)."""
    return argparse.Namespace(**values)


def environment_options(environment: object) -> Options:
    """The options a Locust process runs with: parsed once per test start by the default locustfile
    (`environment.sm_locust_options`; the web UI may change them between swarms), else (a shape or
    user in a locustfile of one's own) parsed now from Locust's parsed options."""
    options = getattr(environment, "sm_locust_options", None)
    if isinstance(options, Options):
        return options
    return parse_options(locust_values(getattr(environment, "parsed_options", None)))


def grouped_specs(specs: list[OptionSpec] | None = None) -> list[tuple[str, list[OptionSpec]]]:
    """(group key, its options) in GROUPS' order, each group's options in declaration order."""
    specs = all_option_specs() if specs is None else specs
    return [(key, members) for key in GROUPS if (members := [s for s in specs if s.group == key])]


def register_options(parser) -> None:
    """Add every sm-locust option to Locust's parser (call from init_command_line_parser), in argument
    groups ("sm-locust: Endpoint", ...) for `locust --help`, in GROUPS' order (the web UI's too: it
    lists custom arguments in the order they were added, under "Custom parameters").

    Locust's `LocustArgumentParser.add_argument` takes `include_in_web_ui` and sets it (with
    `is_secret`, `is_required`, `is_multiple`) on the action, where its web UI looks; an argument
    group's `add_argument` is argparse's (configargparse adds `env_var`), so the same attributes are
    set here on the action it returns.
    """
    for key, specs in grouped_specs():
        group = parser.add_argument_group(f"sm-locust: {GROUPS[key]}")
        for spec in specs:
            action = group.add_argument(spec.flag, env_var=spec.env_var, **spec.argparse_kwargs())
            action.include_in_web_ui = spec.web_ui
            action.is_secret = action.is_required = action.is_multiple = False


def add_cli_options(parser: ArgumentContainer, title: str = "sm-locust options (also SM_LOCUST_* env vars)") -> None:
    """Declare the same options on an argparse parser (defaults from the same env vars), in one
    argument group per GROUPS key ("sm-locust options: Endpoint", ...)."""
    for key, specs in grouped_specs():
        forwarded = [spec for spec in specs if spec.forward]
        if not forwarded:
            continue
        group = parser.add_argument_group(f"{title}: {GROUPS[key]}")
        for spec in forwarded:
            kwargs = spec.argparse_kwargs()
            env_value = os.environ.get(spec.env_var)
            if env_value is not None and env_value.strip():
                kwargs["default"] = spec.from_env(env_value)
            kwargs["help"] = f"{spec.help} [{spec.env_var}]"
            group.add_argument(spec.flag, **kwargs)


def forwarded_arguments(options: Options) -> list[str]:
    """The command-line flags for the options that differ from their defaults (what `sm-locust run`
    passes on to the Locust process)."""
    args: list[str] = []
    for spec in all_option_specs():
        if not spec.forward or spec.dest not in options.given:
            continue
        value = options[spec.dest]
        args += [spec.flag, "true" if value is True else "false" if value is False else str(value)]
    return args


