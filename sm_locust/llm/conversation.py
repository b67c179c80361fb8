"""Multi-turn chats (`--turns N`, messages template): one User's conversation, kept for N turns.

Each request carries the earlier turns: turn k sends 2k - 1 messages (user, assistant, ..., user;
a system message a dataset line starts with stays first), the assistant's being the text it streamed
(`answer_text`: OpenAI-style `delta.content` / `message.content`, TGI / LMI `token.text` /
`generated_text`). After N turns, or a failed turn (nothing to carry on from), a new conversation
starts. Closed-loop users keep one each (`conversational`); open-loop arrivals take up the conversation
answered longest ago (`OpenConversations`). Pure: bodies in, bodies out.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from sm_locust.invocation import Invocation
from sm_locust.llm.tokens import INPUT_TOKENS, TURN, estimate_tokens


class Conversation:
    """One User's chat: `next_body(body)` adds the history to a request body, `answered(text)` (None:
    the turn failed) records the answer."""

    def __init__(self, turns: int):
        self.turns = max(1, turns)
        self.history: list[dict] = []
        self.turn = 0
        """Turns sent in the current conversation (1 = its first)."""
        self._asked: list[dict] = []

    def next_body(self, body: bytes) -> tuple[bytes, int]:
        """(the request body with the conversation so far before its messages, this turn's number)."""
        body, turn, _messages = self.next_request(body)
        return body, turn

    def next_request(self, body: bytes) -> tuple[bytes, int, list[dict]]:
        """(the body with the conversation so far, this turn's number, the messages it carries)."""
        if self.turn >= self.turns:
            self.history, self.turn = [], 0
        doc = orjson.loads(body)
        asked = list(doc.get("messages") or [])
        if self.history and asked and asked[0].get("role") == "system":
            asked = asked[1:]  # the conversation keeps its first system message
        doc["messages"] = self.history + asked
        self._asked = asked
        self.turn += 1
        return orjson.dumps(doc), self.turn, doc["messages"]

    def answered(self, text: str | None) -> None:
        if text is None:  # a failed turn: the next request starts a new conversation
            self.history, self.turn = [], 0
            return
        self.history = self.history + self._asked + [{"role": "assistant", "content": text}]


def answer_text(result: object) -> str | None:
    """The generated text of a call's result (a StreamResult's chunks, or a whole body), None when it has
    none (a failed call)."""
    if result is None:
        return None
    chunks = getattr(result, "chunks", None)
    if chunks is not None:
        return "".join(_stream_texts(b"".join(chunks)))
    try:
        doc = orjson.loads(getattr(result, "body", b"") or b"null")
    except orjson.JSONDecodeError:
        return ""
    return "".join(_answer_texts(doc))


def _stream_texts(data: bytes) -> Iterable[str]:
    for raw in data.splitlines():
        line = raw.strip()
        if line.startswith(b"data:"):
            line = line[5:].strip()
        if not line.startswith(b"{"):
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        yield from _event_texts(obj)


def _event_texts(obj: object) -> Iterable[str]:
    if not isinstance(obj, dict):
        return
    token = obj.get("token")
    if isinstance(token, dict) and isinstance(token.get("text"), str) and not token.get("special"):
        yield token["text"]
    for choice in obj.get("choices") or []:
        if isinstance(choice, dict):
            delta = choice.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("content"), str):
                yield delta["content"]
            elif isinstance(choice.get("text"), str):
                yield choice["text"]


def _answer_texts(doc: object) -> Iterable[str]:
    for item in doc if isinstance(doc, list) else [doc]:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("generated_text"), str):
            yield item["generated_text"]
        for choice in item.get("choices") or []:
            message = choice.get("message") if isinstance(choice, dict) else None
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                yield message["content"]


def conversational(call: Callable, turns: int, count: Callable[[str], int] = estimate_tokens) -> Callable:
    """`call` (the User's send, token accounting included) with its requests made into `turns`-turn
    conversations, one per User (each User wraps its own call); the prompt's token count (`count`)
    covers the whole conversation sent, and the turn's number rides along (`TURN`: figures per turn)."""
    conversation = Conversation(turns)

    def send(invocation: Any, *args: Any, **kwargs: Any) -> Any:
        result, _text = _turn(conversation, call, count, invocation, args, kwargs)
        return result

    return send


def _turn(conversation: Conversation, call: Callable, count: Callable[[str], int], invocation: Invocation,
          args: tuple, kwargs: dict) -> tuple[object, str | None]:
    """One turn of `conversation` sent by `call`: (the result, the answer's text, None when it failed)."""
    body, turn, messages = conversation.next_request(invocation.body)
    extra = {**invocation.extra, INPUT_TOKENS: sum(count(str(m.get("content", ""))) for m in messages), TURN: turn}
    result = call(dataclasses.replace(invocation, body=body, extra=extra), *args, **kwargs)
    text = answer_text(result)
    conversation.answered(text)
    return result, text


class OpenConversations:
    """`--turns N` under open-loop arrivals: no user holds a conversation, so each arrival is the next turn of
    the conversation answered longest ago (one still waiting for its answer never sends), else the first turn
    of a new one. A conversation leaves after its N-th turn or a failed one. The arrivals keep their rate;
    the time between a conversation's turns is the wait for an arrival to take it up."""

    def __init__(self, call: Callable, turns: int, count: Callable[[str], int] = estimate_tokens):
        self.call = call
        self.turns = max(1, turns)
        self.count = count
        self.idle: collections.deque[Conversation] = collections.deque()
        """Conversations answered and not finished, the longest answered first (at most one per request
        answered, so no more than the requests in flight)."""
        self.started = 0

    def __call__(self, invocation: Invocation, *args: object, **kwargs: object) -> object:
        if self.idle:
            conversation = self.idle.popleft()
        else:
            conversation = Conversation(self.turns)
            self.started += 1
        result, text = _turn(conversation, self.call, self.count, invocation, args, kwargs)
        if text is not None and conversation.turn < self.turns:
            self.idle.append(conversation)
        return result
