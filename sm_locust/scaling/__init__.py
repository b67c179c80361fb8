"""Autoscaling tests: does a target-tracking policy hold the SLO while the fleet grows, and what does
it cost? docs/autoscaling.md.

The policy, its simulation, timelines and figures are pure (fed data, tested with synthetic series);
at the edges are the local fleet emulation (`sm_locust.endpoint.fleet`), the AWS calls and
DescribeEndpoint poller (`aws.py`), and the autoscaling sweep kind (`sm_locust.sweep.autoscaling`).
"""
