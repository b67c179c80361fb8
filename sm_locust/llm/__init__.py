"""LLM endpoints measured in tokens: the pure parts shared by the request side, the recorder, the
local endpoint's emulation and the plateau objective (token accounting, in-band errors, length
distributions, tokenizers; docs/llm.md).

Nothing here imports Locust, gevent or the other sm_locust packages: they import this.
"""
