"""The `realtime` sweep kind (the default): instance-backed endpoints, one plateau search each.

A sweep file without another kind's section is a real-time sweep: every configuration is a set
of serving settings (instance type, workers, threads, batching, environment), deployed by the
file's deployer and load-tested with a normal `sm-locust run` whose plateau search finds its
capacity; the cheapest configuration that meets the objective is recommended (docs/sweep.md).

    sweep.py     RealtimeSweep (the kind's hooks on base.Sweep) and `load` (its loader)
    measure.py   a run folder's summary.json -> the figures compared (pure)
    rows.py      the typed row: its price and its figures
    rank.py      eligibility, ranking, the recommendation (pure)
    render.py    sweep.json's CSV and page, the line printed per configuration
"""
