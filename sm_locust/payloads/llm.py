"""LLM request templates: prompts in, request bodies for the common LLM containers out.

`--prompts` (a JSONL file, a CSV/Parquet dataset or a `datasets` folder via `payloads.datasets`, or
`synthetic:DIST` with `sm_locust.llm.lengths`), `--llm-template` (`tgi`, the default, or `messages`)
and `--max-new-tokens` replace `--payload`; the pool is built before the test (bodies and options:
docs/llm.md). Templates ask for the server's token counts (`details: true`, `include_usage`) unless
`--llm-details false`. Each invocation carries its prompt's token count (`extra[INPUT_TOKENS]`), used
when the server does not count. Bad input (a line that is not JSON or does not match the template, LLM
options without `--prompts`, `--prompts` with `--payload`) is one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from sm_locust.aws.runtime_api import MAX_BODY_BYTES
from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.options import Options, OptionSpec
from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.llm.lengths import NORMAL, LengthDistribution
from sm_locust.llm.tokenizer import Counter, Tokenizer, exact_prompt, load_tokenizer, words_for
from sm_locust.llm.tokens import INPUT_TOKENS, estimate_tokens
from sm_locust.payloads.datasets import DEFAULT_COLUMNS, LENGTH_KEYS, MAX_PROMPTS, Columns, is_table, mapped, read_table
from sm_locust.payloads.files import check_payload_path, without_bom
from sm_locust.payloads.pool import PayloadPool
from sm_locust.payloads.trace import TracePool, trace_pool
from sm_locust.util.registry import Registry
from sm_locust.util.yamlsafe import inline_only

TGI, MESSAGES = "tgi", "messages"
TEMPLATES: Registry[str] = Registry("LLM template")
TEMPLATES.add(TGI, TGI, "lmi", "inputs")
TEMPLATES.add(MESSAGES, MESSAGES, "openai", "chat")
SYNTHETIC = "synthetic:"
SYNTHETIC_PROMPTS = 64
MAX_PROMPTS_BYTES = 256 << 20  # a --prompts file, read a line at a time (MAX_PROMPTS: payloads.datasets)
# one-token words (each one token in common BPE vocabularies, with its leading space)
_WORDS = ("the of and to in is was for on that with as by at from his her this had not are but which were "  # noqa: SIM905
          "one all their there been has have when who will more no if out so said what up its about into than "
          "them can only other new some time could these two may first then do any like my now over such our "
          "man me even most made after also did many before must through back years where much your way well "
          "down should because each just those people how too little state good very make world still own see "
          "men work long get here between both life being under never day same another know while last might us "
          "great old year off come since against go came right used take three").split()

def _command_line_only(flag: str):
    """The web UI's check of an option that names a file: only the command line may name one."""
    def check(_text: str) -> None:
        raise UsageError(f"{flag}: a file can only be named on the command line (or SM_LOCUST_*), not in the web UI")
    return check


