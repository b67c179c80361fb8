"""`--log-requests`, declared apart from the request log itself (record/requests_log.py), which imports
gevent: every command's parser reads the options, and `sm-locust run`'s parent never loads gevent."""

from __future__ import annotations

from sm_locust.config.options import OptionSpec

OPTIONS: list[OptionSpec] = [
    OptionSpec("--log-requests", "SM_LOCUST_LOG_REQUESTS", False,
               "write one row per request (send time, TTFT, e2e latency, tokens, ITL p50/max, error, worker) to the "
               "run folder's requests.jsonl.gz, rotated and bounded (dropped rows counted)", bool,
               web_ui=False),  # an output option, as --sm-out: set when the run starts, not on the form
]
