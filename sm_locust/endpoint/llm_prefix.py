"""Automatic prefix caching of the LLM emulation (`sm-locust serve --llm --llm-prefix-cache-blocks N`).

A prompt is cut into full blocks of `--llm-block-tokens` tokens (token ids by `--llm-tokenizer`, else
words); each block's key hashes its parent block's key with its own tokens, so a key names the whole
prefix up to the block's end, and a LoRA adapter's requests start their chain from the adapter's name,
as vLLM's automatic prefix caching keys its KV-cache blocks (docs/facts.md, "Prefix caching in vLLM").
When a request is admitted to the batch, the longest run of its leading blocks already cached is a hit
and is not prefilled again; at least the prompt's last token is always prefilled (its logits make the
first output token), so a prompt that is all cached blocks recomputes its last block. Every full block
of the prompt is then cached, least recently used evicted first, at most N blocks; a prompt's blocks
are touched last to first, so its first blocks (the ones shared) are evicted last. Pure:
`PrefixCache` is fed block keys, `block_keys` makes them.
"""

from __future__ import annotations

import collections
import hashlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

KEY_BYTES = 8


def block_keys(tokens: Sequence[int] | Sequence[str], block: int, salt: str = "") -> tuple[bytes, ...]:
    """The chain key of each full `block`-token block of `tokens` (ids, or words): a hash of the parent
    block's key and the block's tokens, the first block's parent being `salt` (vLLM's extra key: the LoRA
    adapter, so adapters never share blocks). A partial last block has none (only full blocks are cached)."""
    keys: list[bytes] = []
    parent = hashlib.blake2b(salt.encode(), digest_size=KEY_BYTES).digest() if salt else b""
    for start in range(0, len(tokens) - block + 1, block):
        part = tokens[start:start + block]
        if isinstance(part[0], str):  # words hold no spaces: joined by one, unambiguous
            data = " ".join(cast(Sequence[str], part)).encode()
        else:
            data = array("q", cast(Sequence[int], part)).tobytes()
        parent = hashlib.blake2b(parent + data, digest_size=KEY_BYTES).digest()
        keys.append(parent)
    return tuple(keys)


@dataclass(frozen=True)
class PrefixLookup:
    """What the cache gave one admitted prompt, in blocks."""

    blocks: int
    """Full blocks in the prompt."""
    hits: int
    """Leading blocks found in the cache: not prefilled."""

    @property
    def misses(self) -> int:
        """Full blocks prefilled (not cached, or past the first one missing, or the last-token rule's)."""
        return self.blocks - self.hits


class PrefixCache:
    """An LRU of at most `capacity` block keys (one per worker: each worker is one model replica)."""

    def __init__(self, capacity: int, block_tokens: int):
        if capacity < 1 or block_tokens < 1:
            raise ValueError("a prefix cache holds at least 1 block of at least 1 token")
        self.capacity = capacity
        self.block_tokens = block_tokens
        self._keys: collections.OrderedDict[bytes, None] = collections.OrderedDict()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: bytes) -> bool:
        return key in self._keys

    def admit(self, keys: Sequence[bytes], tokens: int) -> PrefixLookup:
        """A prompt of `tokens` tokens whose full blocks have `keys` enters the batch: the hits among its
        leading blocks (at most those before its last token), then every block cached."""
        reusable = min(len(keys), max(0, tokens - 1) // self.block_tokens)
        hits = 0
        while hits < reusable and keys[hits] in self._keys:
            hits += 1
        for key in reversed(keys):  # last to first: the shared leading blocks are the most recent
            self._keys[key] = None
            self._keys.move_to_end(key)
        while len(self._keys) > self.capacity:
            self._keys.popitem(last=False)
            self.evictions += 1
        return PrefixLookup(len(keys), hits)
