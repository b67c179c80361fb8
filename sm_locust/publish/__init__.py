"""Live metrics (docs/live-metrics.md): the client's figures published while a run goes, where teams
already look.

`options` (`--publish`, `--publish-period`, `--publish-namespace`, `--dashboard`; none from the web UI)
-> `live.LivePublisher` on the master or local runner (workers publish nothing) -> CloudWatch custom
metrics (`interval`, `metric_data`, `sender`), a dashboard (`dashboard`), and `/metrics` for
Prometheus (`prometheus`). `verify` reads back what CloudWatch holds and compares it with
summary.json.
"""
