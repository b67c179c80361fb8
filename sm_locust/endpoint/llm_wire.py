"""The bytes each LLM container streams, for the local LLM emulation (`sm-locust serve --llm`).

endpoint/llm.py decides when each token is made; this module writes it as the real containers do:
`tgi` (TGI's SSE events), `lmi` (LMI / DJL's jsonlines), `openai` (vLLM's chat-completion SSE), each
with its in-band error and non-streamed answer. Each format's facts and sources are in docs/facts.md
("LLM containers' streams"); tests/fixtures/wire/ holds byte-exact samples both this module and the
client's parser are tested against. `auto` answers `{"inputs": ...}` as `tgi` and `messages` /
`prompt` as `openai`; `--llm-server-counts false` drops the counts whatever the request asks.
"""

from __future__ import annotations

import json
import time
import uuid
import zlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from sm_locust.endpoint import codecs
from sm_locust.llm.tokens import estimate_tokens

AUTO, TGI, LMI, OPENAI = "auto", "tgi", "lmi", "openai"
FORMATS = (AUTO, TGI, LMI, OPENAI)
JSONLINES = "application/jsonlines"
EVENT_STREAM = "text/event-stream"
MODEL_NAME = "sm-locust-llm"
_VOCABULARY = (" the", " a", " model", " token", " of", " and", " to", " is", " load", " test", " end", " point",
               " in", " that", " it", " for", " on", " with", " as", " café")

TGI_ERROR_TYPE = "generation"
TGI_ERROR = "Request failed during generation: sm-locust injected a generation failure"
LMI_ERROR_MESSAGE = "exception occurred during rolling batch inference"  # djl_python rolling_batch's own text
LMI_ERROR_TOKEN = {"id": -1, "text": "", "log_prob": -1, "special_token": True, "error_msg": LMI_ERROR_MESSAGE}
VLLM_ERROR = {"message": "Internal server error", "type": "InternalServerError", "param": None, "code": 500}


class BadLlmRequest(codecs.CodecError):
    """A body the LLM cannot take: the container answers 400, the caller sees ModelError 424."""


@dataclass
class LlmRequest:
    """What the emulator reads from a request body."""

    format: str
    """`tgi` for `{"inputs"}` requests, `openai` for `{"messages"}` / `{"prompt"}` ones."""
    prompt_tokens: int
    max_new_tokens: int | None
    stream_usage: bool = False
    """OpenAI-style: `stream_options.include_usage` asks for the usage chunk."""
    details: bool = False
    """TGI / LMI: `parameters.details` asks for the token counts."""
    prompt: str = ""
    roles: tuple[str, ...] = ()
    """OpenAI-style: the messages' roles, in order."""
    assistant: tuple[str, ...] = ()
    """OpenAI-style: the assistant messages' texts (a multi-turn chat's earlier answers)."""


