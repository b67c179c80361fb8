"""Pure load-search logic: steady-state step figures, stop conditions, plateau searches, IR traffic patterns.

Nothing here imports Locust, boto3, gevent or psutil, or does I/O: the Locust shapes and the CLI
(`sm_locust.shapes`, `sm_locust.cli`) are thin adapters that feed these objects with `Second`s from
`sm_locust.timeline` and act on their answers. See docs/plateau.md.
"""
