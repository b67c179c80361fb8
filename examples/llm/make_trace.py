"""Write examples/llm/trace.jsonl: a small request trace in Mooncake's format for docs/llm.md's example.

60 requests over 20 s from 12 chats: every prompt starts with one shared 512-token block (a system
prompt), and each chat's later turns repeat its earlier blocks (its history) and add their own, as
the published Mooncake traces do (docs/facts.md). Seeded: the file is the same on every run.

    python examples/llm/make_trace.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).parent
BLOCK = 512
CHATS, REQUESTS, DURATION_MS = 12, 60, 20_000


def main() -> None:
    rng = random.Random(39)
    next_id = 1
    history: dict[int, list[int]] = {}
    rows = []
    for timestamp in sorted(rng.randrange(DURATION_MS) for _ in range(REQUESTS)):
        chat = rng.randrange(CHATS)
        blocks = history.get(chat, [0])
        length = len(blocks) * BLOCK + rng.randrange(40, 400)  # the history, then this turn's new words
        ids = blocks + [next_id]
        next_id += 1
        history[chat] = ids if len(ids) < 6 else [0]  # a long chat starts again
        rows.append({"timestamp": timestamp, "input_length": length, "output_length": rng.randrange(8, 48),
                     "hash_ids": ids})
    (HERE / "trace.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


if __name__ == "__main__":
    main()
