"""The `serverless` sweep kind: memory size x MaxConcurrency, three tests per configuration, cost
and the break-even against a real-time instance (docs/serverless.md).

`sweep.py` holds the kind's `Sweep` and its loader and lists the modules, one job each. This
package marker imports nothing, so the sweep file's checks (`spec.py`, held by `sweep/schema.py`)
do not load the deployers or the runner.
"""
