"""The `async` sweep kind: instance count x MaxConcurrentInvocationsPerInstance of an asynchronous
endpoint, each configuration's capacity found by the async search against a time-to-result SLO, priced
per 1M inferences from its instance-hours (docs/async.md, "Sweeping instances and workers").

`sweep.py` holds the kind's `Sweep` and its loader and lists the modules, one job each. This
package marker imports nothing, so the sweep file's checks (`spec.py`, held by `sweep/schema.py`)
do not load the deployers or the runner. (The package is not named `async`: a keyword in Python.)
"""
