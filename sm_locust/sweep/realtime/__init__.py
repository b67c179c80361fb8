"""The `realtime` sweep kind (the default): instance-backed endpoints, one plateau search each.

Every configuration is a set of serving settings (instance type, workers, threads, batching,
environment), deployed by the file's deployer and load-tested by a normal `sm-locust run` whose
plateau search finds its capacity; the cheapest one that meets the objective is recommended
(docs/sweep.md).
"""