OPTIONS: list[OptionSpec] = [
    OptionSpec("--prompts", "SM_LOCUST_PROMPTS", "",
               "LLM endpoints: prompts instead of --payload: a JSONL file ({\"prompt\": ..., \"max_new_tokens\": N} "
               "per line), a CSV or Parquet dataset, a folder Hugging Face datasets' save_to_disk wrote, or "
               "synthetic:LENGTH (synthetic:512, synthetic:256-1024, synthetic:512~64 tokens)",
               web_check=inline_only("--prompts", "synthetic:")),
    OptionSpec("--llm-template", "SM_LOCUST_LLM_TEMPLATE", "",
               "LLM endpoints: request schema for --prompts: tgi ({\"inputs\", \"parameters\"}: TGI, LMI; the default) "
               "or messages (OpenAI-style chat: LMI, vLLM)"),
    OptionSpec("--max-new-tokens", "SM_LOCUST_MAX_NEW_TOKENS", 0,
               "LLM endpoints: answer length asked for (max_new_tokens / max_tokens); a prompt line's own length wins; "
               "0 = not sent (the server's default)", int, minimum=0),
    OptionSpec("--llm-details", "SM_LOCUST_LLM_DETAILS", True,
               "LLM endpoints: the tgi template asks for \"details\": true (TGI / LMI then send their token counts: "
               "generated_tokens, input_length); false leaves it out", bool),
    OptionSpec("--prompt-column", "SM_LOCUST_PROMPT_COLUMN", "",
               "LLM endpoints: the --prompts dataset's column holding the prompt (or a chat: a list of messages); "
               "default prompt (or messages)"),
    OptionSpec("--output-tokens-column", "SM_LOCUST_OUTPUT_TOKENS_COLUMN", "",
               "LLM endpoints: the --prompts dataset's column holding the answer length to ask for; default "
               "max_new_tokens, output_tokens or expected_output_tokens"),
    OptionSpec("--turns", "SM_LOCUST_TURNS", 1,
               "LLM endpoints, messages template: each user keeps a conversation for N turns (each request carries "
               "the earlier user and assistant messages, the assistant's being what it streamed), then starts "
               "a new one; 1 = single requests", int, minimum=1, maximum=64),
    OptionSpec("--tokenizer", "SM_LOCUST_TOKENIZER", "",
               "LLM endpoints: the model's tokenizer.json (Hugging Face tokenizers; or the folder holding it), read "
               "offline: synthetic prompts are made to exact lengths by it, dataset prompts and answers without the "
               "server's counts are counted by it (needs: pip install 'sm-locust[tokenizer]')"),
    OptionSpec("--trace", "SM_LOCUST_TRACE", "",
               "LLM endpoints: replay a Mooncake-format trace (JSONL: timestamp ms, input_length, output_length, "
               "hash_ids): each request sent open-loop at its time (--time-scale 2: twice as fast), its prompt "
               "input_length tokens whose hash_ids blocks are shared, output_length asked for",
               web_check=_command_line_only("--trace")),
]


@dataclass(frozen=True)
class LlmSettings:
    """The LLM payload options of one run (None / "" = not given)."""

    prompts: str = ""
    template: str = ""
    max_new_tokens: int = 0
    details: bool = True
    """The tgi template asks for the server's `details` (its token counts)."""
    tokenizer: str = ""
    """`--tokenizer`: a local tokenizer.json (or its folder); "" = the words-and-punctuation estimate."""
    columns: Columns = DEFAULT_COLUMNS
    """`--prompt-column`, `--output-tokens-column`: a dataset's columns."""
    turns: int = 1
    """`--turns`: turns per conversation (messages template)."""
    trace: str = ""
    """`--trace`: a Mooncake-format trace to replay (payloads/trace.py)."""

    @classmethod
    def from_options(cls, options: Options) -> LlmSettings:
        return cls(prompts=options.prompts, template=options.llm_template, max_new_tokens=options.max_new_tokens,
                   details=options.llm_details, tokenizer=options.tokenizer,
                   columns=Columns(options.prompt_column, options.output_tokens_column), turns=options.turns,
                   trace=options.trace)

    @property
    def active(self) -> bool:
        """LLM requests are built (`--prompts` or `--trace` given)."""
        return bool(self.prompts or self.trace)

    def check(self, payload: str = "") -> LlmSettings:
        """The combinations that cannot work (one line each)."""
        if self.trace:
            return self._check_trace(payload)
        if not self.prompts:
            given = [flag for flag, value in (("--llm-template", self.template),
                                              ("--max-new-tokens", self.max_new_tokens),
                                              ("--llm-details false", not self.details),
                                              ("--tokenizer", self.tokenizer),
                                              ("--prompt-column", self.columns.prompt),
                                              ("--output-tokens-column", self.columns.output_tokens),
                                              ("--turns", self.turns > 1)) if value]
            if given:
                raise UsageError(f"{' and '.join(given)} shape{'s' if len(given) == 1 else ''} LLM requests built from "
                                 "--prompts; pass --prompts FILE.jsonl or --prompts synthetic:512")
            return self
        if self.columns.given and self.prompts.startswith(SYNTHETIC):
            flag = "--prompt-column" if self.columns.prompt else "--output-tokens-column"
            raise UsageError(f"{flag} maps a dataset's columns; --prompts {self.prompts!r} is synthetic: "
                             f"drop {flag} or pass --prompts FILE (JSONL, CSV or Parquet) or a datasets folder")
        if payload:
            raise UsageError(f"--payload {payload!r} and --prompts {self.prompts!r} both given; an LLM run sends the "
                             "prompts: drop --payload")
        # the registry's error lists the valid names
        checked = dataclasses.replace(self, template=TEMPLATES.canonical(self.template) if self.template else TGI)
        if checked.turns > 1 and checked.template != MESSAGES:
            raise UsageError(f"--turns {checked.turns} makes conversations of chat messages; pass --llm-template "
                             "messages")
        if not checked.details and checked.template != TGI:
            raise UsageError("--llm-details false shapes the tgi template's requests; the messages template asks for "
                             "usage instead (stream_options.include_usage): drop --llm-details")
        return checked

    def check_load(self, shape: str | None) -> None:
        """`--turns` against the run's load: a turn carries the answers before it, and the async shape's calls
        are answered in S3, not to the caller."""
        if self.turns > 1 and shape == "async":
            raise UsageError(f"--turns {self.turns} carries each answer into the next turn; the async shape's "
                             "calls are answered in S3, not to their caller: drop --turns (or --shape async)")

    def _check_trace(self, payload: str) -> LlmSettings:
        given = [flag for flag, value in (("--prompts", self.prompts), ("--max-new-tokens", self.max_new_tokens),
                                          ("--prompt-column", self.columns.prompt),
                                          ("--output-tokens-column", self.columns.output_tokens),
                                          ("--turns", self.turns > 1), ("--payload", payload)) if value]
        if given:
            raise UsageError(f"--trace gives each request's lengths and time; drop {' and '.join(given)}")
        return dataclasses.replace(self, template=TEMPLATES.canonical(self.template) if self.template else TGI)


