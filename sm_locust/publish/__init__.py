"""Live metrics (issue 30, docs/live-metrics.md): the client's figures published while a run goes,
where teams already look.

`options` (`--publish`, `--publish-period`, `--publish-namespace`, `--dashboard`; none from the web UI)
-> `live.LivePublisher` on the master or local runner (reads the merged stats; workers publish
nothing) -> CloudWatch custom metrics (`interval`: periods as differences of cumulative readings,
`metric_data`: datums and calls within PutMetricData's limits, `sender`: bounded buffer, back-off,
an account of everything in summary.json `publish`), a dashboard (`dashboard`), and `/metrics`
for Prometheus (`prometheus`). `verify` reads back what CloudWatch holds and compares it with
summary.json (`sm-locust demo`, `sm-locust report`).
"""
