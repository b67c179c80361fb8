"""Token accounting for LLM answers: how many tokens came back, when each arrived, who counted them.

Reads the `tgi` (TGI, LMI: JSON lines, optionally SSE) and `openai` (vLLM, LMI chat, TGI Messages:
SSE chunks) streams, a line possibly split across PayloadParts, and non-streaming answers (the
fields: docs/facts.md, "LLM containers' streams"). **The server's count wins** (`source: "server"`),
else the tokens seen are counted (`"counted"`), else `None`; an in-band error (`llm.errors`) is
recorded once in `TokenCount.error` and is never a token. `stream_figures`: TTFT to the first part
carrying a token; ITL one value per token, summing to the time from first to last token (parts less
than `SAME_WRITE_MS` apart share one gap); TPOT = (e2e - TTFT) / (output tokens - 1). Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from sm_locust.llm.errors import InBandError, in_band_error

TGI = "tgi"
OPENAI = "openai"
FORMATS = (TGI, OPENAI)
SERVER = "server"
COUNTED = "counted"
SAME_WRITE_MS = 1.0
"""Token-carrying parts that arrive less than this apart are one write the transport split (a decode step
is several ms): their tokens share one gap, as the tokens of one part do."""
INPUT_TOKENS = "llm_input_tokens"
"""`Invocation.extra` key: the prompt's token count as the sender knows it (sm_locust.payloads.llm)."""
TURN = "llm_turn"
"""`Invocation.extra` key: the request's turn in its conversation (1 = the first; `--turns`)."""

MAX_LINE_BYTES = 4 << 20
"""A streamed line (one event) longer than this is an in-band error: a final TGI event with the whole
generated text of a 128k-token answer is well under it."""
MAX_SERVER_COUNT = 100_000_000
"""A server's token count above this is not a count (ignored): 1e300 broke TTFT and ITL."""
LINE_TOO_LONG = "stream.line_too_long"
_WORD_PIECE = re.compile(r"\w+|[^\w\s]")
_DECODER = json.JSONDecoder()
_SSE_FIELDS = (b"event:", b"id:", b"retry:")


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: words and punctuation marks (`"Hi, there!"` -> 4).

    Used where no server counts exist and no tokens are streamed: prompt lengths, non-streaming
    answers without `usage`. Real BPE tokenizers give 1-1.5x this for English prose.
    """
    return len(_WORD_PIECE.findall(text))


@dataclass
class TokenCount:
    """What one answer says about its tokens."""

    counted: int = 0
    """Tokens recognised in the answer (stream events, or the estimate of a non-streamed text)."""
    server_output: int | None = None
    """The server's own output count (usage.completion_tokens, details.generated_tokens), if sent."""
    server_input: int | None = None
    """The server's input (prompt) count, if sent."""
    format: str | None = None
    """`tgi` or `openai` when recognised, else None."""
    per_part: list[int] = field(default_factory=list)
    """Streams: tokens completed in each PayloadPart (a line counts in the part that ends it)."""
    error: InBandError | None = None
    """The stream's in-band error (the first), when the container ended it with one."""

    @property
    def recognised(self) -> bool:
        return self.format is not None

    @property
    def output_tokens(self) -> int | None:
        """The server's count when given, else the counted tokens; None when nothing was recognised."""
        if self.server_output is not None:
            return self.server_output
        return self.counted if self.recognised else None

    @property
    def source(self) -> str | None:
        if self.server_output is not None:
            return SERVER
        return COUNTED if self.recognised else None