def request_body(template: str, prompt: str | list, max_new_tokens: int, stream: bool, details: bool = True) -> dict:
    """The request object for one prompt (a list of messages is sent as it is, messages template only);
    `details`: the tgi template asks for the server's token counts."""
    if template == TGI:
        body: dict[str, object] = {"inputs": prompt}
        parameters: dict[str, object] = {}
        if max_new_tokens:
            parameters["max_new_tokens"] = max_new_tokens
        if details:
            parameters["details"] = True
        if parameters:
            body["parameters"] = parameters
        if stream:
            body["stream"] = True
        return body
    messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
    body = {"messages": messages}
    if max_new_tokens:
        body["max_tokens"] = max_new_tokens
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def read_prompts(path: str | Path, template: str,
                 columns: Columns = DEFAULT_COLUMNS) -> list[tuple[str | list, int | None]]:
    """(prompt or messages, expected output length or None) per line of a JSONL prompt dataset, its keys
    mapped by `columns` when given, read a line at a time: at most `MAX_PROMPTS` prompts and
    `MAX_PROMPTS_BYTES` (3,000,000 lines read whole, then kept as requests, took 8 GB)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"--prompts {str(path)!r}: no such file (a JSONL dataset, or synthetic:LENGTH)")
    prompts: list[tuple[str | list, int | None]] = []
    for number, raw in _lines(path):
        if not raw.strip():
            continue
        if len(prompts) == MAX_PROMPTS:
            raise UsageError(f"--prompts {str(path)!r} holds more than {MAX_PROMPTS:,} prompts; a run samples from "
                             "at most that many: keep a sample of them")
        where = f"{path.name}:{number}"
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise UsageError(f"{where}: not a JSON object; write one {{\"prompt\": ...}} per line") from None
        if not isinstance(line, dict):
            raise UsageError(f"{where}: not a JSON object; write one {{\"prompt\": ...}} per line")
        if columns.given:
            line = mapped(line, columns, where, list(line))
        prompts.append((_prompt_of(line, where, template), _length_of(line, where)))
    if not prompts:
        raise UsageError(f"--prompts {str(path)!r} holds no prompts; write one {{\"prompt\": ...}} per line")
    return prompts


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of a prompts file, streamed, the byte-order mark dropped; a one-line UsageError
    past `MAX_PROMPTS_BYTES` (a line is never read past it either)."""
    check_payload_path(path, "--prompts file")
    total = 0
    try:
        with open(path, "rb") as fh:
            number = 0
            while raw := fh.readline(MAX_PROMPTS_BYTES - total + 1):
                total += len(raw)
                if total > MAX_PROMPTS_BYTES:
                    raise UsageError(f"--prompts {str(path)!r} is over {MAX_PROMPTS_BYTES >> 20} MB; keep a sample "
                                     "of its prompts")
                number += 1
                yield number, without_bom(raw) if number == 1 else raw
    except OSError as exc:
        raise UsageError(f"cannot read --prompts file {str(path)!r}: {exc.strerror}") from None


