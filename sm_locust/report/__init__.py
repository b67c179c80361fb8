"""The post-processor behind `sm-locust report` and `sm-locust compare`.

A finished run folder holds Locust's CSVs and `summary.json`; what the user wants from it is one
answer per step (throughput, latency, errors, what the endpoint's CPU and ModelLatency did, what it
costs) and one file to look at. This package does that in three layers (docs/ARCHITECTURE.md):

- read: `sm_locust.record.runfolder` (Locust CSVs, summary.json, options.json; shared with the
  gates) and `cloudwatch` (GetMetricData), behind the metric-source registry in `sources`; every
  gap found is written down, not raised;
- compute: `merge` (per-second timeline and per-step records), `cost` (prices, $ per 1M,
  autoscaling target) - pure functions over plain data and DataFrames;
- render: `render` (one self-contained HTML file) and `pipeline` (writes the CSVs, the HTML and
  the `cloudwatch`/`cost` keys of summary.json).

Importing this package imports nothing heavy; pandas and plotly load with the module that needs
them.
"""