def parse_request(body: bytes) -> LlmRequest:
    """TGI / LMI `{"inputs": ..., "parameters": {"max_new_tokens": N, "details": true}}` or OpenAI-style
    `{"messages": [...], "max_tokens": N}` (also `prompt` for completions)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadLlmRequest("the LLM expects a JSON body") from None
    if not isinstance(doc, dict):
        raise BadLlmRequest("the LLM expects a JSON object")
    if "inputs" in doc:
        parameters = doc.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise BadLlmRequest("\"parameters\" must be an object")
        prompt = str(doc["inputs"])
        return LlmRequest(TGI, estimate_tokens(prompt), _length(parameters.get("max_new_tokens"), "max_new_tokens"),
                          details=parameters.get("details") is True, prompt=prompt)
    if "messages" in doc or "prompt" in doc:
        messages = doc.get("messages")
        if messages is not None:
            if not isinstance(messages, list):
                raise BadLlmRequest("\"messages\" must be a list of {\"role\", \"content\"} objects")
            text = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        else:
            text = str(doc["prompt"])
        length = doc.get("max_tokens", doc.get("max_completion_tokens"))
        options = doc.get("stream_options")
        usage = isinstance(options, dict) and bool(options.get("include_usage"))
        chat = [m for m in messages or () if isinstance(m, dict)]
        return LlmRequest(OPENAI, estimate_tokens(text), _length(length, "max_tokens"), usage, prompt=text,
                          roles=tuple(str(m.get("role", "")) for m in chat),
                          assistant=tuple(str(m.get("content", "")) for m in chat if m.get("role") == "assistant"))
    raise BadLlmRequest("the LLM expects {\"inputs\": ...} (TGI, LMI) or {\"messages\": [...]} (OpenAI-style chat)")


RECORD_BLOCK_WORDS = 512
"""A request record's prompt blocks by default: as many words as a Mooncake trace's hash_id block has tokens."""


def request_record(request: LlmRequest, arrived: float, block: int = RECORD_BLOCK_WORDS,
                   ids: Sequence[int] | None = None) -> bytes:
    """One line of `--llm-request-log`: when the request arrived (Unix time), its prompt's tokens, the
    answer length asked, and a CRC-32 of each whole `block`-token block of its prompt (equal blocks,
    equal numbers: the prefix reuse the server saw). `ids`: the prompt's token ids by
    `--llm-tokenizer` (blocks of ids), else the prompt's words are its tokens."""
    if ids is not None:
        blocks = [zlib.crc32(array("q", ids[i:i + block]).tobytes()) for i in range(0, len(ids) - block + 1, block)]
    else:
        words = request.prompt.split()
        blocks = [zlib.crc32(" ".join(words[i:i + block]).encode()) for i in range(0, len(words) - block + 1, block)]
    return orjson.dumps({"t": round(arrived, 6), "format": request.format, "prompt_tokens": request.prompt_tokens,
                         "max_new_tokens": request.max_new_tokens, "messages": len(request.roles),
                         "blocks": blocks}) + b"\n"