def read_table_prompts(path: str | Path, template: str, columns: Columns = DEFAULT_COLUMNS,
                       seed: int = 0) -> list[tuple[str | list, int | None]]:
    """(prompt or messages, expected output length or None) per row of a CSV or Parquet dataset
    (`payloads.datasets`: streamed, at most MAX_PROMPTS rows, a seeded sample beyond)."""
    prompts = []
    for where, row, names in read_table(path, seed):
        line = mapped(row, columns, where, names)
        prompt = _prompt_of(line, where, template)
        if isinstance(prompt, str) and len(prompt) > MAX_BODY_BYTES:
            raise UsageError(f"{where}: a prompt of {len(prompt):,} characters is over SageMaker's 6 MB request body")
        prompts.append((prompt, _length_of(line, where)))
    if not prompts:
        raise UsageError(f"--prompts {str(path)!r} holds no rows; a header row, then one prompt per row")
    return prompts


def _prompt_of(line: dict, where: str, template: str) -> str | list:
    if "messages" in line and "prompt" not in line:
        if template != MESSAGES:
            raise UsageError(f"{where}: holds \"messages\" (a chat request) but --llm-template is {template}; "
                             "pass --llm-template messages, or give the line a \"prompt\"")
        messages = line["messages"]
        if not (isinstance(messages, list) and messages
                and all(isinstance(m, dict) and "content" in m for m in messages)):
            raise UsageError(f"{where}: \"messages\" must be a list of {{\"role\", \"content\"}} objects")
        return messages
    if "inputs" in line and "prompt" not in line:
        hint = "pass --llm-template tgi" if template != TGI else "name the text \"prompt\""
        raise UsageError(f"{where}: holds \"inputs\" (a whole TGI request) but --llm-template is {template}; "
                         f"{hint}, or give the line a \"prompt\"")
    prompt = line.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise UsageError(f"{where}: no prompt; each line needs a non-empty \"prompt\" string")
    return prompt