class _Reader:
    """Counts tokens and collects server counts, one decoded JSON object at a time."""

    def __init__(self) -> None:
        self.result = TokenCount()
        self.taken = 0
        """Tokens counted so far."""
        self.running: int | None = None
        """vLLM continuous usage: the running completion count of the last chunk (None: not that mode)."""

    def take(self, obj: object) -> int:
        """Tokens `obj` carries (a dict, or a list of them); notes the server's counts and an in-band error."""
        if isinstance(obj, list):
            return sum(self.take(item) for item in obj if isinstance(item, dict))
        if not isinstance(obj, dict):
            return 0
        result = self.result
        error = in_band_error(obj)
        if error is not None:  # an error line is never a token
            if result.error is None:
                result.error = error
                result.format = result.format or (OPENAI if "choices" in obj or isinstance(obj.get("error"), dict)
                                                  else TGI)
            return 0
        tokens = 0
        if "token" in obj:
            result.format = result.format or TGI
            token = obj["token"]
            ids = token.get("id") if isinstance(token, dict) else None
            tokens += len(ids) if isinstance(ids, list) else 1
        choices = obj.get("choices")
        usage = obj.get("usage")
        if isinstance(choices, list):
            result.format = result.format or OPENAI
            tokens += self._chunk_tokens(choices, usage)
        if usage is not None:
            result.format = result.format or OPENAI
            if isinstance(usage, dict):
                result.server_output = _int(usage.get("completion_tokens"), result.server_output)
                result.server_input = _int(usage.get("prompt_tokens"), result.server_input)
        details = obj.get("details")
        if isinstance(details, dict):
            result.server_output = _int(details.get("generated_tokens"), result.server_output)
            prefill = details.get("prefill")
            prompt = details.get("input_length", details.get("prompt_tokens", details.get("input_tokens")))
            if prompt is None and isinstance(prefill, list) and prefill:
                prompt = len(prefill)
            result.server_input = _int(prompt, result.server_input)
        if "generated_tokens" in obj:
            result.server_output = _int(obj.get("generated_tokens"), result.server_output)
        if "generated_text" in obj or "details" in obj:
            result.format = result.format or TGI
        self.taken += tokens
        return tokens

    def _chunk_tokens(self, choices: list, usage: object) -> int:
        """An OpenAI-style chunk's tokens: one per non-empty delta, or the running count's increase when
        every chunk carries usage (vLLM's continuous_usage_stats, from the first chunk on)."""
        running = _int(usage.get("completion_tokens"), None) if isinstance(usage, dict) and choices else None
        if running is not None and (self.running is not None or self.taken == 0):
            before = self.running or 0
            self.running = running
            return max(0, running - before)
        return sum(_choice_tokens(choice) for choice in choices if isinstance(choice, dict))


def _choice_tokens(choice: dict) -> int:
    token_ids = choice.get("token_ids")
    if isinstance(token_ids, list) and token_ids:  # vLLM's return_token_ids: the chunk's own count
        return len(token_ids)
    delta = choice.get("delta")
    if isinstance(delta, dict):
        content = delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls")
        if content:
            return 1
        # the stop token: vLLM and LMI stream it as an empty content with the finish reason (and count it);
        # a bare `delta: {}` finishing chunk (OpenAI's) carries none
        return 1 if choice.get("finish_reason") and delta.get("content") == "" else 0
    return 1 if choice.get("text") else 0


