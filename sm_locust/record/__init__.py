"""What a run leaves behind: recording it inside Locust, and reading the run folder afterwards.

One package for the run folder, from both ends:

- `recorder`: `RunRecorder`, the Locust listener that samples the per-second timeline
  (`sm_locust.plateau.timeline.Second`) on the local runner or master and writes `summary.json`
  and `timeline.json`;
- `summary`: the schema-1 `summary.json` (docs/summary.md) built from plain data, its per-step
  records (adapted from `sm_locust.plateau.steady`, the one implementation of per-step figures),
  the run folder's time format (`iso`) and atomic JSON writes;
- `workers`: on a master, connected and lost workers into summary.json, `--expect-workers` timeout;
- `runfolder`: the one reader of a finished run folder (`RunData`: summary.json, options.json,
  Locust's CSVs), shared by `sm_locust.gates` and `sm_locust.report`.

`recorder` and `workers` are Locust-facing; `summary` and `runfolder` are not, so the report and
the gates import them without Locust. This file imports nothing, so importing one of them loads
only what that one needs.
"""
