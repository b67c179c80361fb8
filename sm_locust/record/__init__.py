"""What a run leaves behind: recording it inside Locust, and reading the run folder afterwards.

One package for the run folder, from both ends:

- `recorder`: `RunRecorder`, the Locust listener that samples the per-second timeline
  (`sm_locust.measure.timeline.Second`) on the local runner or master, appends it to
  `timeline.jsonl` and rewrites `summary.json` every minute and at the end;
- `accumulate`: `RunTimeline`, what the recorder keeps of a running test (the last minutes, the
  step under way, finished steps' records, hourly records): bounded memory however long the run;
- `timeline`: timeline.jsonl's line format, its writer and its fast readers;
- `summary`: the schema-1 `summary.json` (docs/summary.md) built from plain data, its per-step
  records (adapted from `sm_locust.measure.steady`, the one implementation of per-step figures),
  the run folder's time format (`iso`) and atomic JSON writes;
- `workers`: on a master, connected and lost workers into summary.json, `--expect-workers` timeout;
- `runfolder`: the one reader of a finished (or killed) run folder (`RunData`: summary.json,
  options.json, timeline.jsonl, Locust's CSVs), shared by `sm_locust.gates` and `sm_locust.report`.

`recorder` and `workers` are Locust-facing; `summary`, `accumulate`, `timeline` and `runfolder` are
not, so the report and the gates import them without Locust. This file imports nothing, so importing
one of them loads only what that one needs.
"""