def _int(value: object, default: int | None) -> int | None:
    """A server's count as an int; `default` for anything that is not one: a bool, a negative number, NaN,
    Infinity, or more than `MAX_SERVER_COUNT` (1e300 turned TTFT and ITL into nonsense; Infinity raised)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    if not 0 <= value <= MAX_SERVER_COUNT:  # NaN fails both comparisons
        return default
    return int(value)


class StreamTokens:
    """Incremental parser of a streamed answer: `feed(part)` per PayloadPart, then `finish()`.

    Lines are buffered across parts; a complete JSON object not yet followed by a newline is
    taken at once (some containers end a part without one), so a token counts in the part it
    arrived in. Each byte is looked at once: the unfinished line's JSON nesting is tracked as parts
    arrive (`_Nesting`) and it is decoded only when its objects close (re-parsing it on every part
    made a stream that never ends an event cost quadratic time, starving the run's timer). A line
    longer than `MAX_LINE_BYTES` is an in-band error (`stream.line_too_long`); the rest of it is
    skipped up to its newline.
    """

    def __init__(self) -> None:
        self._reader = _Reader()
        self._buffer = bytearray()
        self._nesting = _Nesting()
        self._skipping = False  # inside a line over MAX_LINE_BYTES: dropped up to its newline

    def feed(self, part: bytes) -> int:
        """Tokens completed by this part."""
        part = bytes(part)
        tokens, start = 0, 0
        while (end := part.find(b"\n", start)) >= 0:
            if not self._skipping and self._room(end - start):
                self._buffer += part[start:end]
                tokens += self._line(bytes(self._buffer))
            self._buffer.clear()
            self._nesting = _Nesting()
            self._skipping = False
            start = end + 1
        tail = part[start:]
        if tail and not self._skipping and self._room(len(tail)):
            self._buffer += tail
            if not self._nesting.broken and self._nesting.feed(tail) and tail.rstrip().endswith(b"}"):
                taken, rest = self._complete(bytes(self._buffer))
                tokens += taken
                if not rest:
                    self._buffer.clear()
                    self._nesting = _Nesting()
                else:  # closed, yet not JSON: no later byte can mend it; its newline decides (as before)
                    self._nesting.broken = True
        self._reader.result.per_part.append(tokens)
        return tokens

    def _room(self, more: int) -> bool:
        """False (and the line skipped, an in-band error noted) when `more` bytes would make it too long."""
        if len(self._buffer) + more <= MAX_LINE_BYTES:
            return True
        self._skipping = True
        self._buffer.clear()
        self._nesting = _Nesting()
        if self._reader.result.error is None:
            self._reader.result.error = InBandError(LINE_TOO_LONG, f"a streamed line over {MAX_LINE_BYTES:,} "
                                                                   "bytes without a newline")
        return False

    @property
    def error(self) -> InBandError | None:
        """The stream's in-band error so far (the first one), else None."""
        return self._reader.result.error

    def finish(self) -> TokenCount:
        """The count, after the last part (a final line without a newline is taken too)."""
        if self._buffer.strip() and not self._skipping:
            tokens = self._line(bytes(self._buffer))
            self._buffer.clear()
            per_part = self._reader.result.per_part
            if per_part:
                per_part[-1] += tokens
            else:
                per_part.append(tokens)
        result = self._reader.result
        result.counted = sum(result.per_part)
        return result

    def _line(self, line: bytes) -> int:
        payload = _payload(line)
        if payload is None:
            return 0
        try:
            obj = json.loads(payload)
        except ValueError:
            return self._objects(payload)[0]
        return self._reader.take(obj)

    def _complete(self, rest: bytes) -> tuple[int, bytes]:
        """(tokens, what is left) for a line with no newline yet: taken only when it is complete JSON."""
        payload = _payload(rest)
        if payload is None or not payload.startswith(b"{"):
            return 0, rest  # framing or a partial line: wait for its newline (or the end)
        tokens, complete = self._objects(payload)
        return (tokens, b"") if complete else (0, rest)

    def _objects(self, payload: bytes) -> tuple[int, bool]:
        """Concatenated JSON objects (`{...}{...}`): (their tokens, whether all of it decoded)."""
        text = payload.decode("utf-8", errors="replace")
        tokens, index, objects = 0, 0, []
        while index < len(text):
            while index < len(text) and text[index].isspace():
                index += 1
            if index >= len(text):
                break
            try:
                obj, index = _DECODER.raw_decode(text, index)
            except ValueError:
                return 0, False
            objects.append(obj)
        for obj in objects:
            tokens += self._reader.take(obj)
        return tokens, True


class _Nesting:
    """The JSON nesting of a line as its bytes arrive: `feed(bytes)` is True when, after them, every
    object and array opened so far is closed (outside a string) and at least one was opened."""

    _SIGNIFICANT = re.compile(rb'[\\"{}\[\]]')

    def __init__(self) -> None:
        self.depth = 0
        self.opened = False
        self.in_string = False
        self.escaped = False
        self.broken = False  # closed but not JSON: not decoded again before its newline

    def feed(self, data: bytes) -> bool:
        skip_at = 0 if self.escaped else -1  # a backslash ended the previous part: this one's first byte
        for match in self._SIGNIFICANT.finditer(data):
            if match.start() == skip_at:  # the character a backslash escapes
                continue
            char = match.group()
            if self.in_string:
                if char == b"\\":
                    skip_at = match.end()
                elif char == b'"':
                    self.in_string = False
            elif char == b'"':
                self.in_string = True
            elif char in (b"{", b"["):
                self.depth += 1
                self.opened = True
            elif char in (b"}", b"]"):
                self.depth -= 1
        self.escaped = skip_at == len(data)
        return self.opened and self.depth <= 0 and not self.in_string


def _payload(line: bytes) -> bytes | None:
    """The JSON text of one line (SSE `data:` prefix removed), or None for framing and `[DONE]`."""
    line = line.strip()
    if not line or line.startswith(b":") or line.startswith(_SSE_FIELDS):
        return None
    if line.startswith(b"data:"):
        line = line[5:].strip()
    if not line or line == b"[DONE]":
        return None
    return line


def count_stream(parts: Iterable[bytes]) -> TokenCount:
    """Token accounting of a whole stream, given its PayloadPart payloads in order."""
    parser = StreamTokens()
    for part in parts:
        parser.feed(part)
    return parser.finish()


def count_response(body: bytes, count_text: Callable[[str], int] = estimate_tokens) -> TokenCount:
    """Token accounting of a non-streamed answer (OpenAI completion, TGI / LMI generated_text).

    Without server counts the generated text is counted by `count_text` (the run's `--tokenizer`,
    else `estimate_tokens`); a body that is not a recognised LLM answer gives `source` None.
    """
    try:
        obj = json.loads(body)
    except ValueError:
        return TokenCount()
    reader = _Reader()
    reader.take(obj)
    result = reader.result
    texts = list(_generated_texts(obj))
    if texts:
        result.format = result.format or TGI
    result.counted = sum(count_text(t) for t in texts)
    return result


def _generated_texts(obj: object) -> Iterable[str]:
    items = obj if isinstance(obj, list) else [obj]
    for item in items:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("generated_text"), str):
            yield item["generated_text"]
        for choice in item.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            message = choice.get("message")
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                yield message["content"]
            elif isinstance(choice.get("text"), str):
                yield choice["text"]


