"""LLM endpoints measured in tokens: the pure parts shared by the request side, the recorder, the
local endpoint's emulation and the plateau objective.

- `tokens.py`: token accounting: TGI / LMI JSON lines and OpenAI-style SSE streams, non-streaming
  answers, the server's counts preferred; per-request TTFT / ITL / time per output token;
- `errors.py`: the containers' in-band errors (TGI's error event, LMI's error token, an OpenAI-style
  error chunk), named by format;
- `lengths.py`: token-length distributions (`128`, `64-256`, `128~32`) for synthetic prompts and
  emulated answers;
- `tokenizer.py`: a model's own tokenizer.json (`--tokenizer`, the optional `tokenizers` package) and
  prompts written to exact token lengths under any counter.

Nothing here imports Locust, gevent or the other sm_locust packages: they import this (docs/llm.md).
"""
