"""A model's own tokenizer, read offline from a local `tokenizer.json` (`--tokenizer PATH`).

`load_tokenizer(path)` takes the file or a folder holding one; the `tokenizers` package is an
optional extra, imported only when a tokenizer is asked for. A prompt's length is its content's
tokens, without special tokens (`add_special_tokens=False`: the server's template adds its own).
`exact_prompt` writes a prompt of exactly `length` tokens under any counter; `estimate_tokens` is
the counter when no tokenizer is given.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sm_locust.errors import UsageError
from sm_locust.llm.tokens import estimate_tokens

FILE = "tokenizer.json"
EXTRA = "pip install 'sm-locust[tokenizer]' (or: pip install tokenizers)"
MIN_WORDS = 8
"""A tokenizer with fewer one-token words than this cannot make varied prompts."""
MAX_VOCAB_WORDS = 512
"""One-token words taken from the tokenizer's own vocabulary when the English list has too few."""

Counter = Callable[[str], int]


@dataclass(frozen=True)
class Tokenizer:
    """A loaded tokenizer: `count(text)`, the text's content tokens."""

    path: str
    backend: Any

    def count(self, text: str) -> int:
        return len(self.backend.encode(text, add_special_tokens=False).ids)

    def vocabulary_words(self) -> list[str]:
        """Alphabetic pieces of the vocabulary, as text (sorted, so a seeded run repeats)."""
        words = set()
        for piece_id in sorted(self.backend.get_vocab().values()):
            text = self.backend.decode([piece_id]).strip()
            if text.isalpha():
                words.add(text)
        return sorted(words)


def text_counter(path: str | Path | None) -> Counter:
    """The token counter of `--tokenizer` (`path`), else the words-and-punctuation estimate."""
    return load_tokenizer(path).count if path else estimate_tokens


@functools.lru_cache(maxsize=4)  # each User asks; a model's tokenizer.json takes ~0.1 s to load
def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer at `path` (a tokenizer.json, or a folder holding one); a one-line UsageError when
    the file is missing or unreadable, or the `tokenizers` package is not installed."""
    where = Path(path)
    file = where / FILE if where.is_dir() else where
    if not file.is_file():
        hint = f"the folder holds no {FILE}" if where.is_dir() else "no such file"
        raise UsageError(f"--tokenizer {str(path)!r}: {hint}; give a Hugging Face {FILE} or the folder holding it")
    try:
        from tokenizers import Tokenizer as Backend  # lazy: an optional extra, imported only when asked for
    except ImportError:
        raise UsageError(f"--tokenizer needs the tokenizers package, not installed: {EXTRA}") from None
    try:
        backend = Backend.from_file(str(file))
    except Exception as exc:  # the library raises its own Exception subclass for a bad file
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"--tokenizer {str(file)!r} is not a Hugging Face {FILE} ({first[:200]}); "
                         "give the tokenizer.json of the model's snapshot") from None
    return Tokenizer(str(file), backend)


def one_token_words(count: Counter, candidates: Sequence[str]) -> list[str]:
    """The candidates that count one token alone and one each in a row (so a prompt of n of them,
    space-separated, is n tokens)."""
    return [w for w in candidates if count(w) == 1 and count(f"{w} {w} {w}") == 3]


def words_for(tokenizer: Tokenizer, english: Sequence[str]) -> list[str]:
    """The one-token words to write prompts with under `tokenizer`: the English list's, else its
    vocabulary's; a UsageError when it has too few."""
    words = one_token_words(tokenizer.count, english)
    if len(words) < MIN_WORDS:
        words = one_token_words(tokenizer.count, tokenizer.vocabulary_words()[:MAX_VOCAB_WORDS * 4])[:MAX_VOCAB_WORDS]
    if len(words) < MIN_WORDS:
        raise UsageError(f"--tokenizer {tokenizer.path!r}: fewer than {MIN_WORDS} words count one token each, "
                         "so synthetic prompts cannot be made to exact lengths; use a dataset (--prompts FILE)")
    return words


def exact_prompt(rng: random.Random, length: int, words: Sequence[str], count: Counter, head: str = "") -> str:
    """`head` (when given) and one-token words after it, `length` tokens by `count` in all; a
    UsageError when the counter will not land on `length` (a tokenizer that merges across words)."""
    body = rng.choices(words, k=max(0, length - (count(head) if head else 0)))
    for _ in range(64):
        text = " ".join([head, *body]) if head else " ".join(body)
        have = count(text)
        if have == length:
            return text
        if have < length:
            body.extend(rng.choices(words, k=length - have))
        elif body:
            del body[max(0, len(body) - (have - length)):]
        else:
            break
    raise UsageError(f"cannot write a prompt of exactly {length} tokens with this tokenizer (its words merge "
                     "across spaces); use a dataset (--prompts FILE)")