# -- per-request figures ------------------------------------------------------------------------


@dataclass
class RequestTokens:
    """One LLM request's figures (milliseconds; tokens)."""

    e2e_ms: float
    ttft_ms: float | None
    itl_ms: list[float]
    output_tokens: int | None
    input_tokens: int | None
    source: str | None
    token_times_ms: list[float] = field(default_factory=list)
    """Streams: when each counted token arrived, from the call's start (tokens/s per second of the run)."""

    @property
    def tpot_ms(self) -> float | None:
        """Time per output token after the first: (e2e - TTFT) / (output tokens - 1)."""
        if self.ttft_ms is None or not self.output_tokens or self.output_tokens < 2:
            return None
        return max(0.0, self.e2e_ms - self.ttft_ms) / (self.output_tokens - 1)

    @property
    def output_tokens_per_s(self) -> float | None:
        if not self.output_tokens or self.e2e_ms <= 0:
            return None
        return self.output_tokens / (self.e2e_ms / 1000.0)


def stream_figures(count: TokenCount, first_chunk_ms: float | None, gaps_ms: Sequence[float], e2e_ms: float,
                   input_tokens: int | None = None) -> RequestTokens:
    """A stream's figures from its token count and chunk timing (the contract's StreamResult:
    `ttft_ms` to the first part, `inter_chunk_ms` between parts); `input_tokens` is the sender's
    own prompt count, used when the server gave none."""
    inputs = count.server_input if count.server_input is not None else input_tokens
    if first_chunk_ms is None or not count.recognised:
        return RequestTokens(e2e_ms, None, [], count.output_tokens, inputs, count.source)
    arrivals = [first_chunk_ms]
    for gap in gaps_ms:
        arrivals.append(arrivals[-1] + gap)
    ttft = None
    previous = None  # the previous write's arrival
    group_at, group_tokens = None, 0  # the write being read: parts arriving within SAME_WRITE_MS of one another
    itl: list[float] = []
    times: list[float] = []
    parts = spread(count.per_part, count.server_output)
    for arrival, tokens in zip(arrivals, parts, strict=False):  # a part without a gap recorded is not timed
        if not tokens:
            continue
        times.extend([arrival] * tokens)
        if group_at is not None and arrival - group_at < SAME_WRITE_MS:
            group_at, group_tokens = arrival, group_tokens + tokens
            continue
        if group_at is not None and previous is not None:
            itl.extend([(group_at - previous) / group_tokens] * group_tokens)
        if group_at is None:
            ttft = arrival
        else:
            previous = group_at
        group_at, group_tokens = arrival, tokens
    if group_at is not None and previous is not None:
        itl.extend([(group_at - previous) / group_tokens] * group_tokens)
    return RequestTokens(e2e_ms, ttft, itl, count.output_tokens, inputs, count.source, times)


def spread(per_part: Sequence[int], server_output: int | None) -> list[int]:
    """Each part's tokens with the server's larger total spread over them in proportion to the tokens
    seen in each (chunks that carried several tokens and said so only in the total); whole tokens,
    summing to the server's count. Unchanged when the server gave no count or not a larger one."""
    seen = sum(per_part)
    if not server_output or not seen or server_output <= seen:
        return list(per_part)
    ratio = server_output / seen
    out, cumulative, placed = [], 0, 0
    for tokens in per_part:
        cumulative += tokens
        upto = round(cumulative * ratio)
        out.append(upto - placed)
        placed = upto
    return out


def response_figures(count: TokenCount, e2e_ms: float, input_tokens: int | None = None) -> RequestTokens:
    """A non-streamed answer's figures: no TTFT or ITL (the whole answer arrives at once)."""
    inputs = count.server_input if count.server_input is not None else input_tokens
    return RequestTokens(e2e_ms, None, [], count.output_tokens, inputs, count.source)
