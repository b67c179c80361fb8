"""Autoscaling tests (issue 20): does a target-tracking policy hold the SLO while the fleet grows, and
what does it cost? docs/autoscaling.md.

Pure parts, no I/O (fed data, tested with synthetic series):

    timeline.py   InstanceSample (desired / in service at a run second), MetricPeriod, RunClock
    policy.py     ScalingPolicy, the metrics (METRICS), TargetTracking: Application Auto Scaling's loop
    simulate.py   the loop run over a traffic pattern: the model's decisions and instance timeline
    figures.py    timelines -> summary.json `autoscaling` (scale events, instance-hours, breaches, flaps)

At the edges: the local fleet emulation (`sm_locust.endpoint.fleet`), the SageMaker calls and the
DescribeEndpoint poller (`aws.py`), the autoscaling sweep kind (`sm_locust.sweep.autoscaling`).
"""