def _length(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadLlmRequest(f"{name} must be a whole number >= 1, got {value!r}")
    return value


CHAT_SIZES = (1, 3, 5)
"""Chats counted by their number of messages (`llm_messages_N`; others `llm_messages_other`)."""


def chat_counts(request: LlmRequest) -> dict[str, int]:
    """The endpoint's counters for an OpenAI-style chat: its size, whether its roles alternate
    (user, assistant, ..., user; a system message first allowed), and its assistant messages, with
    those that are an answer this emulation streams (a multi-turn client sends back what it got)."""
    if not request.roles:
        return {}
    size = len(request.roles)
    roles = request.roles[1:] if request.roles[0] == "system" else request.roles
    alternating = bool(roles) and len(roles) % 2 == 1 and all(
        role == ("user" if i % 2 == 0 else "assistant") for i, role in enumerate(roles))
    counts = {f"llm_messages_{size}" if size in CHAT_SIZES else "llm_messages_other": 1,
              "llm_roles_alternating": int(alternating), "llm_assistant_messages": len(request.assistant),
              "llm_assistant_echoed": sum(is_answer(text) for text in request.assistant)}
    return {k: v for k, v in counts.items() if v}


def is_answer(text: str) -> bool:
    """`text` is an answer this emulation streams: its first n tokens' words, for some n >= 1."""
    made, index = "", 0
    while len(made) < len(text):
        made += word(index)
        index += 1
    return bool(text) and made == text


def word(index: int) -> str:
    """The text of token `index` (0-based)."""
    return _VOCABULARY[index % len(_VOCABULARY)]


def _spaced(obj: object) -> bytes:
    """Python's `json.dumps(obj, ensure_ascii=False)`: what LMI (and vLLM's error chunk) write."""
    return json.dumps(obj, ensure_ascii=False).encode()


class Formatter:
    """Writes one answer's stream events, its in-band error and its non-streamed body in one format."""

    def __init__(self, fmt: str, request: LlmRequest, output_tokens: int, server_counts: bool):
        if fmt not in (TGI, LMI, OPENAI):
            raise ValueError(f"unknown LLM stream format {fmt!r}")
        self.fmt = fmt
        self.request = request
        self.output_tokens = output_tokens
        self.counts = server_counts
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.words: list[str] = []

    @property
    def content_type(self) -> str:
        return JSONLINES if self.fmt == LMI else EVENT_STREAM

    @property
    def details(self) -> bool:
        """TGI / LMI: the last event carries the counts (asked for, and not switched off)."""
        return self.counts and self.request.details

    def token(self, index: int) -> bytes:
        """The stream bytes of token `index` (0-based): for OpenAI also the role chunk before the first,
        the usage chunk and `[DONE]` after the last."""
        text = word(index)
        self.words.append(text)
        last = index == self.output_tokens - 1
        token_id = 1000 + index % len(_VOCABULARY)
        if self.fmt == TGI:
            event: dict[str, object] = {"index": index + 1,
                                     "token": {"id": token_id, "text": text, "logprob": -0.5, "special": False},
                                     "generated_text": None, "details": None}
            if last:
                event["generated_text"] = "".join(self.words)
                if self.details:
                    event["details"] = {"finish_reason": "length", "generated_tokens": self.output_tokens,
                                        "seed": None, "input_length": self.request.prompt_tokens}
            return b"data:" + orjson.dumps(event) + b"\n\n"
        if self.fmt == LMI:
            line: dict[str, object] = {"token": {"id": token_id, "text": text, "log_prob": -0.5}}
            if last:
                line["generated_text"] = "".join(self.words)
                if self.details:
                    line["details"] = self._lmi_details("length", self.output_tokens)
            return _spaced(line) + b"\n"
        out = b""
        if index == 0:
            out += self._chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                 "finish_reason": None}], prompt_token_ids=None)
        choice: dict[str, object] = {"index": 0, "delta": {"content": text}, "logprobs": None}
        if last:
            choice.update(finish_reason="length", stop_reason=None, token_ids=None)
        else:
            choice.update(finish_reason=None, token_ids=None)
        out += self._chunk([choice])
        if last:
            if self.counts and self.request.stream_usage:
                out += self._chunk([], usage=self.usage())
            out += b"data: [DONE]\n\n"
        return out

    def error(self, sent: int) -> bytes:
        """The bytes that end the stream with this format's in-band error after `sent` tokens."""
        if self.fmt == TGI:
            return b"data:" + orjson.dumps({"error": TGI_ERROR, "error_type": TGI_ERROR_TYPE}) + b"\n\n"
        if self.fmt == LMI:
            line: dict[str, object] = {"token": dict(LMI_ERROR_TOKEN), "generated_text": "".join(self.words)}
            line["details"] = (self._lmi_details("error", sent + 1) if self.details  # the error token is in the list
                               else {"finish_reason": "error"})
            return _spaced(line) + b"\n"
        out = b""
        if sent == 0:  # vLLM sends the role chunk before it reads the first output
            out += self._chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                 "finish_reason": None}], prompt_token_ids=None)
        return out + b"data: " + _spaced({"error": VLLM_ERROR}) + b"\n\ndata: [DONE]\n\n"

    def _lmi_details(self, finish_reason: str, generated: int) -> dict:
        return {"finish_reason": finish_reason, "generated_tokens": generated, "inputs": self.request.prompt}

    def usage(self) -> dict:
        """vLLM's UsageInfo, in its field order."""
        p, n = self.request.prompt_tokens, self.output_tokens
        return {"prompt_tokens": p, "total_tokens": p + n, "completion_tokens": n}

    def _chunk(self, choices: list, **extra: object) -> bytes:
        chunk: dict[str, object] = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                                 "model": MODEL_NAME, "choices": choices, **extra}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def body(self) -> bytes:
        """The whole answer (InvokeEndpoint), after every token."""
        text = "".join(word(i) for i in range(self.output_tokens))
        if self.fmt in (TGI, LMI):
            answer: dict[str, object] = {"generated_text": text}
            if self.details:
                answer["details"] = ({"finish_reason": "length", "generated_tokens": self.output_tokens, "seed": None}
                                     if self.fmt == TGI else self._lmi_details("length", self.output_tokens))
            return orjson.dumps([answer]) if self.fmt == TGI else _spaced(answer)
        completion: dict[str, object] = {"id": self.id, "object": "chat.completion", "created": self.created,
                                      "model": MODEL_NAME,
                                      "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                   "finish_reason": "length"}]}
        if self.counts:
            completion["usage"] = self.usage()
        return orjson.dumps(completion)
