"""Write a Hugging Face `datasets` folder of examples/llm/prompts.csv for docs/llm.md's example, without `datasets`.

The folder holds what `datasets.Dataset.from_csv("examples/llm/prompts.csv").save_to_disk(FOLDER)` writes
(docs/facts.md, "Hugging Face datasets folders"): `data-00000-of-00001.arrow` (an Arrow IPC stream whose
schema carries the `huggingface` features metadata), `state.json` and `dataset_info.json`. With
`datasets` installed, that one line makes an equivalent folder.

    python examples/llm/make_saved_dataset.py reports/llm-prompts-dataset
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).parent
FEATURES = {"id": {"dtype": "int64", "_type": "Value"}, "question": {"dtype": "string", "_type": "Value"},
            "answer_tokens": {"dtype": "int64", "_type": "Value"}}


def main(folder: Path) -> None:
    with open(HERE / "prompts.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    table = pa.table({"id": [int(r["id"]) for r in rows], "question": [r["question"] for r in rows],
                      "answer_tokens": [int(r["answer_tokens"]) for r in rows]})
    table = table.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": FEATURES}})})
    folder.mkdir(parents=True, exist_ok=True)
    name = "data-00000-of-00001.arrow"
    with pa.OSFile(str(folder / name), "wb") as sink, pa.RecordBatchStreamWriter(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=1000)
    state = {"_data_files": [{"filename": name}], "_fingerprint": "examples-llm-prompts", "_format_columns": None,
             "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False, "_split": "train"}
    (folder / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    info = {"citation": "", "dataset_name": "prompts", "description": "docs/llm.md's example prompts",
            "features": FEATURES, "homepage": "", "license": ""}
    (folder / "dataset_info.json").write_text(json.dumps(info, indent=2))
    print(f"{len(rows)} rows written to {folder}/")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "reports/llm-prompts-dataset"))
