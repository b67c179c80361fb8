"""Write examples/llm/tokenizer.json: a small byte-level BPE tokenizer (Hugging Face `tokenizers`
format) for the offline examples of docs/llm.md, trained on the prompts of examples/llm/prompts.csv.

A real run gives `--tokenizer` the model's own tokenizer.json (its Hugging Face snapshot folder);
this one only stands in for it, so the examples run without a download.

    python examples/llm/make_tokenizer.py     # needs: pip install 'sm-locust[tokenizer]'
"""

from __future__ import annotations

import csv
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = Path(__file__).parent
VOCABULARY = 600


def main() -> None:
    with open(HERE / "prompts.csv", newline="", encoding="utf-8") as fh:
        lines = [row["question"] for row in csv.DictReader(fh)]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCABULARY, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(lines * 10, trainer)
    tokenizer.save(str(HERE / "tokenizer.json"))


if __name__ == "__main__":
    main()