def _length_of(line: dict, where: str) -> int | None:
    for key in LENGTH_KEYS:
        if key in line and line[key] is not None:
            value = line[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{where}: {key} must be a whole number of tokens >= 1, got {value!r}")
            return value
    return None


@dataclass(frozen=True)
class SyntheticSpec:
    """`synthetic:DIST[,prefix=N,prefixes=K]`: prompt lengths, and K fixed N-token prefixes shared by them."""

    lengths: LengthDistribution
    prefix: int = 0
    prefixes: int = 0

    @classmethod
    def parse(cls, text: str) -> SyntheticSpec:
        flag = f"--prompts {SYNTHETIC}{text}"
        head, *rest = text.split(",")
        lengths = LengthDistribution.parse(head, flag)
        fields: dict[str, int] = {}
        for item in rest:
            key, _, value = item.partition("=")
            if key.strip() not in ("prefix", "prefixes") or not value.strip().isdigit():
                raise UsageError(f"{flag}: {item!r} is not prefix=TOKENS or prefixes=COUNT; write e.g. "
                                 f"{SYNTHETIC}512,prefix=256,prefixes=4")
            fields[key.strip()] = int(value)
        prefix, prefixes = fields.get("prefix", 0), fields.get("prefixes", 1 if "prefix" in fields else 0)
        if prefixes and not prefix:
            raise UsageError(f"{flag}: prefixes=COUNT needs prefix=TOKENS (the shared prefix's length)")
        if prefix and not 1 <= prefixes <= SYNTHETIC_PROMPTS:
            raise UsageError(f"{flag}: prefixes must be 1 to {SYNTHETIC_PROMPTS} (one per prompt at most)")
        if prefix and lengths.kind != NORMAL and lengths.a <= prefix:
            raise UsageError(f"{flag}: the prompts ({lengths.text()} tokens) must be longer than their prefix "
                             f"({prefix}); write e.g. {SYNTHETIC}{prefix * 2},prefix={prefix}")
        return cls(lengths, prefix, prefixes)


def synthetic_prompts(spec: str, count: int = SYNTHETIC_PROMPTS, seed: int = 0,
                      tokenizer: Tokenizer | None = None) -> list[tuple[str, None]]:
    """`count` prompts whose token lengths follow `spec`, exact by `tokenizer` (else each word counts
    one token); with `prefix=N,prefixes=K` each starts with one of K fixed N-token prefixes, the
    prompts spread evenly over them in a seeded order."""
    parsed = SyntheticSpec.parse(spec)
    count_tokens: Counter = tokenizer.count if tokenizer is not None else estimate_tokens
    words = words_for(tokenizer, _WORDS) if tokenizer is not None else _WORDS
    rng = random.Random(seed)
    heads = [exact_prompt(rng, parsed.prefix, words, count_tokens) for _ in range(parsed.prefixes)]
    order = [i % len(heads) for i in range(count)] if heads else []
    rng.shuffle(order)
    prompts = []
    for i in range(count):
        length = parsed.lengths.sample(rng)
        if heads:
            length = max(length, parsed.prefix + 1)
            prompts.append((exact_prompt(rng, length, words, count_tokens, head=heads[order[i]]), None))
        else:
            prompts.append((exact_prompt(rng, length, words, count_tokens), None))
    return prompts


def prompt_tokens(prompt: str | list, count: Counter = estimate_tokens) -> int:
    """The prompt's token count by `count` (messages: their contents summed)."""
    if isinstance(prompt, list):
        return sum(count(str(m.get("content", ""))) for m in prompt)
    return count(prompt)


def _trace_body(template: str, stream: bool, details: bool, prompt: str, output_length: int) -> dict:
    return request_body(template, prompt, output_length, stream, details)


def build_pool(settings: LlmSettings, *, stream: bool, headers: dict | None = None, selection: str | None = None,
               seed: int = 0) -> PayloadPool | TracePool:
    """The pool of LLM invocations for a run (`settings` already checked)."""
    prompts: Sequence[tuple[str | list, int | None]]
    tokenizer = load_tokenizer(settings.tokenizer) if settings.tokenizer else None
    if settings.trace:
        return trace_pool(settings.trace, functools.partial(_trace_body, settings.template, stream, settings.details),
                          tokenizer=tokenizer, english=_WORDS, seed=seed, headers=headers)
    count_tokens: Counter = tokenizer.count if tokenizer is not None else estimate_tokens
    if settings.prompts.startswith(SYNTHETIC):
        prompts = synthetic_prompts(settings.prompts[len(SYNTHETIC):], seed=seed, tokenizer=tokenizer)
    elif is_table(settings.prompts):
        prompts = read_table_prompts(settings.prompts, settings.template, settings.columns, seed)
    else:
        prompts = read_prompts(settings.prompts, settings.template, settings.columns)
    fields = {k: v for k, v in (headers or {}).items() if v is not None}
    invocations = []
    for number, (prompt, length) in enumerate(prompts, 1):
        body = orjson.dumps(request_body(settings.template, prompt, length or settings.max_new_tokens, stream,
                                         settings.details))
        if len(body) > MAX_BODY_BYTES:  # refused now, not by the endpoint on every request
            raise UsageError(f"--prompts {settings.prompts!r}: prompt {number:,} makes a request body of "
                             f"{len(body):,} bytes, over {MAX_BODY_BYTES:,} (6 MB), SageMaker's InvokeEndpoint "
                             "body limit; shorten it")
        invocation = Invocation(body=body, content_type="application/json", rows=1, **fields)
        invocation.extra[INPUT_TOKENS] = prompt_tokens(prompt, count_tokens)
        invocations.append(invocation)
    return PayloadPool(invocations, settings.prompts, selection=selection, seed=seed)


def llm_pool(settings: SageMakerSettings, options: Options) -> PayloadPool | TracePool | None:
    """The LLM pool when `--prompts` or `--trace` is given, else None (then `--payload` is read as usual).

    `settings` is the run's `SageMakerSettings`; `options` the run's parsed options.
    """
    llm = LlmSettings.from_options(options).check(settings.payload)
    if not llm.active:
        return None
    return build_pool(llm, stream=options.stream, headers=settings.headers(), selection=options.selection or None,
                      seed=options.payload_seed)
